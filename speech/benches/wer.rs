//! Word error rate and speed of Whisper tiny.en on voice notes: how often
//! the transcriber gets a group chat's words wrong, and how fast it runs on
//! this machine.
//!
//! Each sentence below is spoken by espeak-ng in its default voice (and
//! every third one again in the voice the tests use: `en-us`, 150 words a
//! minute, gaps between words), encoded as Telegram sends a voice note
//! (opusenc, 24 kbit/s), decoded with `g2_speech::decode` and transcribed.
//! The sentences were written for this bench, not picked for what the model
//! hears well. A synthetic voice is no person's: the figures compare builds
//! and settings, they do not promise a rate on real notes.
//!
//! WER is the word-level Levenshtein distance over the reference's word
//! count, after a normalisation that only undoes spelling the model is free
//! to choose: lower case; every character but letters, digits and
//! apostrophes inside a word becomes a space; whole numbers 0 to 99 written
//! in digits become words ("7:30" is "seven thirty", "45" is "forty
//! five"). Currency signs, "300" and the like still count as errors.
//!
//! Reported: corpus WER (all edits over all reference words), mean WER per
//! sentence, sentences heard exactly, audio and transcription seconds, the
//! real-time factor (transcription time over audio time; under 1 is faster
//! than speech) overall and its median per sentence, and the process's peak
//! resident memory (VmHWM). One clip is transcribed first, untimed.
//!
//! Run: `cargo bench --workspace --locked --bench wer`; `G2_BENCH_SENTENCES=N`
//! runs the first N sentences only, `RAYON_NUM_THREADS` sets the threads.
//! Needs espeak-ng, opusenc and the model (`tools/models/whisper-tiny-en`
//! or `$G2_SPEECH_MODEL`), all from scripts/setup.sh.

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use g2_speech::{Audio, Transcriber, decode};

const SENTENCES: &[&str] = &[
    "Running late, sorry.",
    "See you there.",
    "Who is bringing the drinks?",
    "I'll be there in ten minutes.",
    "Can someone pick up Maya from the station at half past six?",
    "The restaurant on Baker Street is fully booked on Saturday, so let's try the Thai place near the river instead.",
    "Don't forget that rent is due on the first of the month.",
    "We need three more chairs for the party.",
    "Happy birthday, Tom! Hope you have a great day.",
    "Has anyone seen my blue umbrella? I think I left it at Sarah's flat last night.",
    "The meeting moved to Thursday at four.",
    "Okay, sounds good.",
    "I just got off the phone with the landlord and he says the heating engineer can come on Tuesday morning between eight and twelve, so someone needs to be home to let him in.",
    "Tickets are forty-five pounds each, and we need to book by Friday.",
    "Let's meet outside the cinema at a quarter to eight.",
    "My flight lands at eleven fifteen, terminal two.",
    "Does anyone have a phone charger I could borrow tomorrow?",
    "I'm making pasta tonight if anyone wants to come over.",
    "The kids have a football match on Sunday morning in the park by the school.",
    "Can you send me the address again?",
    "Priya says the hike is about twelve kilometres and takes around four hours, so bring water, snacks and proper shoes because the path gets muddy after rain.",
    "Traffic is terrible on the motorway.",
    "I owe you twenty dollars for the pizza.",
    "The train was delayed by fifteen minutes, but I should still make it before the speeches start.",
    "Who wants to split a taxi to the airport?",
    "Mum wants to know whether we are coming for lunch on Easter Sunday.",
    "Please water the plants while I am away.",
    "We won the quiz! First place out of fourteen teams.",
    "The dentist cancelled, so I'm free all afternoon.",
    "Remember to bring your passport and a printed copy of the booking.",
    "I can't find parking anywhere near the stadium, so I'll drop you at the gate and meet you inside.",
    "Jake and Emily are getting married in June!",
    "What time does the market close on Saturdays?",
    "It's raining again.",
    "The bill came to ninety-six pounds, which is twenty-four each.",
    "Could we move the barbecue to next weekend? The forecast says thunderstorms all day on Saturday and I don't want everyone standing under the garage roof again.",
    "Grandma is out of hospital and feeling much better.",
    "I'll bring the tent if someone else brings the camping stove.",
    "Is the gym open on bank holidays?",
    "The plumber fixed the leak but says the boiler is twenty years old and should be replaced before winter.",
    "Dinner is ready.",
    "Leaving the office now.",
    "Lucy got the job at the hospital!",
    "Can we do seven instead of six? I have a call that might run over.",
    "There are two spare seats in my car if anyone needs a lift to the wedding.",
    "Ben's band is playing at the Crown on Friday night, doors open at nine and entry is five pounds.",
    "I left the keys under the mat.",
    "The new coffee shop on the corner does really good croissants.",
    "Remind me to call the bank on Monday.",
    "We're thinking of renting a cottage in Cornwall for a week in August. There's room for eight people, and it works out at about sixty pounds a night each if we fill it.",
    "The bus is here, see you soon.",
    "How was the interview?",
    "Daniel lost his wallet on the tram, so if anyone finds a brown leather one, let him know.",
    "Sorry, I missed your call. I was in the shower.",
    "Shall we order Indian or Chinese?",
    "My sister arrives on Wednesday and stays until the end of next month.",
    "The school trip costs thirty pounds and the form has to be signed by Thursday.",
    "Anyone up for a run along the canal tomorrow at seven in the morning?",
    "I've put the photos from the holiday in the shared folder. There are about three hundred of them, so have a look and delete any you hate.",
    "Thanks for a lovely evening, everyone.",
    "The cat knocked over the Christmas tree again.",
    "Olivia needs eleven more people to sign up for the charity walk.",
    "Can you grab milk, bread and a dozen eggs on your way home?",
    "The landlord finally agreed to fix the window in the back bedroom.",
    "Sam, are you still coming to the concert, or should I sell your ticket to Rachel?",
    "We should leave by nine if we want to avoid the queues at the border.",
    "Quick update on Saturday: we'll meet at Laura's house at ten, drive to the lake in two cars, have a picnic around one, and then anyone who wants to can stay for the fireworks, which start at nine thirty.",
];

