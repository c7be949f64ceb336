//! The local speech engine: espeak-ng (a Debian package), run once per request as
//! `espeak-ng --stdout -v <voice> -- <text>` with tokio's process (never blocking a thread),
//! no shell, stdin closed. It needs no network and no model download, so it serves offline
//! use, the playground and CI. Its WAV output is read here (RIFF/WAVE, the `fmt ` and `data`
//! chunks; the sizes espeak-ng writes when streaming are placeholders, so `data` is read to
//! the end) into [`SpeechAudio::Pcm`]. Each run is bounded: killed after a time limit (real
//! time, like the HTTP clients' request timeout) and when its output passes a cap. A missing
//! program is [`SpeechError::EngineMissing`], an unknown voice permanent. It does not retry
//! or meter (the wrappers in `speech` do).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt as _;

use crate::core::time::BoxFuture;
use crate::ports::speech::{Speech, SpeechAudio, SpeechError, SpeechRequest};

/// The program looked up on `PATH` unless configured otherwise.
pub const PROGRAM: &str = "espeak-ng";
/// The variable naming another program (a path, or a name looked up on `PATH`).
pub const PROGRAM_ENV: &str = "PERSONAD_ESPEAK";
/// The model name usage rows carry.
pub const MODEL: &str = "espeak-ng";
/// The voice used when the request names neither a voice nor a language.
pub const DEFAULT_VOICE: &str = "en";
/// Longest one run may take (real time).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Most bytes of WAV read from one run (about six minutes of espeak-ng's 22 kHz speech).
pub const DEFAULT_MAX_OUTPUT: usize = 16 * 1024 * 1024;
/// Most bytes of its error output kept.
const MAX_STDERR: u64 = 4096;

/// Settings of an [`Espeak`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EspeakConfig {
    /// The program: a path, or a name looked up on `PATH`.
    pub program: PathBuf,
    pub timeout: Duration,
    pub max_output: usize,
}

impl Default for EspeakConfig {
    fn default() -> Self {
        EspeakConfig {
            program: PathBuf::from(PROGRAM),
            timeout: DEFAULT_TIMEOUT,
            max_output: DEFAULT_MAX_OUTPUT,
        }
    }
}

impl EspeakConfig {
    /// The defaults, with the program from [`PROGRAM_ENV`] if set.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> EspeakConfig {
        let mut config = EspeakConfig::default();
        if let Some(program) = lookup(PROGRAM_ENV).filter(|v| !v.trim().is_empty()) {
            config.program = PathBuf::from(program.trim());
        }
        config
    }
}

/// Where `program` would run from: itself when it names a path, else the first executable
/// of that name on `PATH`.
pub fn find_program(program: &Path) -> Option<PathBuf> {
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.components().count() > 1 {
        return executable(program).then(|| program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| executable(p))
}

/// Whether espeak-ng is installed (on `PATH`), for `check`.
pub fn espeak_available() -> bool {
    find_program(Path::new(PROGRAM)).is_some()
}

/// The espeak-ng engine.
pub struct Espeak {
    config: EspeakConfig,
}

impl Espeak {
    pub fn new(config: EspeakConfig) -> Espeak {
        Espeak { config }
    }

    fn missing(&self, why: &str) -> SpeechError {
        SpeechError::EngineMissing(format!(
            "{} {why}: install espeak-ng (the Debian package `espeak-ng`) or set {PROGRAM_ENV}",
            self.config.program.display()
        ))
    }

    async fn run(&self, req: &SpeechRequest) -> Result<SpeechAudio, SpeechError> {
        if req.text.trim().is_empty() {
            return Err(SpeechError::Permanent("nothing to say".to_owned()));
        }
        let voice = voice_of(req)?;
        let program = self.config.program.display().to_string();
        let mut child = tokio::process::Command::new(&self.config.program)
            .args(["--stdout", "-v", &voice, "--", &req.text])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => self.missing("is not installed"),
                std::io::ErrorKind::PermissionDenied => self.missing("cannot be run"),
                _ => SpeechError::Permanent(format!("{program} did not start: {e}")),
            })?;
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(SpeechError::Permanent(format!("{program}: no output pipe")));
        };
        // Its error output is read aside, so a full stdout pipe never waits on it.
        let errors = tokio::spawn(async move {
            let mut err = Vec::new();
            let _ = stderr.take(MAX_STDERR).read_to_end(&mut err).await;
            err
        });
        let cap = self.config.max_output;
        let deadline = tokio::time::Instant::now() + self.config.timeout;
        let read = async {
            let mut out = Vec::new();
            stdout
                .take(cap as u64 + 1)
                .read_to_end(&mut out)
                .await
                .map(|_| out)
        };
        let stop = match tokio::time::timeout_at(deadline, read).await {
            Err(_) => Err(format!(
                "took longer than {} s; killed",
                self.config.timeout.as_secs_f64()
            )),
            Ok(Err(e)) => Err(format!("unreadable output: {e}")),
            Ok(Ok(out)) if out.len() > cap => Err(format!("wrote more than {cap} bytes; killed")),
            Ok(Ok(out)) => Ok(out),
        };
        let out = match stop {
            Ok(out) => out,
            Err(why) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                errors.abort();
                return Err(SpeechError::Permanent(format!("{program} {why}")));
            }
        };
        let status = match tokio::time::timeout_at(deadline, child.wait()).await {
            Ok(status) => status.map_err(|e| SpeechError::Permanent(format!("{program}: {e}")))?,
            Err(_) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                errors.abort();
                return Err(SpeechError::Permanent(format!(
                    "{program} did not exit; killed"
                )));
            }
        };
        let err = errors.await.unwrap_or_default();
        let said = String::from_utf8_lossy(&err);
        let said = crate::adapters::llm::http::truncate(&said, 300);
        if !status.success() {
            return Err(SpeechError::Permanent(format!(
                "{program} -v {voice} failed ({status}){}",
                if said.is_empty() {
                    String::new()
                } else {
                    format!(": {said}")
                }
            )));
        }
        let (rate_hz, samples) = wav_pcm16(&out)
            .map_err(|why| SpeechError::BadAudio(format!("{program} -v {voice}: {why}")))?;
        if samples.is_empty() {
            return Err(SpeechError::BadAudio(format!(
                "{program} -v {voice} made no sound{}",
                if said.is_empty() {
                    String::new()
                } else {
                    format!(": {said}")
                }
            )));
        }
        Ok(SpeechAudio::Pcm { rate_hz, samples })
    }
}

