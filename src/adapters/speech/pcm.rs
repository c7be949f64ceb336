//! Reading the providers' uncompressed audio into mono 16-bit samples: raw little-endian PCM
//! (OpenAI's `pcm`, Gemini's inline data), the rate a PCM MIME type names, and a PCM WAV file
//! (espeak-ng's output: RIFF/WAVE, the `fmt ` and `data` chunks; the sizes written when
//! streaming are placeholders, so `data` is read to the end). Pure; the clients turn an
//! [`AudioFault`] into `SpeechError::BadAudio` with the URL or program it came from.

/// Why audio is unreadable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AudioFault {
    #[error("{0} bytes of 16-bit PCM: an odd length (cut short?)")]
    OddLength(usize),
    #[error("expected 16-bit PCM audio, got {0:?}")]
    NotPcm(String),
    #[error("the rate in {0:?} is not a sample rate")]
    BadRate(String),
    #[error("not a WAV file ({0} bytes)")]
    NotWav(usize),
    #[error("a cut `fmt ` chunk")]
    CutFormat,
    #[error("`data` before `fmt `")]
    DataBeforeFormat,
    #[error("not 16-bit PCM (format {tag}, {bits} bits a sample)")]
    NotPcm16 { tag: u16, bits: u16 },
    #[error("no channels or no sample rate")]
    NoChannels,
    #[error("no `data` chunk")]
    NoData,
}

/// The rate assumed when a PCM MIME type names none (Gemini's documented output).
pub const DEFAULT_RATE_HZ: u32 = 24_000;

/// Little-endian 16-bit samples; an odd length is a cut answer.
pub fn pcm16_le(bytes: &[u8]) -> Result<Vec<i16>, AudioFault> {
    if !bytes.len().is_multiple_of(2) {
        return Err(AudioFault::OddLength(bytes.len()));
    }
    Ok(bytes
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect())
}

/// The sample rate of a PCM MIME type (`audio/L16;codec=pcm;rate=24000`, `audio/pcm`); any
/// other type is refused.
pub fn pcm_rate(mime: &str) -> Result<u32, AudioFault> {
    let mut parts = mime.split(';').map(str::trim);
    let essence = parts.next().unwrap_or_default().to_ascii_lowercase();
    if essence != "audio/l16" && essence != "audio/pcm" {
        return Err(AudioFault::NotPcm(mime.to_owned()));
    }
    let mut rate = DEFAULT_RATE_HZ;
    for param in parts {
        if let Some((name, value)) = param.split_once('=')
            && name.trim().eq_ignore_ascii_case("rate")
        {
            rate = value
                .trim()
                .parse()
                .ok()
                .filter(|r| (4_000..=192_000).contains(r))
                .ok_or_else(|| AudioFault::BadRate(mime.to_owned()))?;
        }
    }
    Ok(rate)
}

/// The mono 16-bit samples of a PCM WAV file, and its rate. Several channels are mixed down.
/// A `data` size past the end of the file (a streamed WAV's placeholder) reads to the end.
pub fn wav_pcm16(bytes: &[u8]) -> Result<(u32, Vec<i16>), AudioFault> {
    let u16_at = |at: usize| -> Option<u16> {
        Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
    };
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    };
    if bytes.get(0..4) != Some(b"RIFF") || bytes.get(8..12) != Some(b"WAVE") {
        return Err(AudioFault::NotWav(bytes.len()));
    }
    let mut format: Option<(u16, u16, u32, u16)> = None;
    let mut at = 12usize;
    while let (Some(id), Some(size)) = (bytes.get(at..at + 4), u32_at(at + 4)) {
        let body = at + 8;
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        match id {
            b"fmt " => {
                let (Some(tag), Some(channels), Some(rate), Some(bits)) = (
                    u16_at(body),
                    u16_at(body + 2),
                    u32_at(body + 4),
                    u16_at(body + 14),
                ) else {
                    return Err(AudioFault::CutFormat);
                };
                format = Some((tag, channels, rate, bits));
            }
            b"data" => {
                let (tag, channels, rate, bits) = format.ok_or(AudioFault::DataBeforeFormat)?;
                // 1: PCM; 0xFFFE: extensible (PCM for 16-bit here).
                if !(tag == 1 || tag == 0xFFFE) || bits != 16 {
                    return Err(AudioFault::NotPcm16 { tag, bits });
                }
                if channels == 0 || rate == 0 {
                    return Err(AudioFault::NoChannels);
                }
                let end = body.saturating_add(size).min(bytes.len());
                let data = bytes.get(body..end).unwrap_or_default();
                return Ok((rate, mix_down(data, channels)));
            }
            _ => {}
        }
        // Chunks are padded to an even length.
        at = body.saturating_add(size).saturating_add(size % 2);
    }
    Err(AudioFault::NoData)
}

