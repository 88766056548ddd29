//! Bytes of a voice note to 16 kHz mono samples.
//!
//! symphonia finds the container by its content (no file name is trusted)
//! and decodes MP3, AAC, FLAC, Vorbis and PCM itself; Opus, what Telegram
//! and WhatsApp voice notes are, goes to libopus through
//! symphonia-adapter-libopus. The channels are averaged, then rubato's FFT
//! resampler brings the rate to 16 kHz.

use std::io::Cursor;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::LazyLock;
use std::time::Duration;

use rubato::audioadapter_buffers::direct::InterleavedSlice;
use rubato::{Fft, FixedSync, Resampler};
use symphonia::core::codecs::audio::AudioDecoderOptions;
use symphonia::core::codecs::registry::CodecRegistry;
use symphonia::core::common::Limit;
use symphonia::core::errors::Error as MediaError;
use symphonia::core::formats::probe::Hint;
use symphonia::core::formats::{FormatOptions, TrackType};
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;

use crate::Error;

/// The rate Whisper hears at.
pub const SAMPLE_RATE: u32 = 16_000;

/// How much audio [`decode`] keeps before it gives up on a file: voice
/// notes are minutes long, and a few KB of Opus or FLAC silence can claim
/// hours (10 minutes at 48 kHz is 115 MB of samples while decoding).
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 60);

/// Rates outside this range are not audio a person sends, and an absurd
/// one would size the resampler's FFT after it.
const RATES: std::ops::RangeInclusive<u32> = 4_000..=384_000;

/// Consecutive packets that fail to decode before the file is given up:
/// a damaged packet is skipped, a stream of them is not audio.
const MAX_BAD_PACKETS: usize = 100;

/// Decoded audio: mono f32 samples at 16 kHz and the duration.
#[derive(Clone, Default)]
pub struct Audio {
    /// Mono, 16 kHz, in [-1, 1].
    pub samples: Vec<f32>,
    /// How long the samples last.
    pub duration: Duration,
}

impl std::fmt::Debug for Audio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audio")
            .field("samples", &self.samples.len())
            .field("duration", &self.duration)
            .finish()
    }
}

impl Audio {
    /// Samples already at 16 kHz mono (anything else is for [`decode`]).
    pub fn from_samples(samples: Vec<f32>) -> Self {
        let duration = duration_of(samples.len(), SAMPLE_RATE);
        Self { samples, duration }
    }
}

fn duration_of(frames: usize, rate: u32) -> Duration {
    Duration::from_secs_f64(frames as f64 / f64::from(rate.max(1)))
}

/// symphonia's decoders and libopus's, once: Opus is not among symphonia's
/// own.
static CODECS: LazyLock<CodecRegistry> = LazyLock::new(|| {
    let mut registry = CodecRegistry::new();
    symphonia::default::register_enabled_codecs(&mut registry);
    registry.register_audio_decoder::<symphonia_adapter_libopus::OpusDecoder>();
    registry
});

/// Decodes OGG/Opus (Telegram's and WhatsApp's voice notes), WebM/Opus,
/// MP3, M4A/AAC, WAV, FLAC and OGG/Vorbis from bytes, to 16 kHz mono.
///
/// The format is told by the content. Audio longer than [`MAX_DURATION`]
/// is an error ([`decode_at_most`] sets another limit), found while
/// decoding, so a hostile file costs at most that much. A truncated file
/// gives the audio before the cut; bytes that are no audio give an error,
/// never a panic.
pub fn decode(bytes: &[u8]) -> Result<Audio, Error> {
    decode_at_most(bytes, MAX_DURATION)
}

/// [`decode`] with `max` as the longest audio accepted.
pub fn decode_at_most(bytes: &[u8], max: Duration) -> Result<Audio, Error> {
    // The decoders are parsers of untrusted bytes: a panic in one (a bug
    // some input finds) is that input's error, not the caller's crash.
    let (rate, mono) = catch_unwind(AssertUnwindSafe(|| decode_native(bytes, max)))
        .map_err(|_| Error::Decode("the decoder failed on this input".into()))??;
    let samples = catch_unwind(AssertUnwindSafe(|| resample(&mono, rate)))
        .map_err(|_| Error::Decode("resampling failed".into()))??;
    Ok(Audio::from_samples(samples))
}

