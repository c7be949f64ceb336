//! A persona's voice as data: the `# Voice` heading read into [`VoiceSettings`] (which speech
//! provider and voice, the language, and when the persona speaks: [`Speak`]), whether a plan
//! may carry a voice note ([`VoiceSettings::allows`]), what the prompt tells the model, and the
//! limits a voice note keeps (longer words stay text). Pure: it makes no sound and calls no
//! provider; the parser, the prompt builder, the planner and `check` read it, and the `voice`
//! task's handler hands its settings to the voice port.

use std::fmt;

use crate::core::Invalid;
use crate::core::speech::SpeechProviderKind;

/// The most characters one voice note speaks (about 60 s at a talking pace); a longer text
/// stays text.
pub const MAX_VOICE_CHARS: usize = 800;

/// The longest voice note, in seconds (Telegram takes longer ones; a person rarely talks
/// longer, and a longer text stays text).
pub const MAX_VOICE_SECS: u32 = 60;

/// A talking pace in characters per second, for the "recording voice" pause before a voice
/// note and for estimates.
pub const SPEECH_CHARS_PER_SEC: f64 = 14.0;

/// When the persona answers with a voice note.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Speak {
    /// Never (the default: personas without `# Voice` do not change).
    #[default]
    Never,
    /// When the person asks for a voice message.
    WhenAsked,
    /// In answer to a voice note.
    ToVoiceNotes,
    /// Now and then, about this share of replies (percent).
    Sometimes(u8),
}

impl fmt::Display for Speak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Speak::Never => f.write_str("never"),
            Speak::WhenAsked => f.write_str("when asked"),
            Speak::ToVoiceNotes => f.write_str("to voice notes"),
            Speak::Sometimes(p) => write!(f, "sometimes ({p}%)"),
        }
    }
}

impl Speak {
    /// `never`, `when asked`, `to voice notes`, `sometimes` or `sometimes 20%`.
    pub fn parse(value: &str) -> Result<Speak, Invalid> {
        let v = value.trim().to_ascii_lowercase();
        let v = v.trim_end_matches('.');
        match v {
            "never" | "no" | "off" => return Ok(Speak::Never),
            "when asked" | "asked" | "on request" => return Ok(Speak::WhenAsked),
            "to voice notes" | "to voice" | "voice notes" | "to voice messages" => {
                return Ok(Speak::ToVoiceNotes);
            }
            _ => {}
        }
        if let Some(rest) = v.strip_prefix("sometimes") {
            let share = rest.trim().trim_start_matches(['(', ':']).trim();
            let share = share
                .trim_end_matches(')')
                .trim()
                .trim_end_matches('%')
                .trim();
            if share.is_empty() {
                return Ok(Speak::Sometimes(20));
            }
            return share
                .parse::<u8>()
                .ok()
                .filter(|p| (1..=100).contains(p))
                .map(Speak::Sometimes)
                .ok_or_else(|| {
                    Invalid(format!(
                        "`{value}`: the share is 1% to 100%, e.g. `sometimes 20%`"
                    ))
                });
        }
        Err(Invalid(format!(
            "`{value}`: say when to speak: `never`, `when asked`, `to voice notes` or `sometimes 20%`"
        )))
    }
}

/// What `# Voice` says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VoiceSettings {
    /// The speech engine; `None`: the daemon's (`--voice-provider`).
    pub provider: Option<SpeechProviderKind>,
    /// The engine's voice name (`alloy`, `Kore`, `en-us+f3`); `None`: the engine's default.
    pub voice: Option<String>,
    /// The language spoken (`en`, `de`); `None`: the engine's default.
    pub language: Option<String>,
    pub speak: Speak,
}

