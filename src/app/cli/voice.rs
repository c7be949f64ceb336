//! The voice options of `run`, `chat` and `check`: which speech engine a persona's `# Voice`
//! uses when it names none, and where the local engine is. Parsed by clap; the voice studio
//! (`adapters::voice_studio`) is built from them in `app::services`.

use clap::Args;

/// Settings of voice notes (docs/voice.md).
#[derive(Debug, Clone, Args)]
pub struct VoiceArgs {
    /// The speech engine of personas whose `# Voice` names none: `espeak` (local, offline,
    /// free; the Debian package espeak-ng), `openai` (OPENAI_* settings, `/v1/audio/speech`) or
    /// `gemini` (GEMINI_API_KEY, a TTS model).
    #[arg(
        long,
        value_name = "ENGINE",
        env = "PERSONAD_VOICE_PROVIDER",
        default_value = "espeak"
    )]
    pub voice_provider: String,
    /// The local engine's program.
    #[arg(
        long,
        value_name = "PATH",
        env = "PERSONAD_ESPEAK",
        default_value = "espeak-ng"
    )]
    pub espeak_program: std::path::PathBuf,
}