/// The first audio track decoded and mixed to mono at its own rate.
fn decode_native(bytes: &[u8], max: Duration) -> Result<(u32, Vec<f32>), Error> {
    let source = MediaSourceStream::new(Box::new(Cursor::new(bytes)), Default::default());
    let mut meta = MetadataOptions::default();
    // Cover art is never needed here.
    meta.limit_visual_bytes = Limit::Maximum(0);
    let mut format = symphonia::default::get_probe()
        .probe(&Hint::new(), source, FormatOptions::default(), meta)
        .map_err(|e| unknown("not a known audio format", &e))?;
    let track = format
        .default_track(TrackType::Audio)
        .ok_or_else(|| Error::Unsupported("no audio track".into()))?;
    let track_id = track.id;
    let params = track
        .codec_params
        .as_ref()
        .and_then(|p| p.audio())
        .ok_or_else(|| Error::Unsupported("no audio track".into()))?;
    let mut decoder = CODECS
        .make_audio_decoder(params, &AudioDecoderOptions::default())
        .map_err(|e| unknown("audio codec not supported", &e))?;

    let mut rate = 0;
    let mut mono: Vec<f32> = Vec::new();
    let mut frame = Vec::new();
    let mut bad = 0;
    let mut last_error = None;
    loop {
        let packet = match format.next_packet() {
            Ok(Some(p)) => p,
            // The end; or a chained OGG stream (a second file after the
            // first), which a voice note is not.
            Ok(None) | Err(MediaError::ResetRequired) => break,
            // A file cut short: what came before the cut is the audio.
            Err(MediaError::IoError(_)) => break,
            Err(e) => {
                last_error = Some(e.to_string());
                break;
            }
        };
        if packet.track_id != track_id {
            continue;
        }
        let buffer = match decoder.decode(&packet) {
            Ok(b) => {
                bad = 0;
                b
            }
            Err(e @ (MediaError::DecodeError(_) | MediaError::IoError(_))) => {
                bad += 1;
                last_error = Some(e.to_string());
                if bad > MAX_BAD_PACKETS {
                    break;
                }
                continue;
            }
            Err(e) => return Err(Error::Decode(e.to_string())),
        };
        if buffer.frames() == 0 {
            continue;
        }
        let spec_rate = buffer.spec().rate();
        if rate == 0 {
            if !RATES.contains(&spec_rate) {
                return Err(Error::Unsupported(format!("sample rate {spec_rate} Hz")));
            }
            rate = spec_rate;
        } else if spec_rate != rate {
            return Err(Error::Decode(format!(
                "the sample rate changes from {rate} to {spec_rate} Hz"
            )));
        }
        let channels = buffer.spec().channels().count().max(1);
        buffer.copy_to_vec_interleaved(&mut frame);
        let scale = 1.0 / channels as f32;
        mono.extend(
            frame
                .chunks_exact(channels)
                .map(|c| clean(c.iter().sum::<f32>() * scale)),
        );
        if duration_of(mono.len(), rate) > max {
            return Err(Error::TooLong { limit: max });
        }
    }
    if mono.is_empty() {
        return Err(Error::Decode(match last_error {
            Some(e) => format!("no audio decoded: {e}"),
            None => "no audio in the input".into(),
        }));
    }
    Ok((rate, mono))
}

/// A sample Whisper can take: float PCM may hold NaN, infinities or
/// values past full scale.
fn clean(x: f32) -> f32 {
    if x.is_finite() {
        x.clamp(-1.0, 1.0)
    } else {
        0.0
    }
}

fn unknown(what: &str, e: &MediaError) -> Error {
    match e {
        MediaError::Unsupported(_) => Error::Unsupported(format!("{what}: {e}")),
        _ => Error::Decode(format!("{what}: {e}")),
    }
}

