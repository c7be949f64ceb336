//! Reading the WAV a local speech engine writes (espeak-ng's `--stdout`): RIFF/WAVE with 16-bit
//! PCM (plain or `WAVE_FORMAT_EXTENSIBLE`), any channel count, downmixed to mono. A writer
//! that streams cannot know the sizes ahead, so a `data` size of 0 or one past the end of the
//! bytes (espeak-ng writes 0x7FFFF000, others 0xFFFFFFFF) means "to the end"; the RIFF size is
//! not trusted at all. Only `voice` (its parent) calls it.

use super::VoiceError;

fn bad(msg: impl Into<String>) -> VoiceError {
    VoiceError::BadWav(msg.into())
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// What the `fmt ` chunk says.
#[derive(Clone, Copy)]
struct Format {
    channels: u16,
    rate: u32,
}

fn parse_fmt(body: &[u8]) -> Result<Format, VoiceError> {
    if body.len() < 16 {
        return Err(bad(format!(
            "the fmt chunk has {} bytes, not 16",
            body.len()
        )));
    }
    let mut tag = u16_at(body, 0);
    // WAVE_FORMAT_EXTENSIBLE: the real format is the sub-format GUID's first two bytes.
    if tag == 0xFFFE && body.len() >= 26 {
        tag = u16_at(body, 24);
    }
    if tag != 1 {
        return Err(bad(format!("sample format {tag} is not integer PCM")));
    }
    let channels = u16_at(body, 2);
    let rate = u32_at(body, 4);
    let bits = u16_at(body, 14);
    if bits != 16 {
        return Err(bad(format!(
            "{bits}-bit samples are not supported (16-bit only)"
        )));
    }
    if channels == 0 {
        return Err(bad("the fmt chunk says 0 channels"));
    }
    if rate == 0 {
        return Err(bad("the fmt chunk says a sample rate of 0"));
    }
    Ok(Format { channels, rate })
}

/// Reads a 16-bit PCM WAV: its sample rate and its samples, downmixed to mono (the channels'
/// mean). A trailing partial frame is dropped.
pub fn read_wav(bytes: &[u8]) -> Result<(u32, Vec<i16>), VoiceError> {
    if bytes.len() < 12 || &bytes[0..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return Err(bad("no RIFF/WAVE header"));
    }
    let mut format: Option<Format> = None;
    let mut at = 12usize;
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let size = u32_at(bytes, at + 4) as usize;
        let body = at + 8;
        let left = bytes.len() - body;
        if id == b"data" {
            let format = format.ok_or_else(|| bad("the data chunk comes before fmt"))?;
            let size = if size == 0 || size > left { left } else { size };
            return Ok((format.rate, downmix(&bytes[body..body + size], format)));
        }
        if size > left {
            return Err(bad(format!(
                "the {:?} chunk runs past the end",
                String::from_utf8_lossy(id)
            )));
        }
        if id == b"fmt " {
            format = Some(parse_fmt(&bytes[body..body + size])?);
        }
        // Chunks are padded to an even length.
        at = body + size + (size & 1);
    }
    Err(bad("no data chunk"))
}

fn downmix(data: &[u8], format: Format) -> Vec<i16> {
    let channels = usize::from(format.channels);
    data.chunks_exact(2 * channels)
        .map(|frame| {
            let sum: i32 = frame
                .chunks_exact(2)
                .map(|s| i32::from(i16::from_le_bytes([s[0], s[1]])))
                .sum();
            // The mean of i16 values is an i16.
            (sum / channels as i32) as i16
        })
        .collect()
}
