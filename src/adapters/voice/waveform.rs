//! The waveform Telegram draws on a voice note, computed as its clients compute it: the
//! samples cut into 100 buckets, each bucket's peak, the peaks scaled so that 1.8 times
//! their mean (but at least 2500) is full height, each value 0..=31, packed 5 bits each,
//! least significant bit first, into 63 bytes (`DocumentAttributeAudio.waveform`). Only
//! `voice` (its parent) calls it.

/// How many values the waveform has.
pub const WAVEFORM_VALUES: usize = 100;
/// Its packed length: 100 values of 5 bits, rounded up to whole bytes.
pub const WAVEFORM_BYTES: usize = (WAVEFORM_VALUES * 5).div_ceil(8);

/// Telegram's packed waveform of `samples` (mono, any rate): always [`WAVEFORM_BYTES`] long;
/// silence (or no samples) gives all zeros.
pub fn waveform(samples: &[i16]) -> Vec<u8> {
    let n = samples.len();
    let peaks: Vec<u64> = (0..WAVEFORM_VALUES)
        .map(|b| {
            let (start, end) = (b * n / WAVEFORM_VALUES, (b + 1) * n / WAVEFORM_VALUES);
            samples[start..end]
                .iter()
                .map(|s| u64::from(s.unsigned_abs()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    // Telegram: peak = max(2500, mean * 1.8), values above it clipped.
    let sum: u64 = peaks.iter().sum();
    let full = (sum * 18 / (10 * WAVEFORM_VALUES as u64)).max(2500);
    let mut packed = vec![0u8; WAVEFORM_BYTES];
    for (i, peak) in peaks.iter().enumerate() {
        let value = (peak.min(&full) * 31 / full) as u8;
        for bit in 0..5 {
            if value >> bit & 1 == 1 {
                let at = i * 5 + bit;
                packed[at / 8] |= 1 << (at % 8);
            }
        }
    }
    packed
}
