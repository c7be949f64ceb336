//! Where a day's schedule came from (its file's `<!-- schedule: … -->` comment): the model's
//! call, the owner's hand, the persona's own changes, or the fallback with its attempts. Pure;
//! `core::presence` reads and writes it with the day.

use std::fmt::Write as _;

use jiff::Timestamp;

/// Where a day's schedule came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Written by the model (or by hand: a file is used as it is).
    Generated,
    /// Written by the operator: never replaced.
    Edited,
    /// Changed by the persona itself (its `schedule` tasks): it may change it again; a model
    /// call never rewrites it.
    Persona,
    /// The deterministic fallback after `attempts` failed calls; another call may replace it
    /// from `retry_at` while attempts are left.
    Fallback {
        attempts: u32,
        retry_at: Option<Timestamp>,
    },
}

impl Source {
    pub(super) fn comment(&self) -> String {
        match self {
            Source::Generated => "source=generated".into(),
            Source::Edited => "source=edited".into(),
            Source::Persona => "source=edited by=persona".into(),
            Source::Fallback { attempts, retry_at } => {
                let mut s = format!("source=fallback attempts={attempts}");
                if let Some(at) = retry_at {
                    let _ = write!(s, " retry_at={at}");
                }
                s
            }
        }
    }

    pub(super) fn parse(comment: &str) -> Result<Source, crate::core::Invalid> {
        let mut source = None;
        let mut attempts = 0;
        let mut retry_at = None;
        let mut by = None;
        for word in comment.split_whitespace() {
            let Some((k, v)) = word.split_once('=') else {
                return Err(format!("unexpected {word:?} in the schedule comment").into());
            };
            match k {
                "source" => source = Some(v.to_string()),
                "by" => by = Some(v.to_string()),
                "attempts" => {
                    attempts = v.parse().map_err(|_| {
                        crate::core::Invalid(format!("attempts {v:?} is not a number"))
                    })?;
                }
                "retry_at" => {
                    retry_at = Some(v.parse::<Timestamp>().map_err(|_| {
                        crate::core::Invalid(format!("retry_at {v:?} is not a time"))
                    })?);
                }
                _ => return Err(format!("unknown key {k:?} in the schedule comment").into()),
            }
        }
        match (source.as_deref(), by.as_deref()) {
            (Some("edited"), Some("persona")) => return Ok(Source::Persona),
            (_, None | Some("owner")) => {}
            (_, Some(other)) => {
                return Err(format!("unknown author {other:?} (by=persona or by=owner)").into());
            }
        }
        match source.as_deref() {
            None | Some("generated") => Ok(Source::Generated),
            Some("edited") => Ok(Source::Edited),
            Some("fallback") => Ok(Source::Fallback { attempts, retry_at }),
            Some(other) => {
                Err(format!("unknown source {other:?} (generated, edited or fallback)").into())
            }
        }
    }
}
