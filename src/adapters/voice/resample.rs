//! Resampling to Opus's 48 kHz: a polyphase windowed-sinc filter (16 taps each side, a
//! Blackman window, the cutoff at 90% of the input's Nyquist frequency so that nothing above it
//! aliases), exact for the common rates (22 050 Hz needs 320 phases) and with the phase
//! rounded to 1/1024 of a sample for unusual ones. Small and dependency-free: speech needs no
//! more. Only `voice` (its parent) calls it.

use super::VoiceError;

const OUT_RATE: u32 = 48_000;
const MIN_RATE: u32 = 8_000;
/// Taps on each side of the output instant.
const HALF: usize = 16;
/// The most filter phases kept (rates whose ratio to 48 kHz needs more share the nearest).
const MAX_PHASES: u64 = 1024;
/// The passband, as a fraction of the input's Nyquist frequency.
const CUTOFF: f64 = 0.9;

/// Accepts 8 000..=48 000 Hz.
pub(super) fn check_rate(rate_hz: u32) -> Result<(), VoiceError> {
    if (MIN_RATE..=OUT_RATE).contains(&rate_hz) {
        Ok(())
    } else {
        Err(VoiceError::UnsupportedRate(rate_hz))
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

fn sinc(x: f64) -> f64 {
    if x.abs() < 1e-12 {
        1.0
    } else {
        let px = std::f64::consts::PI * x;
        px.sin() / px
    }
}

/// One row of taps per phase: row `p` weighs input samples `i - HALF + 1 ..= i + HALF` for an
/// output at `i + p / phases`; each row sums to 1 (no ripple in the level).
fn table(phases: u64) -> Vec<[f32; 2 * HALF]> {
    let half = HALF as f64;
    (0..phases)
        .map(|p| {
            let frac = p as f64 / phases as f64;
            let mut row = [0f64; 2 * HALF];
            for (j, w) in row.iter_mut().enumerate() {
                // Distance from the output instant to input sample i + j - HALF + 1.
                let d = frac - (j as f64 - half + 1.0);
                let u = d / half;
                let window = if u.abs() >= 1.0 {
                    0.0
                } else {
                    let a = std::f64::consts::PI * u;
                    0.42 + 0.5 * a.cos() + 0.08 * (2.0 * a).cos()
                };
                *w = CUTOFF * sinc(CUTOFF * d) * window;
            }
            let sum: f64 = row.iter().sum();
            row.map(|w| (w / sum) as f32)
        })
        .collect()
}

/// `pcm` at `rate_hz` (checked by [`check_rate`]) as 48 kHz samples scaled to -1.0..=1.0.
pub(super) fn to_48k(pcm: &[i16], rate_hz: u32) -> Vec<f32> {
    let input: Vec<f32> = pcm.iter().map(|&s| f32::from(s) / 32768.0).collect();
    let g = gcd(u64::from(rate_hz), u64::from(OUT_RATE));
    let (up, down) = (u64::from(OUT_RATE) / g, u64::from(rate_hz) / g);
    if up == down {
        return input;
    }
    let phases = up.min(MAX_PHASES);
    let rows = table(phases);
    let out_len = (input.len() as u64 * up).div_ceil(down);
    let mut out = Vec::with_capacity(out_len as usize);
    for n in 0..out_len {
        let pos = n * down;
        let mut i = (pos / up) as usize;
        let mut p = ((pos % up) * phases + up / 2) / up;
        if p == phases {
            p = 0;
            i += 1;
        }
        let row = &rows[p as usize];
        // Input sample of tap j is i + j + 1 - HALF.
        let first = (i + 1).saturating_sub(HALF);
        let last = (i + HALF).min(input.len().saturating_sub(1));
        let mut acc = 0f32;
        for (k, x) in input.iter().enumerate().take(last + 1).skip(first) {
            acc += x * row[k + HALF - 1 - i];
        }
        out.push(acc.clamp(-1.0, 1.0));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tone keeps its level and frequency through 22 050 -> 48 000 Hz.
    #[test]
    fn a_tone_keeps_its_level_and_pitch() {
        let rate = 22_050u32;
        let tone: Vec<i16> = (0..rate)
            .map(|n| {
                let t = f64::from(n) / f64::from(rate);
                (16_000.0 * (2.0 * std::f64::consts::PI * 440.0 * t).sin()) as i16
            })
            .collect();
        let out = to_48k(&tone, rate);
        assert_eq!(out.len(), 48_000);
        // Compare with the ideal 48 kHz tone away from the edges.
        let worst = out[200..47_800]
            .iter()
            .enumerate()
            .map(|(k, y)| {
                let t = (k + 200) as f64 / 48_000.0;
                let ideal = 16_000.0 / 32_768.0 * (2.0 * std::f64::consts::PI * 440.0 * t).sin();
                (f64::from(*y) - ideal).abs()
            })
            .fold(0.0, f64::max);
        assert!(worst < 0.01, "worst error {worst}");
    }

    /// 48 kHz passes through; rates outside 8..48 kHz are refused.
    #[test]
    fn rates() {
        assert_eq!(to_48k(&[16_384, -16_384], 48_000), vec![0.5, -0.5]);
        assert!(check_rate(7_999).is_err());
        assert!(check_rate(96_000).is_err());
        assert_eq!(to_48k(&[0; 441], 44_100).len(), 480);
        // An unusual rate (phases rounded) still gives the right length.
        assert_eq!(to_48k(&[0; 22_051], 22_051).len(), 48_000);
    }
}
