//! The real model (scripts/setup.sh converts it into tools/models/) on
//! speech that espeak-ng synthesises, encoded as a phone would (opusenc,
//! lame). In CI a missing model or tool fails; elsewhere the test says what
//! is missing and passes.

// Tests fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use g2_speech::{Audio, Error, Transcriber, decode};

fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// `None` (and a note) when something the test needs is missing here; a
/// failure in CI, where setup installs everything.
fn missing(what: &str) -> Option<()> {
    if in_ci() {
        panic!("needed in CI: {what} (scripts/setup.sh installs it)");
    }
    eprintln!("not available: {what}; run scripts/setup.sh");
    None
}

/// One model for every test of this file: loading is the slow part.
fn model() -> Option<&'static Transcriber> {
    static MODEL: OnceLock<Result<Transcriber, String>> = OnceLock::new();
    let dir = std::env::var_os("G2_SPEECH_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tools/models/whisper-tiny-en")
        });
    let loaded = MODEL.get_or_init(|| {
        let t = Instant::now();
        let m = Transcriber::load(&dir).map_err(|e| e.to_string());
        eprintln!("model loaded in {:?}", t.elapsed());
        m
    });
    match loaded {
        Ok(m) => Some(m),
        Err(e) => missing(&format!("the speech model ({e})")).map(|()| unreachable!()),
    }
}

fn tool(name: &str) -> Option<()> {
    let found = Command::new(name)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if found { Some(()) } else { missing(name) }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `sentence` spoken by espeak-ng into `dir/name.wav` (22.05 kHz mono), with
/// a short gap between words: its voice is no person's, and tiny.en hears
/// its words better apart.
fn speak(dir: &Path, name: &str, sentence: &str) -> Option<PathBuf> {
    tool("espeak-ng")?;
    let wav = dir.join(format!("{name}.wav"));
    run(Command::new("espeak-ng")
        .args(["-v", "en-us", "-s", "150", "-g", "4", "-w"])
        .arg(&wav)
        .arg(sentence));
    Some(wav)
}

/// The words that carry a sentence, lower case, without punctuation.
fn content_words(text: &str) -> Vec<String> {
    const STOP: &[&str] = &[
        "a", "an", "the", "and", "or", "to", "of", "in", "on", "at", "for", "is", "it", "my", "i",
        "we", "be", "by", "with", "this", "that", "our",
    ];
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| w.trim_matches('\'').to_lowercase())
        .filter(|w| !w.is_empty() && !STOP.contains(&w.as_str()))
        .collect()
}

/// Asserts that at least 80% of `sentence`'s content words are in `heard`.
fn assert_heard(sentence: &str, heard: &str) {
    let want = content_words(sentence);
    let got = content_words(heard);
    let found = want.iter().filter(|w| got.contains(w)).count();
    let share = found as f64 / want.len() as f64;
    assert!(
        share >= 0.8,
        "heard {heard:?} for {sentence:?}: {found} of {} content words",
        want.len()
    );
}

/// Transcribes and reports the time against the audio's (the real-time
/// factor: under 1 is faster than speech).
fn transcribe(model: &Transcriber, audio: &Audio, what: &str) -> String {
    let t = Instant::now();
    let text = model.transcribe(audio).unwrap();
    let took = t.elapsed();
    eprintln!(
        "{what}: {:.1} s of audio in {:.2} s (RTF {:.2}): {text:?}",
        audio.duration.as_secs_f64(),
        took.as_secs_f64(),
        took.as_secs_f64() / audio.duration.as_secs_f64()
    );
    text
}

fn decode_timed(bytes: &[u8], what: &str) -> Audio {
    let t = Instant::now();
    let audio = decode(bytes).unwrap();
    eprintln!(
        "{what}: {} bytes decoded to {:.2} s in {:?}",
        bytes.len(),
        audio.duration.as_secs_f64(),
        t.elapsed()
    );
    audio
}

const NOTE: &str = "The train to London was cancelled, so I will take the bus instead.";

#[test]
fn an_ogg_opus_voice_note_is_transcribed() {
    let Some(model) = model() else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some(wav) = speak(dir.path(), "note", NOTE) else {
        return;
    };
    if tool("opusenc").is_none() {
        return;
    }
    // A voice note as Telegram sends one: OGG/Opus, mono, a low bitrate.
    let ogg = dir.path().join("note.ogg");
    run(Command::new("opusenc")
        .args(["--quiet", "--bitrate", "24"])
        .arg(&wav)
        .arg(&ogg));
    let audio = decode_timed(&std::fs::read(&ogg).unwrap(), "ogg/opus");
    let direct = decode(&std::fs::read(&wav).unwrap()).unwrap();
    let gap = audio.duration.abs_diff(direct.duration);
    assert!(
        gap < Duration::from_millis(30),
        "opus {audio:?}, wav {direct:?}"
    );
    assert_heard(NOTE, &transcribe(model, &audio, "ogg/opus"));
}