/// The espeak-ng voice for a request: its voice, else its language in lower case (`pt-BR`
/// is espeak's `pt-br`), else English. Only voice-name characters pass.
fn voice_of(req: &SpeechRequest) -> Result<String, SpeechError> {
    let voice = req
        .voice
        .as_deref()
        .or(req.language.as_deref())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .unwrap_or(DEFAULT_VOICE)
        .to_ascii_lowercase()
        .replace('_', "-");
    let plain = !voice.starts_with('-')
        && voice
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'/'));
    if plain {
        Ok(voice)
    } else {
        Err(SpeechError::Permanent(format!(
            "{voice:?} is not an espeak-ng voice name"
        )))
    }
}

/// The mono 16-bit samples of a PCM WAV file, and its rate. Several channels are mixed down.
/// A `data` size past the end of the file (a streamed WAV's placeholder) reads to the end.
pub(crate) fn wav_pcm16(bytes: &[u8]) -> Result<(u32, Vec<i16>), String> {
    let u16_at = |at: usize| -> Option<u16> {
        Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
    };
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    };
    if bytes.get(0..4) != Some(b"RIFF") || bytes.get(8..12) != Some(b"WAVE") {
        return Err(format!("not a WAV file ({} bytes)", bytes.len()));
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
                    return Err("a cut `fmt ` chunk".to_owned());
                };
                format = Some((tag, channels, rate, bits));
            }
            b"data" => {
                let Some((tag, channels, rate, bits)) = format else {
                    return Err("`data` before `fmt `".to_owned());
                };
                // 1: PCM; 0xFFFE: extensible (PCM for 16-bit here).
                if !(tag == 1 || tag == 0xFFFE) || bits != 16 {
                    return Err(format!(
                        "not 16-bit PCM (format {tag}, {bits} bits a sample)"
                    ));
                }
                if channels == 0 || rate == 0 {
                    return Err("no channels or no sample rate".to_owned());
                }
                let end = body.saturating_add(size).min(bytes.len());
                let data = bytes.get(body..end).unwrap_or_default();
                let frame = usize::from(channels) * 2;
                let samples = data
                    .chunks_exact(frame)
                    .map(|f| {
                        let sum: i32 = f
                            .chunks_exact(2)
                            .map(|s| i32::from(i16::from_le_bytes([s[0], s[1]])))
                            .sum();
                        let mean = sum / i32::from(channels);
                        i16::try_from(mean).unwrap_or(if mean < 0 { i16::MIN } else { i16::MAX })
                    })
                    .collect();
                return Ok((rate, samples));
            }
            _ => {}
        }
        // Chunks are padded to an even length.
        at = body.saturating_add(size).saturating_add(size % 2);
    }
    Err("no `data` chunk".to_owned())
}

impl Speech for Espeak {
    fn synthesize<'a>(
        &'a self,
        req: &'a SpeechRequest,
    ) -> BoxFuture<'a, Result<SpeechAudio, SpeechError>> {
        Box::pin(self.run(req))
    }

    fn describe(&self) -> String {
        match find_program(&self.config.program) {
            Some(path) => format!("espeak:{MODEL} at {}", path.display()),
            None => format!(
                "espeak:{MODEL} (not installed: {} not found)",
                self.config.program.display()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{voice_of, wav_pcm16};
    use crate::ports::speech::SpeechRequest;

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
        assert!(wav_pcm16(b"RIFF\0\0\0\0WAVE").is_err());
        assert!(wav_pcm16(b"OggS").is_err());
    }

    #[test]
    fn voices_come_from_the_voice_then_the_language() {
        let req = |voice: Option<&str>, language: Option<&str>| SpeechRequest {
            text: "hi".into(),
            voice: voice.map(Into::into),
            language: language.map(Into::into),
        };
        assert_eq!(voice_of(&req(None, None)).ok().as_deref(), Some("en"));
        assert_eq!(
            voice_of(&req(None, Some("pt-BR"))).ok().as_deref(),
            Some("pt-br")
        );
        assert_eq!(
            voice_of(&req(Some("de+f3"), Some("en"))).ok().as_deref(),
            Some("de+f3")
        );
        assert!(voice_of(&req(Some("--help"), None)).is_err());
    }
}
