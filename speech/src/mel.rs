//! The mel filter bank Whisper was trained with, computed rather than
//! shipped: librosa's `filters.mel(sr=16000, n_fft=400, n_mels=80)`, the
//! Slaney mel scale with Slaney's area normalisation (what Whisper's
//! `mel_filters.npz` holds).

/// Hz to mel on the Slaney scale: linear below 1 kHz, logarithmic above.
fn hz_to_mel(hz: f64) -> f64 {
    const F_SP: f64 = 200.0 / 3.0;
    const MIN_LOG_HZ: f64 = 1000.0;
    const MIN_LOG_MEL: f64 = MIN_LOG_HZ / F_SP;
    let logstep = 6.4f64.ln() / 27.0;
    if hz >= MIN_LOG_HZ {
        MIN_LOG_MEL + (hz / MIN_LOG_HZ).ln() / logstep
    } else {
        hz / F_SP
    }
}

fn mel_to_hz(mel: f64) -> f64 {
    const F_SP: f64 = 200.0 / 3.0;
    const MIN_LOG_HZ: f64 = 1000.0;
    const MIN_LOG_MEL: f64 = MIN_LOG_HZ / F_SP;
    let logstep = 6.4f64.ln() / 27.0;
    if mel >= MIN_LOG_MEL {
        MIN_LOG_HZ * (logstep * (mel - MIN_LOG_MEL)).exp()
    } else {
        F_SP * mel
    }
}

/// `n_mels` triangular filters over the `n_fft / 2 + 1` bins of an FFT at
/// `rate`, from 0 Hz to Nyquist, row after row (`n_mels × (n_fft/2 + 1)`,
/// the layout candle's `pcm_to_mel` reads).
pub fn filters(rate: u32, n_fft: usize, n_mels: usize) -> Vec<f32> {
    let bins = n_fft / 2 + 1;
    let rate = f64::from(rate);
    let fft_hz: Vec<f64> = (0..bins).map(|k| k as f64 * rate / n_fft as f64).collect();
    // n_mels + 2 points evenly spaced in mel: each filter spans three.
    let (lo, hi) = (hz_to_mel(0.0), hz_to_mel(rate / 2.0));
    let points: Vec<f64> = (0..n_mels + 2)
        .map(|i| mel_to_hz(lo + (hi - lo) * i as f64 / (n_mels + 1) as f64))
        .collect();
    let mut out = vec![0f32; n_mels * bins];
    for (m, row) in out.chunks_exact_mut(bins).enumerate() {
        let (left, centre, right) = (points[m], points[m + 1], points[m + 2]);
        // Slaney: each filter has unit area, so wide filters are lower.
        let norm = 2.0 / (right - left);
        for (w, &f) in row.iter_mut().zip(&fft_hz) {
            let rising = (f - left) / (centre - left);
            let falling = (right - f) / (right - centre);
            *w = (rising.min(falling).max(0.0) * norm) as f32;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whisper_80_bins_match_its_mel_filters_npz() {
        let f = filters(16_000, 400, 80);
        assert_eq!(f.len(), 80 * 201);
        let at = |m: usize, k: usize| f[m * 201 + k];
        // Values read from openai-whisper's assets/mel_filters.npz (mel_80).
        for (m, k, want) in [
            (0, 1, 0.024_862_595),
            (1, 1, 0.001_990_822),
            (1, 2, 0.022_871_772),
            (40, 42, 0.005_411_105),
            (40, 43, 0.014_735_566),
            (40, 44, 0.006_518_19),
            (79, 186, 0.000_366_741_67),
            (79, 189, 0.001_765_726_8),
        ] {
            assert!((at(m, k) - want).abs() < 1e-7, "[{m}][{k}] {}", at(m, k));
        }
        assert_eq!(at(0, 0), 0.0);
        assert_eq!(at(0, 2), 0.0);
        // Row sums of the npz: about 0.025 each, the highest filters not
        // reaching the last bin.
        for (m, want) in [(0, 0.024_862_6), (40, 0.026_664_86), (79, 0.024_925_34)] {
            let sum: f32 = f[m * 201..(m + 1) * 201].iter().sum();
            assert!((sum - want).abs() < 1e-6, "row {m} sums to {sum}");
        }
        assert!(f.iter().all(|w| w.is_finite() && *w >= 0.0));
    }

    #[test]
    fn the_scale_is_linear_below_1_khz_and_round_trips() {
        assert!((hz_to_mel(1000.0) - 15.0).abs() < 1e-12);
        assert!((hz_to_mel(500.0) - 7.5).abs() < 1e-12);
        for hz in [0.0, 100.0, 999.0, 1000.0, 4000.0, 8000.0] {
            assert!((mel_to_hz(hz_to_mel(hz)) - hz).abs() < 1e-9);
        }
    }
}
