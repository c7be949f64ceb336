//! Voice notes as Telegram plays them: mono PCM in, an Ogg/Opus file out (Opus at 48 kHz,
//! 20 ms frames, the VOIP application, about 24 kbps), with the duration and the packed 5-bit
//! waveform that Telegram draws, both computed from the audio. It owns the codec and nothing
//! else: reading the WAV a local engine writes (`wav`), resampling to 48 kHz (`resample`), the
//! Ogg/Opus stream both ways (`ogg_opus`) and the waveform (`waveform`). It must not know
//! Telegram's API, HTTP, personas or task kinds, and it never shells out to a converter: Opus
//! is the system libopus, linked through the `opusic-c` binding, and the Ogg pages are written
//! by the pure-Rust `ogg` crate. The speech providers call it on what they synthesize
//! (`encode_voice` on PCM, `voice_from_ogg` on a provider's own Ogg/Opus), and the sending side
//! puts `duration_secs` and `waveform` in the voice attribute. Audio longer than
//! [`MAX_VOICE_SECS`] is refused with [`VoiceError::TooLong`] (the caller keeps the words as
//! text). The output is deterministic: the same PCM gives the same bytes.

mod ogg_opus;
mod resample;
mod wav;
mod waveform;

pub use ogg_opus::decode_ogg_opus;
pub use wav::read_wav;
pub use waveform::{WAVEFORM_BYTES, WAVEFORM_VALUES, waveform};

/// The longest voice note made, in seconds (the core's limit); longer speech stays text.
pub use crate::core::voice::MAX_VOICE_SECS;

/// A voice note ready to upload: the Ogg/Opus bytes and what Telegram's voice attribute needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedVoice {
    /// The Ogg/Opus file (mono, Opus at 48 kHz).
    pub ogg: Vec<u8>,
    /// The audio's length in milliseconds (rounded to the nearest).
    pub duration_ms: u64,
    /// The audio's length in whole seconds, rounded up, at least 1 (Telegram's `duration`).
    pub duration_secs: u32,
    /// Telegram's waveform: 100 values of 0..=31, packed 5 bits each, LSB first (63 bytes).
    pub waveform: Vec<u8>,
}

/// Audio decoded from an Ogg/Opus file: interleaved samples at the decoder's rate, with the
/// encoder's pre-skip removed and the end trimmed to the last page's granule position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedVoice {
    /// 1 (mono) or 2 (stereo, interleaved).
    pub channels: u8,
    /// Always 48 000: Opus decodes at 48 kHz here.
    pub rate_hz: u32,
    /// The samples, interleaved when stereo.
    pub samples: Vec<i16>,
}

/// Why a voice note could not be made or read. Each message names the cause.
#[derive(Debug, thiserror::Error)]
pub enum VoiceError {
    /// No samples at all.
    #[error("the audio is empty")]
    Empty,
    /// Longer than [`MAX_VOICE_SECS`].
    #[error("the audio lasts {secs} s, longer than the {MAX_VOICE_SECS} s a voice note may")]
    TooLong {
        /// The audio's length, rounded up.
        secs: u32,
    },
    /// The WAV could not be read.
    #[error("not a usable WAV file: {0}")]
    BadWav(String),
    /// The Ogg/Opus stream could not be read.
    #[error("not a usable Ogg/Opus stream: {0}")]
    BadOgg(String),
    /// The Ogg pages could not be read.
    #[error("not a readable Ogg stream: {0}")]
    OggRead(#[source] ogg::OggReadError),
    /// Writing a page failed (not expected: the pages go into memory).
    #[error("writing an Ogg page: {0}")]
    OggWrite(#[source] std::io::Error),
    /// libopus refused (the step and libopus's message).
    #[error("opus: {0}")]
    Opus(String),
    /// A sample rate outside 8 000..=48 000 Hz.
    #[error("unsupported sample rate {0} Hz (8000 to 48000 Hz are taken)")]
    UnsupportedRate(u32),
}

/// Encodes mono PCM at `rate_hz` (8 000..=48 000 Hz, e.g. 22 050 from espeak-ng or 24 000
/// from a provider's raw PCM) as a voice note: resampled to 48 kHz, Opus in Ogg.
pub fn encode_voice(pcm: &[i16], rate_hz: u32) -> Result<EncodedVoice, VoiceError> {
    resample::check_rate(rate_hz)?;
    if pcm.is_empty() {
        return Err(VoiceError::Empty);
    }
    let len = pcm.len() as u64;
    let rate = u64::from(rate_hz);
    let secs = len.div_ceil(rate).max(1);
    if secs > u64::from(MAX_VOICE_SECS) {
        return Err(VoiceError::TooLong {
            secs: u32::try_from(secs).unwrap_or(u32::MAX),
        });
    }
    let pcm48 = resample::to_48k(pcm, rate_hz);
    let ogg = ogg_opus::encode(&pcm48, rate_hz)?;
    Ok(EncodedVoice {
        ogg,
        duration_ms: (len * 1000 + rate / 2) / rate,
        // At most MAX_VOICE_SECS here.
        duration_secs: u32::try_from(secs).unwrap_or(MAX_VOICE_SECS),
        waveform: waveform(pcm),
    })
}

/// Re-encodes an Ogg/Opus file (as a provider returns it) canonically: decoded, downmixed to
/// mono and encoded again at 48 kHz, so that the duration and the waveform are computed here
/// and the stream is what Telegram plays as a voice note.
pub fn voice_from_ogg(bytes: &[u8]) -> Result<EncodedVoice, VoiceError> {
    // Decode a little past the cap only: encode_voice then says how long it is.
    let decoded = ogg_opus::decode_capped(bytes, u64::from(MAX_VOICE_SECS) + 1)?;
    let mono: Vec<i16> = if decoded.channels == 2 {
        decoded
            .samples
            .chunks_exact(2)
            .map(|pair| ((i32::from(pair[0]) + i32::from(pair[1])) / 2) as i16)
            .collect()
    } else {
        decoded.samples
    };
    encode_voice(&mono, decoded.rate_hz)
}