/// espeak-ng's voices: its default, and the tests' (`speak` in
/// tests/model.rs) for every third sentence.
const VOICES: [(&str, &[&str]); 2] = [
    ("default", &[]),
    ("en-us", &["-v", "en-us", "-s", "150", "-g", "4"]),
];

/// One transcribed clip.
struct Clip {
    voice: usize,
    words: usize,
    edits: usize,
    audio: Duration,
    took: Duration,
}

impl Clip {
    fn wer(&self) -> f64 {
        self.edits as f64 / self.words as f64
    }

    fn rtf(&self) -> f64 {
        self.took.as_secs_f64() / self.audio.as_secs_f64()
    }
}

fn fail(message: &str) -> ! {
    eprintln!("wer: {message}");
    std::process::exit(1);
}

fn need(tool: &str) {
    let found = Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        fail(&format!(
            "{tool} not found; scripts/setup.sh installs it (Debian: apt-get install {})",
            if tool == "opusenc" {
                "opus-tools"
            } else {
                tool
            }
        ));
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `sentence` spoken in `voice`, as a voice note: OGG/Opus at 24 kbit/s.
fn voice_note(dir: &Path, sentence: &str, voice: &[&str]) -> Vec<u8> {
    let (wav, ogg) = (dir.join("note.wav"), dir.join("note.ogg"));
    run(Command::new("espeak-ng")
        .args(voice)
        .arg("-w")
        .arg(&wav)
        .arg(sentence));
    run(Command::new("opusenc")
        .args(["--quiet", "--bitrate", "24"])
        .arg(&wav)
        .arg(&ogg));
    std::fs::read(&ogg).unwrap()
}

/// 0 to 99 in words, as separate words ("forty five").
fn number_words(n: u32) -> String {
    const ONES: [&str; 20] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: [&str; 10] = [
        "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    ];
    match n {
        0..=19 => ONES[n as usize].to_string(),
        _ if n.is_multiple_of(10) => TENS[n as usize / 10].to_string(),
        _ => format!("{} {}", TENS[n as usize / 10], ONES[n as usize % 10]),
    }
}

/// The words of `text` as WER compares them (see the top of the file).
fn normalise(text: &str) -> Vec<String> {
    let spaced: String = text
        .to_lowercase()
        .chars()
        .map(|c| match c {
            '\u{2019}' => '\'',
            c if c.is_alphanumeric() || c == '\'' => c,
            _ => ' ',
        })
        .collect();
    let mut words = Vec::new();
    for word in spaced.split_whitespace() {
        let word = word.trim_matches('\'');
        if word.is_empty() {
            continue;
        }
        match word.parse::<u32>() {
            Ok(n) if n < 100 && word.chars().all(|c| c.is_ascii_digit()) => {
                words.extend(number_words(n).split(' ').map(str::to_string));
            }
            _ => words.push(word.to_string()),
        }
    }
    words
}

/// Substitutions, insertions and deletions from `reference` to `heard`.
fn edits(reference: &[String], heard: &[String]) -> usize {
    let mut row: Vec<usize> = (0..=heard.len()).collect();
    for (i, r) in reference.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, h) in heard.iter().enumerate() {
            let next = (diagonal + usize::from(r != h))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[heard.len()]
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if !values.len().is_multiple_of(2) {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// The figures over some clips.
struct Summary {
    clips: usize,
    words: usize,
    edits: usize,
    corpus_wer: f64,
    mean_wer: f64,
    exact: usize,
    audio_s: f64,
    transcribe_s: f64,
    rtf: f64,
    rtf_p50: f64,
}

fn summary<'a>(clips: impl Iterator<Item = &'a Clip>) -> Summary {
    let clips: Vec<&Clip> = clips.collect();
    let n = clips.len();
    let words = clips.iter().map(|c| c.words).sum::<usize>();
    let edits = clips.iter().map(|c| c.edits).sum::<usize>();
    let audio_s = clips.iter().map(|c| c.audio.as_secs_f64()).sum::<f64>();
    let transcribe_s = clips.iter().map(|c| c.took.as_secs_f64()).sum::<f64>();
    Summary {
        clips: n,
        words,
        edits,
        corpus_wer: edits as f64 / words.max(1) as f64,
        mean_wer: clips.iter().map(|c| c.wer()).sum::<f64>() / n.max(1) as f64,
        exact: clips.iter().filter(|c| c.edits == 0).count(),
        audio_s,
        transcribe_s,
        rtf: transcribe_s / audio_s.max(f64::MIN_POSITIVE),
        rtf_p50: median(clips.iter().map(|c| c.rtf()).collect()),
    }
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The scoring, checked before any audio is made.
fn check_scoring() {
    assert_eq!(
        normalise("It's 7:30, the £45 one - Sarah's 300!"),
        [
            "it's", "seven", "thirty", "the", "forty", "five", "one", "sarah's", "300"
        ]
    );
    assert_eq!(normalise("'Quoted' words."), ["quoted", "words"]);
    let w = |s: &str| normalise(s);
    assert_eq!(edits(&w("a b c"), &w("a b c")), 0);
    assert_eq!(edits(&w("a b c"), &w("a x c")), 1);
    assert_eq!(edits(&w("a b c"), &w("a c")), 1);
    assert_eq!(edits(&w("a b c"), &w("a b c d")), 1);
    assert_eq!(edits(&w("a b c"), &w("")), 3);
    assert_eq!(edits(&w("a b"), &w("b a")), 2);
}

fn main() {
    check_scoring();
    need("espeak-ng");
    need("opusenc");
    let dir = std::env::var_os("G2_SPEECH_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tools/models/whisper-tiny-en")
        });
    let started = Instant::now();
    let model = Transcriber::load(&dir).unwrap_or_else(|e| {
        fail(&format!(
            "no speech model in {}: {e}; scripts/setup.sh makes it, or set G2_SPEECH_MODEL",
            dir.display()
        ))
    });
    let load = started.elapsed();
    let count = match std::env::var("G2_BENCH_SENTENCES") {
        Ok(v) => v
            .parse::<usize>()
            .unwrap_or_else(|_| fail(&format!("G2_BENCH_SENTENCES={v:?} is no number")))
            .clamp(1, SENTENCES.len()),
        Err(_) => SENTENCES.len(),
    };
    let work: Vec<(usize, usize)> = (0..count)
        .map(|i| (i, 0))
        .chain((0..count).step_by(3).map(|i| (i, 1)))
        .collect();
    let threads = rayon::current_num_threads();
    println!(
        "wer: {count} sentences in espeak-ng's default voice, {} again in en-us; \
         Whisper tiny.en on {threads} rayon threads, loaded in {:.2} s",
        work.len() - count,
        load.as_secs_f64()
    );

    let tmp = tempfile::tempdir().unwrap();
    let listen = |sentence: &str, voice: usize| -> Audio {
        let bytes = voice_note(tmp.path(), sentence, VOICES[voice].1);
        decode(&bytes).unwrap_or_else(|e| panic!("decoding {sentence:?}: {e}"))
    };
    // Untimed: the first call's one-time costs are not a sentence's.
    model.transcribe(&listen(SENTENCES[0], 0)).unwrap();

    println!("    # voice    words edits   WER   RTF  (when not exact)");
    let mut clips = Vec::with_capacity(work.len());
    for &(i, voice) in &work {
        let sentence = SENTENCES[i];
        let audio = listen(sentence, voice);
        let t = Instant::now();
        let heard = model
            .transcribe(&audio)
            .unwrap_or_else(|e| panic!("transcribing {sentence:?}: {e}"));
        let took = t.elapsed();
        let reference = normalise(sentence);
        let clip = Clip {
            voice,
            words: reference.len(),
            edits: edits(&reference, &normalise(&heard)),
            audio: audio.duration,
            took,
        };
        let note = if clip.edits == 0 {
            String::new()
        } else {
            format!("heard {heard:?}\n{:40}said  {sentence:?}", "")
        };
        println!(
            "  {:3} {:8} {:5} {:5} {:5.2} {:5.2}  {note}",
            i + 1,
            VOICES[voice].0,
            clip.words,
            clip.edits,
            clip.wer(),
            clip.rtf()
        );
        clips.push(clip);
    }
    let peak = peak_rss_kib();

    println!();
    println!(
        "  {:8} {:>5} {:>6} {:>5} {:>7} {:>6} {:>5} {:>8} {:>8} {:>5} {:>5}",
        "voice",
        "clips",
        "words",
        "edits",
        "WER",
        "mean",
        "exact",
        "audio s",
        "trans s",
        "RTF",
        "p50"
    );
    let rows = [
        ("default", summary(clips.iter().filter(|c| c.voice == 0))),
        ("en-us", summary(clips.iter().filter(|c| c.voice == 1))),
        ("all", summary(clips.iter())),
    ];
    for (name, s) in &rows {
        println!(
            "  {name:8} {:5} {:6} {:5} {:6.1}% {:5.1}% {:5} {:8.1} {:8.1} {:5.3} {:5.3}",
            s.clips,
            s.words,
            s.edits,
            100.0 * s.corpus_wer,
            100.0 * s.mean_wer,
            s.exact,
            s.audio_s,
            s.transcribe_s,
            s.rtf,
            s.rtf_p50
        );
    }
    println!(
        "  peak RSS {:.1} MiB; {:.0} s in all",
        peak as f64 / 1024.0,
        started.elapsed().as_secs_f64()
    );
    let figures = |s: &Summary| {
        serde_json::json!({
            "clips": s.clips,
            "words": s.words,
            "edits": s.edits,
            "corpus_wer": s.corpus_wer,
            "mean_wer": s.mean_wer,
            "exact": s.exact,
            "audio_s": s.audio_s,
            "transcribe_s": s.transcribe_s,
            "rtf": s.rtf,
            "rtf_p50": s.rtf_p50,
        })
    };
    let json = serde_json::json!({
        "bench": "wer",
        "model": "whisper-tiny-en",
        "threads": threads,
        "sentences": count,
        "load_s": load.as_secs_f64(),
        "peak_rss_kib": peak,
        "default": figures(&rows[0].1),
        "en_us": figures(&rows[1].1),
        "all": figures(&rows[2].1),
    });
    println!("{json}");
}
