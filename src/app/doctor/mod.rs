//! `personad doctor`: checks a setup the way a first live run would meet it and says what to
//! fix, one line per check (`ok`, `info`, `WARN`, `FAIL`), each problem with its fix:
//! configuration and persona files (read as `check` reads them), the state directory
//! ([`state`]), each agent's Telegram session offline and, with `--telegram`, online
//! ([`account`]), the systemd unit ([`unit`]), each LLM route with one tiny request per
//! provider and the clock against the server's, and each voice ([`routes`]). The exit code is
//! the documented code of the first failure (0 when there is none). It changes nothing on
//! disk beyond what opening a session does; it starts no agent. Called by `cmd::doctor`.

mod account;
mod routes;
mod state;
mod unit;

use std::fmt;
use std::process::ExitCode;

use crate::app::cli::{DoctorArgs, GlobalArgs};
use crate::app::commands::{CmdResult, exit, load_personas_async, out};
use crate::core::persona::Persona;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    Ok,
    /// Worth knowing, nothing to fix (a daemon runs, no unit is installed).
    Info,
    /// It runs, but not fully (a route not configured, a voice that cannot be made).
    Warn,
    /// It would not run, or not safely; the exit code is non-zero.
    Fail,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Level::Ok => "ok",
            Level::Info => "info",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        })
    }
}

/// One line of the report: what was checked, what was found, and for a problem what to do.
#[derive(Debug, Clone)]
pub(crate) struct Finding {
    pub level: Level,
    pub check: String,
    pub text: String,
    pub fix: Option<String>,
    /// The exit code a failure maps to.
    pub code: u8,
}

impl Finding {
    pub(crate) fn ok(check: impl Into<String>, text: impl Into<String>) -> Finding {
        Finding::new(Level::Ok, check, text)
    }

    pub(crate) fn info(check: impl Into<String>, text: impl Into<String>) -> Finding {
        Finding::new(Level::Info, check, text)
    }

    pub(crate) fn warn(
        check: impl Into<String>,
        text: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        Finding::new(Level::Warn, check, text).fix(fix)
    }

    pub(crate) fn fail(
        check: impl Into<String>,
        text: impl Into<String>,
        fix: impl Into<String>,
        code: u8,
    ) -> Finding {
        Finding {
            code,
            ..Finding::new(Level::Fail, check, text).fix(fix)
        }
    }

    fn new(level: Level, check: impl Into<String>, text: impl Into<String>) -> Finding {
        Finding {
            level,
            check: check.into(),
            text: text.into(),
            fix: None,
            code: exit::FAILURE,
        }
    }

    fn fix(mut self, fix: impl Into<String>) -> Finding {
        self.fix = Some(fix.into());
        self
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:<5} {}: {}", self.level, self.check, self.text)?;
        match &self.fix {
            Some(fix) => write!(f, "; fix: {fix}"),
            None => Ok(()),
        }
    }
}

/// The report as printed, with its summary line.
pub(crate) fn render(findings: &[Finding]) -> String {
    let mut text = String::new();
    for f in findings {
        text.push_str(&f.to_string());
        text.push('\n');
    }
    let count = |l: Level| findings.iter().filter(|f| f.level == l).count();
    text.push_str(&format!(
        "\n{} ok, {} info, {} warning(s), {} failure(s)\n",
        count(Level::Ok),
        count(Level::Info),
        count(Level::Warn),
        count(Level::Fail)
    ));
    text
}

/// The exit code of a report: the first failure's, else success.
fn exit_code(findings: &[Finding]) -> ExitCode {
    findings
        .iter()
        .find(|f| f.level == Level::Fail)
        .map_or(ExitCode::SUCCESS, |f| ExitCode::from(f.code))
}

/// `personad doctor`.
pub(crate) async fn doctor(global: GlobalArgs, mut args: DoctorArgs) -> CmdResult {
    let mut findings = Vec::new();
    let personas = personas(&global, &args, &mut findings).await;
    findings.extend(state::check(&global.state_dir).await?);
    let servers = if args.credentials.test_dc {
        crate::adapters::mtproto::Servers::Test
    } else {
        crate::adapters::mtproto::Servers::Production
    };
    for p in &personas {
        findings.push(account::session(&global.state_dir, &p.name, servers).await);
    }
    if args.telegram {
        crate::app::daemon::credentials_from_systemd(&mut args.credentials);
        findings.extend(account::online(&global.state_dir, &personas, &args.credentials).await);
    }
    let unit = args.unit.clone();
    findings.extend(tokio::task::spawn_blocking(move || unit::check(unit.as_deref())).await?);
    findings.extend(routes::check(&args.check, &personas, args.offline).await);
    out(&render(&findings))?;
    Ok(exit_code(&findings))
}

/// The configuration and persona files, as `check` reads them: a failure per unusable file
/// (each problem with its file:line), a warning per warning; returns the personas to check
/// further (usable and enabled).
async fn personas(
    global: &GlobalArgs,
    args: &DoctorArgs,
    findings: &mut Vec<Finding>,
) -> Vec<Persona> {
    match args.check.runtime.raw().validate() {
        Ok(_) => findings.push(Finding::ok("settings", "valid")),
        Err(e) => findings.push(Finding::fail(
            "settings",
            e.to_string(),
            "correct the option or its environment variable (personad --help)",
            exit::CONFIG,
        )),
    }
    for dir in global.prompt_dirs() {
        if !dir.is_dir() {
            findings.push(Finding::warn(
                "prompts",
                format!("{} does not exist", dir.display()),
                "create it, or point --prompts at the role prompts",
            ));
        }
    }
    let report = match load_personas_async(global).await {
        Ok(r) => r,
        Err(e) => {
            findings.push(Finding::fail(
                "personas",
                e.to_string(),
                "point --agents (PERSONAD_AGENTS_DIR) at the folder of persona files",
                e.exit_code(),
            ));
            return Vec::new();
        }
    };
    let dir = global.agents_dir.display();
    if report.entries.is_empty() {
        findings.push(Finding::fail(
            "personas",
            format!("no persona file (*.md) in {dir}"),
            "write one (docs/persona-format.md), or point --agents at them",
            exit::DATA,
        ));
    }
    let mut usable = Vec::new();
    for entry in &report.entries {
        let file = entry.path.display().to_string();
        match &entry.persona {
            Some(p) if p.disabled => {
                findings.push(Finding::info(
                    format!("persona {}", p.name),
                    format!("{file}: disabled (`# Disabled`)"),
                ));
            }
            Some(p) => {
                findings.push(Finding::ok(
                    format!("persona {}", p.name),
                    format!("{file} reads"),
                ));
                usable.push(p.clone());
            }
            None => {}
        }
        for problem in &entry.problems {
            let check = "persona file";
            findings.push(if problem.is_error() {
                Finding::fail(check, problem.to_string(), "correct that line (docs/persona-format.md); `personad check` shows the file in full", exit::DATA)
            } else {
                Finding::warn(check, problem.to_string(), "see docs/persona-format.md")
            });
        }
    }
    usable
}