/// Interleaved little-endian frames of `channels` samples, averaged to one.
fn mix_down(data: &[u8], channels: u16) -> Vec<i16> {
    let frame = usize::from(channels) * 2;
    data.chunks_exact(frame)
        .map(|f| {
            let sum: i32 = f
                .chunks_exact(2)
                .map(|s| i32::from(i16::from_le_bytes([s[0], s[1]])))
                .sum();
            let mean = sum / i32::from(channels);
            i16::try_from(mean).unwrap_or(if mean < 0 { i16::MIN } else { i16::MAX })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{AudioFault, pcm_rate, pcm16_le, wav_pcm16};

    fn wav(channels: u16, rate: u32, data_size: u32, samples: &[i16]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"RIFF");
        b.extend_from_slice(&u32::MAX.to_le_bytes());
        b.extend_from_slice(b"WAVE");
        b.extend_from_slice(b"LIST");
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&[1, 2, 3, 0]); // odd size, padded
        b.extend_from_slice(b"fmt ");
        b.extend_from_slice(&16u32.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&channels.to_le_bytes());
        b.extend_from_slice(&rate.to_le_bytes());
        b.extend_from_slice(&(rate * 2 * u32::from(channels)).to_le_bytes());
        b.extend_from_slice(&(2 * channels).to_le_bytes());
        b.extend_from_slice(&16u16.to_le_bytes());
        b.extend_from_slice(b"data");
        b.extend_from_slice(&data_size.to_le_bytes());
        for s in samples {
            b.extend_from_slice(&s.to_le_bytes());
        }
        b
    }

    #[test]
    fn streamed_wavs_read_to_the_end_and_stereo_mixes_down() {
        let mono = wav(1, 22_050, 0xFFFF_FFFF, &[1, -2, 300]);
        assert_eq!(wav_pcm16(&mono), Ok((22_050, vec![1, -2, 300])));
        let sized = wav(1, 16_000, 4, &[5, 6, 7]);
        assert_eq!(wav_pcm16(&sized), Ok((16_000, vec![5, 6])));
        let stereo = wav(2, 8_000, 8, &[10, 20, -10, -30]);
        assert_eq!(wav_pcm16(&stereo), Ok((8_000, vec![15, -20])));
        assert_eq!(wav_pcm16(b"RIFF\0\0\0\0WAVE"), Err(AudioFault::NoData));
        assert_eq!(wav_pcm16(b"OggS"), Err(AudioFault::NotWav(4)));
    }

    #[test]
    fn rates_come_from_the_mime_type() {
        assert_eq!(pcm_rate("audio/L16;codec=pcm;rate=24000"), Ok(24_000));
        assert_eq!(pcm_rate("audio/L16; rate=16000"), Ok(16_000));
        assert_eq!(pcm_rate("audio/pcm"), Ok(24_000));
        assert!(pcm_rate("audio/mpeg").is_err());
        assert!(pcm_rate("audio/L16;rate=fast").is_err());
    }

    #[test]
    fn raw_pcm_is_little_endian_and_whole() {
        assert_eq!(pcm16_le(&[1, 0, 0xFF, 0xFF]), Ok(vec![1, -1]));
        assert_eq!(pcm16_le(&[1, 0, 2]), Err(AudioFault::OddLength(3)));
    }
}