/// Mono samples at `rate` to [`SAMPLE_RATE`].
fn resample(mono: &[f32], rate: u32) -> Result<Vec<f32>, Error> {
    if rate == SAMPLE_RATE {
        return Ok(mono.to_vec());
    }
    let failed = |e: &dyn std::fmt::Display| Error::Decode(format!("resampling: {e}"));
    let mut resampler = Fft::<f32>::new(
        rate as usize,
        SAMPLE_RATE as usize,
        1024,
        1,
        FixedSync::Input,
    )
    .map_err(|e| failed(&e))?;
    let input = InterleavedSlice::new(mono, 1, mono.len()).map_err(|e| failed(&e))?;
    let out = resampler
        .process_all(&input, mono.len(), None)
        .map_err(|e| failed(&e))?;
    Ok(out.take_data())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A 16-bit mono WAV of `samples` at `rate`.
    fn wav(rate: u32, samples: &[i16]) -> Vec<u8> {
        let data = u32::try_from(samples.len() * 2).unwrap();
        let mut b = Vec::new();
        b.extend_from_slice(b"RIFF");
        b.extend_from_slice(&(36 + data).to_le_bytes());
        b.extend_from_slice(b"WAVEfmt ");
        b.extend_from_slice(&16u32.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes()); // PCM
        b.extend_from_slice(&1u16.to_le_bytes()); // mono
        b.extend_from_slice(&rate.to_le_bytes());
        b.extend_from_slice(&(rate * 2).to_le_bytes());
        b.extend_from_slice(&2u16.to_le_bytes());
        b.extend_from_slice(&16u16.to_le_bytes());
        b.extend_from_slice(b"data");
        b.extend_from_slice(&data.to_le_bytes());
        for s in samples {
            b.extend_from_slice(&s.to_le_bytes());
        }
        b
    }

    fn tone(rate: u32, hz: f32, secs: f32) -> Vec<i16> {
        let n = (rate as f32 * secs) as usize;
        (0..n)
            .map(|i| {
                let t = i as f32 / rate as f32;
                ((t * hz * std::f32::consts::TAU).sin() * 16_000.0) as i16
            })
            .collect()
    }

    #[test]
    fn a_wav_at_44100_comes_out_at_16000_with_its_length() {
        let audio = decode(&wav(44_100, &tone(44_100, 440.0, 2.0))).unwrap();
        let secs = audio.duration.as_secs_f64();
        assert!((secs - 2.0).abs() < 0.01, "{secs} s");
        assert!((audio.samples.len() as i64 - 32_000).abs() < 160);
        // The tone survives: its RMS is that of a sine at half scale.
        let mid = &audio.samples[4_000..28_000];
        let rms = (mid.iter().map(|x| x * x).sum::<f32>() / mid.len() as f32).sqrt();
        assert!((rms - 0.345).abs() < 0.02, "rms {rms}");
    }

    #[test]
    fn a_wav_at_16000_is_taken_as_is() {
        let samples = tone(16_000, 300.0, 0.5);
        let audio = decode(&wav(16_000, &samples)).unwrap();
        assert_eq!(audio.samples.len(), samples.len());
        assert!((audio.samples[100] - f32::from(samples[100]) / 32_768.0).abs() < 1e-4);
    }

    #[test]
    fn audio_over_the_limit_is_refused() {
        let bytes = wav(16_000, &tone(16_000, 300.0, 3.0));
        match decode_at_most(&bytes, Duration::from_secs(2)) {
            Err(Error::TooLong { limit }) => assert_eq!(limit, Duration::from_secs(2)),
            other => panic!("{other:?}"),
        }
        assert!(decode_at_most(&bytes, Duration::from_secs(4)).is_ok());
    }

    #[test]
    fn garbage_empty_and_text_are_errors() {
        let mut noise = Vec::with_capacity(1 << 16);
        let mut x: u32 = 0x1234_5678;
        for _ in 0..(1 << 16) {
            // xorshift: the same bytes every run.
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            noise.push(x as u8);
        }
        let inputs: [&[u8]; 5] = [
            &[],
            b"OggS",
            b"this is a text message, not a voice note",
            &noise,
            &[0xFF; 4096],
        ];
        for bytes in inputs {
            let got = decode(bytes);
            assert!(
                matches!(got, Err(Error::Decode(_) | Error::Unsupported(_))),
                "{} bytes: {got:?}",
                bytes.len()
            );
        }
    }

    #[test]
    fn a_truncated_or_damaged_wav_never_panics() {
        let bytes = wav(8_000, &tone(8_000, 200.0, 1.0));
        for cut in [0, 1, 11, 12, 43, 44, 45, 1000, bytes.len() - 1] {
            // An error or the audio before the cut: both are fine.
            let _ = decode(&bytes[..cut]);
        }
        let mut bad = bytes.clone();
        // A channel count of 0, then a rate of 0.
        bad[22] = 0;
        let _ = decode(&bad);
        let mut bad = bytes;
        bad[24..28].copy_from_slice(&0u32.to_le_bytes());
        assert!(decode(&bad).is_err());
    }
}
