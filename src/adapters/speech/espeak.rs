//! The local speech engine: espeak-ng (a Debian package), run once per request as
//! `espeak-ng --stdout -v <voice> -- <text>` with tokio's process (never blocking a thread),
//! no shell, stdin closed. It needs no network and no model download, so it serves offline
//! use, the playground and CI. Its WAV output is read (`pcm::wav_pcm16`) into
//! [`SpeechAudio::Pcm`]. Each run is bounded: killed after a time limit (real
//! time, like the HTTP clients' request timeout) and when its output passes a cap. A missing
//! program is [`SpeechError::EngineMissing`], an unknown voice permanent. It does not retry
//! or meter (the wrappers in `speech` do).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt as _;

use super::pcm;
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
        let (rate_hz, samples) = pcm::wav_pcm16(&out)
            .map_err(|fault| SpeechError::BadAudio(format!("{program} -v {voice}: {fault}")))?;
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
    use super::voice_of;
    use crate::ports::speech::SpeechRequest;

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
