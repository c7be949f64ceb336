//! Each agent's Telegram account as `doctor` sees it: offline, its session file (there,
//! private, logged in as far as the file tells: the account's own user is stored); with
//! `--telegram`, one connect and a "who am I" through the MTProto adapter
//! (`adapters::mtproto::whoami`). A session in use by a running daemon is said, not opened.

use std::path::Path;
use std::time::Duration;

use super::Finding;
use crate::adapters::mtproto::session::{self, SessionError, SessionFile};
use crate::adapters::mtproto::{self, ConnectError, Servers};
use crate::adapters::store::StateDir;
use crate::app::cli::TelegramArgs;
use crate::app::commands::exit;
use crate::core::persona::Persona;

/// How long `--telegram` waits for Telegram's answer, per agent.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);

fn login_fix(agent: &str, servers: Servers) -> String {
    format!("personad login --agent {agent}{}", servers.flag())
}

/// The session of `agent`, offline.
pub(crate) async fn session(root: &Path, agent: &str, servers: Servers) -> Finding {
    let check = format!("session {agent}");
    let state = StateDir::new(root);
    let path = session::session_path(&state, agent, servers);
    let shown = path.display().to_string();
    match session::check_file(&path) {
        Ok(SessionFile::Absent) => {
            return Finding::warn(
                check,
                format!("none at {shown}: the agent cannot start on Telegram"),
                login_fix(agent, servers),
            );
        }
        Ok(SessionFile::Present) => {}
        Err(e) => {
            let fix = match &e {
                SessionError::Insecure { path, dir, .. } => format!(
                    "chmod 600 {} && chmod 700 {}",
                    path.display(),
                    dir.display()
                ),
                _ => format!(
                    "move {shown} away and log in again: {}",
                    login_fix(agent, servers)
                ),
            };
            return Finding::fail(check, e.to_string(), fix, exit::UNAVAILABLE);
        }
    }
    match mtproto::open_account(&state, agent, servers).await {
        Ok(account) => Finding::ok(
            check,
            format!("{shown} is logged in (user id {})", account.self_id),
        ),
        Err(ConnectError::Session(SessionError::Locked { .. })) => {
            Finding::info(check, format!("{shown} is in use by a running personad"))
        }
        Err(ConnectError::NotAuthorized { .. }) => Finding::fail(
            check,
            format!("{shown} is not logged in (or was logged out)"),
            login_fix(agent, servers),
            exit::UNAVAILABLE,
        ),
        Err(e) => Finding::fail(
            check,
            e.to_string(),
            format!(
                "move {shown} away and log in again: {}",
                login_fix(agent, servers)
            ),
            exit::UNAVAILABLE,
        ),
    }
}

/// `--telegram`: each agent with a session connects and asks who it is.
pub(crate) async fn online(root: &Path, personas: &[Persona], args: &TelegramArgs) -> Vec<Finding> {
    let creds = match crate::app::daemon::credentials(args) {
        Ok(c) => c,
        Err(e) => {
            return vec![Finding::fail(
                "telegram",
                e.to_string(),
                "set TELEGRAM_API_ID and TELEGRAM_API_HASH (docs/telegram.md)",
                exit::CONFIG,
            )];
        }
    };
    let state = StateDir::new(root);
    let mut out = Vec::new();
    for p in personas {
        let check = format!("telegram {}", p.name);
        let path = session::session_path(&state, &p.name, creds.servers);
        if !path.exists() {
            out.push(Finding::info(check, "not tried: no session"));
            continue;
        }
        let started = std::time::Instant::now();
        out.push(
            match mtproto::whoami::whoami(&state, &p.name, &creds, ANSWER_WITHIN).await {
                Ok(Some(me)) => Finding::ok(
                    check,
                    format!(
                        "connected as {} ({}id {}) in {} ms",
                        me.name,
                        me.username.map(|u| format!("@{u}, ")).unwrap_or_default(),
                        me.id,
                        started.elapsed().as_millis()
                    ),
                ),
                Ok(None) => Finding::fail(
                    check,
                    format!(
                        "no answer from Telegram within {} s",
                        ANSWER_WITHIN.as_secs()
                    ),
                    "check the network and any firewall on the way to Telegram",
                    exit::UNAVAILABLE,
                ),
                Err(ConnectError::Session(SessionError::Locked { .. })) => {
                    Finding::info(check, "not tried: a running personad uses the session")
                }
                Err(e) => Finding::fail(
                    check,
                    e.to_string(),
                    login_fix(&p.name, creds.servers),
                    exit::UNAVAILABLE,
                ),
            },
        );
    }
    out
}