#[test]
fn one_thread_is_enough() {
    let Some(model) = model() else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some(wav) = speak(dir.path(), "one", NOTE) else {
        return;
    };
    // candle runs its products on the pool it is called from: the host
    // gives transcription a small one of its own.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let audio = decode(&std::fs::read(&wav).unwrap()).unwrap();
    let text = pool.install(|| transcribe(model, &audio, "one thread"));
    assert_heard(NOTE, &text);
}

#[test]
fn a_wav_voice_note_is_transcribed() {
    let Some(model) = model() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sentence = "The garden gate needs a new lock before the winter.";
    let Some(wav) = speak(dir.path(), "wav", sentence) else {
        return;
    };
    let audio = decode_timed(&std::fs::read(&wav).unwrap(), "wav");
    assert_heard(sentence, &transcribe(model, &audio, "wav"));
}

#[test]
fn an_mp3_voice_note_is_transcribed() {
    let Some(model) = model() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sentence = "Please remember to buy milk, eggs and fresh bread on the way home tonight.";
    let Some(wav) = speak(dir.path(), "mp3", sentence) else {
        return;
    };
    if tool("lame").is_none() {
        return;
    }
    let mp3 = dir.path().join("note.mp3");
    run(Command::new("lame")
        .args(["--quiet", "-b", "64"])
        .arg(&wav)
        .arg(&mp3));
    let audio = decode_timed(&std::fs::read(&mp3).unwrap(), "mp3");
    assert_heard(sentence, &transcribe(model, &audio, "mp3"));
}

#[test]
fn a_note_longer_than_one_window_is_heard_to_the_end() {
    let Some(model) = model() else { return };
    let dir = tempfile::tempdir().unwrap();
    let first = "Call the plumber about the kitchen sink on Monday.";
    let second = "Our flight to Lisbon leaves on Friday morning, so pack the passports.";
    let (Some(a), Some(b)) = (
        speak(dir.path(), "first", first),
        speak(dir.path(), "second", second),
    ) else {
        return;
    };
    // The first sentence, silence to 32 s, then the second: two windows.
    let mut samples = decode(&std::fs::read(a).unwrap()).unwrap().samples;
    samples.resize(32 * 16_000, 0.0);
    samples.extend(decode(&std::fs::read(b).unwrap()).unwrap().samples);
    let audio = Audio::from_samples(samples);
    let text = transcribe(model, &audio, "two windows");
    assert_heard(first, &text);
    assert_heard(second, &text);
}

#[test]
fn silence_has_no_words() {
    let Some(model) = model() else { return };
    let audio = Audio::from_samples(vec![0.0; 5 * 16_000]);
    assert_eq!(transcribe(model, &audio, "silence"), "");
    assert_eq!(model.transcribe(&Audio::default()).unwrap(), "");
}

#[test]
fn audio_past_the_limit_is_refused_before_any_work() {
    let Some(model) = model() else { return };
    let audio = Audio::from_samples(vec![0.0; 11 * 60 * 16_000]);
    let t = Instant::now();
    match model.transcribe(&audio) {
        Err(Error::TooLong { limit }) => assert_eq!(limit, g2_speech::MAX_DURATION),
        other => panic!("{other:?}"),
    }
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[test]
fn a_truncated_voice_note_gives_what_came_before_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let Some(wav) = speak(dir.path(), "cut", NOTE) else {
        return;
    };
    if tool("opusenc").is_none() {
        return;
    }
    let ogg = dir.path().join("cut.ogg");
    run(Command::new("opusenc")
        .args(["--quiet", "--bitrate", "24"])
        .arg(&wav)
        .arg(&ogg));
    let bytes = std::fs::read(&ogg).unwrap();
    let whole = decode(&bytes).unwrap();
    let half = decode(&bytes[..bytes.len() / 2]).unwrap();
    assert!(half.duration < whole.duration, "{half:?} vs {whole:?}");
    assert!(half.duration > whole.duration / 4, "{half:?} vs {whole:?}");
    // Every cut and a flipped byte in every 97: errors or audio, no panic.
    for cut in (0..bytes.len()).step_by(bytes.len() / 40 + 1) {
        let _ = decode(&bytes[..cut]);
    }
    let mut damaged = bytes;
    for i in (60..damaged.len()).step_by(97) {
        damaged[i] ^= 0x5A;
    }
    let _ = decode(&damaged);
}
