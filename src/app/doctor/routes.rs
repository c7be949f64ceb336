//! The LLM side of `doctor`: each persona's routes as `check` shows them (configured or
//! not) and the media route; without `--offline`, one tiny request per provider in use
//! (`Router::probe`) with its latency or its error, and the local clock against the
//! server's `Date` header; and the voice of each persona that speaks (as `check` makes it).

use std::collections::BTreeMap;
use std::time::Duration;

use super::Finding;
use crate::adapters::llm::provider::{ProviderKind, Router, resolve};
use crate::app::cli::CheckArgs;
use crate::app::commands::exit;
use crate::core::persona::Persona;

/// A probe waits at most this long for its answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// A clock further than this from the LLM server's is a warning.
pub(crate) const MAX_SKEW_SECS: i64 = 60;

const ROUTE_FIX: &str =
    "set the variable it names, or give the persona another `# LLM` (docs/providers.md)";

/// Routes, probes and voices.
pub(crate) async fn check(args: &CheckArgs, personas: &[Persona], offline: bool) -> Vec<Finding> {
    let router = Router::from_lookup(crate::app::credentials::llm_lookup(), PROBE_TIMEOUT);
    let mut out = Vec::new();
    // The first route of each provider in use, to probe.
    let mut in_use: BTreeMap<ProviderKind, String> = BTreeMap::new();
    let mut used = |route: &str| {
        if let Ok(choice) = resolve(route)
            && router.check(choice.provider).is_ok()
        {
            in_use
                .entry(choice.provider)
                .or_insert_with(|| route.to_owned());
        }
    };
    for p in personas {
        let check = format!("llm {}", p.name);
        let (line, missing) = crate::app::check::persona_routes(p, args, &router);
        out.push(if missing > 0 {
            Finding::warn(check, line, ROUTE_FIX)
        } else {
            Finding::ok(check, line)
        });
        if let Some((planner, classifier)) = crate::app::check::persona_route_pair(p, args, &router)
        {
            used(&planner);
            used(&classifier);
        }
    }
    let media_route = args.media.config().model;
    let media = router.describe(&media_route);
    out.push(
        if media.contains("NOT CONFIGURED") || media.contains("unusable") {
            Finding::warn(
                "llm media",
                format!("{media}: photos, stickers and voice notes reach the personas undescribed"),
                "set its key, or pick another model with --media-model",
            )
        } else {
            Finding::ok("llm media", media)
        },
    );
    used(&media_route);
    if offline {
        out.push(Finding::info("llm probe", "skipped (--offline)"));
    } else if in_use.is_empty() {
        out.push(Finding::info(
            "llm probe",
            "skipped: no configured provider is in use",
        ));
    } else {
        for (kind, route) in &in_use {
            out.extend(probe(&router, *kind, route).await);
        }
    }
    out.extend(voices(args, personas));
    out
}

/// One request to `route` of `kind`: its latency or error, then the clock against its
/// server's.
async fn probe(router: &Router, kind: ProviderKind, route: &str) -> Vec<Finding> {
    let check = format!("llm probe {kind}");
    let shown = router.describe(route);
    let seen = router.probe(route).await;
    let ms = seen.latency.as_millis();
    let mut out = vec![match &seen.result {
        Ok(()) => Finding::ok(check, format!("{shown} answered in {ms} ms")),
        Err(e) => Finding::fail(
            check,
            format!("{shown} failed after {ms} ms: {e}"),
            "check the key, the base URL and the model name (docs/providers.md)",
            exit::UNAVAILABLE,
        ),
    }];
    out.push(clock(
        kind,
        seen.server_date.as_deref(),
        jiff::Timestamp::now(),
    ));
    out
}

/// The local clock against a server's `Date` header (`date`) read at `now`.
pub(crate) fn clock(kind: ProviderKind, date: Option<&str>, now: jiff::Timestamp) -> Finding {
    let check = format!("clock vs {kind}");
    let Some(date) = date else {
        return Finding::info(check, "the server sent no Date header to compare with");
    };
    let Ok(server) = jiff::fmt::rfc2822::parse(date).map(|z| z.timestamp()) else {
        return Finding::info(
            check,
            format!("the server's Date header {date:?} does not read"),
        );
    };
    let skew = now.as_second() - server.as_second();
    let said = match skew {
        0 => "the same as the server's".to_string(),
        s if s > 0 => format!("{s} s ahead of the server's"),
        s => format!("{} s behind the server's", -s),
    };
    if skew.abs() > MAX_SKEW_SECS {
        Finding::warn(
            check,
            format!(
                "this machine's clock is {said} (its Date: {date}): schedules, pacing and Telegram's checks go wrong"
            ),
            "sync the clock (timedatectl set-ntp true, or start chrony/ntpd)",
        )
    } else {
        Finding::ok(check, format!("this machine's clock is {said}"))
    }
}

/// The voice of each persona that speaks, as `check` makes it.
fn voices(args: &CheckArgs, personas: &[Persona]) -> Vec<Finding> {
    if !personas.iter().any(|p| p.voice.speaks()) {
        return vec![Finding::info("voice", "no persona speaks (`# Voice`)")];
    }
    let clock: crate::ports::clock::SharedClock =
        std::sync::Arc::new(crate::ports::clock::SystemClock);
    let studio = crate::app::services::voice_studio(&args.voice, &clock, None, None);
    personas
        .iter()
        .filter(|p| p.voice.speaks())
        .map(|p| {
            let check = format!("voice {}", p.name);
            let (line, unmade) = crate::app::check::persona_voice(p, studio.as_ref());
            if unmade > 0 {
                Finding::warn(
                    check,
                    line,
                    "install its engine or set its key (docs/voice.md)",
                )
            } else {
                Finding::ok(check, line)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{ProviderKind, clock};
    use crate::app::doctor::Level;

    #[test]
    fn the_clock_is_compared_with_the_date_header() -> Result<(), Box<dyn std::error::Error>> {
        let now: jiff::Timestamp = "2025-01-01T12:10:00Z".parse()?;
        let near = clock(
            ProviderKind::OpenAi,
            Some("Wed, 01 Jan 2025 12:09:30 GMT"),
            now,
        );
        assert_eq!(near.level, Level::Ok, "{near}");
        assert!(near.text.contains("30 s ahead"), "{near}");
        let far = clock(
            ProviderKind::OpenAi,
            Some("Wed, 01 Jan 2025 12:00:00 GMT"),
            now,
        );
        assert_eq!(far.level, Level::Warn, "{far}");
        assert!(far.text.contains("600 s ahead"), "{far}");
        assert_eq!(clock(ProviderKind::OpenAi, None, now).level, Level::Info);
        Ok(())
    }
}