impl VoiceSettings {
    /// Parses the heading's body: `key: value` lines (`provider`, `voice`, `language`,
    /// `speak`; `when` reads as `speak`), or a bare `speak` value on its own line. `speak` is
    /// required, so that a heading never speaks by accident of a default.
    pub fn parse(body: &str) -> Result<VoiceSettings, Invalid> {
        let mut out = VoiceSettings::default();
        let mut speak = None;
        for line in body
            .lines()
            .map(|l| l.trim().trim_start_matches(['-', '*']).trim())
            .filter(|l| !l.is_empty())
        {
            let Some((key, value)) = line.split_once(':') else {
                speak = Some(Speak::parse(line)?);
                continue;
            };
            let value = value.trim();
            let non_empty = |what: &str| -> Result<String, Invalid> {
                if value.is_empty()
                    || value.chars().count() > 64
                    || value.contains(char::is_control)
                {
                    Err(Invalid(format!(
                        "`{line}`: the {what} is one word or name of at most 64 characters"
                    )))
                } else {
                    Ok(value.to_owned())
                }
            };
            match key.trim().to_ascii_lowercase().as_str() {
                "provider" | "engine" => out.provider = Some(value.parse()?),
                "voice" => out.voice = Some(non_empty("voice")?),
                "language" | "lang" => out.language = Some(non_empty("language")?),
                "speak" | "when" => speak = Some(Speak::parse(value)?),
                other => {
                    return Err(Invalid(format!(
                        "`{line}`: unknown key {other:?} (use provider, voice, language, speak)"
                    )));
                }
            }
        }
        out.speak = speak.ok_or_else(|| {
            Invalid(
                "say when to speak: a line `speak: never`, `when asked`, `to voice notes` or `sometimes 20%`"
                    .to_owned(),
            )
        })?;
        Ok(out)
    }

    /// Whether the persona ever speaks.
    pub fn speaks(&self) -> bool {
        self.speak != Speak::Never
    }

    /// Whether a plan answering a message (`answers_voice`: that message is a voice note) may
    /// carry a voice note.
    pub fn allows(&self, answers_voice: bool) -> bool {
        match self.speak {
            Speak::Never => false,
            Speak::ToVoiceNotes => answers_voice,
            Speak::WhenAsked | Speak::Sometimes(_) => true,
        }
    }

    /// The system instruction's paragraph on voice notes; empty for a persona that never
    /// speaks (the action is then not offered at all).
    pub fn prompt_text(&self) -> String {
        let when = match self.speak {
            Speak::Never => return String::new(),
            Speak::WhenAsked => {
                "Use it only when the person asks you for a voice message; otherwise write.".to_owned()
            }
            Speak::ToVoiceNotes => {
                "Use it to answer a voice note (a message shown as a voice note); answer written messages in writing.".to_owned()
            }
            Speak::Sometimes(p) => format!(
                "Use it now and then, in about {p}% of your replies, where a person would rather talk than type; otherwise write."
            ),
        };
        format!(
            "You may also answer with a voice note: `# «voice»` (a message id after it makes it a \
             reply; as JSON, {{\"kind\": \"voice\", \"text\": …}}) with the words you say as its \
             body, plain spoken text without formatting, emoji or links, at most \
             {MAX_VOICE_CHARS} characters. {when}\n\n"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heading_reads_keys_or_a_bare_policy_and_requires_one() {
        let v = VoiceSettings::parse(
            "provider: espeak-ng\nvoice: en-us+f3\nlanguage: en\nspeak: to voice notes",
        )
        .unwrap_or_default();
        assert_eq!(v.provider, Some(SpeechProviderKind::Espeak));
        assert_eq!(v.voice.as_deref(), Some("en-us+f3"));
        assert_eq!(v.speak, Speak::ToVoiceNotes);
        assert_eq!(
            VoiceSettings::parse("sometimes 30%").map(|v| v.speak),
            Ok(Speak::Sometimes(30))
        );
        assert_eq!(
            VoiceSettings::parse("when asked").map(|v| v.speak),
            Ok(Speak::WhenAsked)
        );
        assert!(
            VoiceSettings::parse("provider: openai").is_err(),
            "speak is required"
        );
        assert!(VoiceSettings::parse("provider: festival\nspeak: never").is_err());
        assert!(VoiceSettings::parse("sometimes 0%").is_err());
        assert!(VoiceSettings::parse("mood: cheerful\nspeak: never").is_err());
    }

    #[test]
    fn what_a_plan_may_carry_follows_the_policy() {
        let with = |speak| VoiceSettings {
            speak,
            ..VoiceSettings::default()
        };
        assert!(!with(Speak::Never).allows(true));
        assert!(with(Speak::ToVoiceNotes).allows(true));
        assert!(!with(Speak::ToVoiceNotes).allows(false));
        assert!(with(Speak::WhenAsked).allows(false));
        assert!(with(Speak::Sometimes(10)).allows(false));
        assert!(with(Speak::Never).prompt_text().is_empty());
        assert!(
            with(Speak::Sometimes(10))
                .prompt_text()
                .contains("about 10%")
        );
    }
}
