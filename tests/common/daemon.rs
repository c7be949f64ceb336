//! The daemon as a child process for end-to-end tests: `personad run --telegram memory` in a
//! scratch directory, `personad ctl`, bounded polling, and the in-memory transcripts it saves.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub(crate) const TESS: &str = "# Agent Name\nTess\n\n# Agent Phone\n+15550100042\n\n# Agent Instructions\nYou are Tess, calm and brief.\n";

pub(crate) fn persona(name: &str, phone: &str, extra: &str) -> String {
    format!(
        "# Agent Name\n{name}\n\n# Agent Phone\n{phone}\n\n{extra}# Agent Instructions\nYou are {name}.\n"
    )
}

/// A scratch directory with `agents/` and `state/`.
pub(crate) struct Scratch {
    pub(crate) dir: tempfile::TempDir,
}

impl Scratch {
    pub(crate) fn new(files: &[(&str, &str)]) -> Result<Scratch, std::io::Error> {
        let dir = tempfile::Builder::new().prefix("ops").tempdir()?;
        std::fs::create_dir_all(dir.path().join("agents"))?;
        for (name, text) in files {
            std::fs::write(dir.path().join("agents").join(name), text)?;
        }
        Ok(Scratch { dir })
    }
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
    pub(crate) fn agents(&self) -> PathBuf {
        self.path().join("agents")
    }
    pub(crate) fn state(&self) -> PathBuf {
        self.path().join("state")
    }
    pub(crate) fn log(&self) -> PathBuf {
        self.path().join("daemon.log")
    }
    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(self.log()).unwrap_or_default()
    }
}

pub(crate) fn base(cmd: &mut Command) {
    for var in [
        "PERSONAD_AGENTS_DIR",
        "PERSONAD_PROMPTS_PATH",
        "PERSONAD_STATE_DIR",
        "PERSONAD_LOG",
        "PERSONAD_LOG_FORMAT",
        "PERSONAD_PLANNER",
        "PERSONAD_TELEGRAM",
        "PERSONAD_METRICS_ADDR",
        "PERSONAD_ADMIN_CHATS",
        "GEMINI_API_KEY",
        "GOOGLE_GEMINI_API_KEY",
        "GEMINI_BASE_URL",
        "NOTIFY_SOCKET",
        "WATCHDOG_USEC",
        "WATCHDOG_PID",
        "JOURNAL_STREAM",
        "CREDENTIALS_DIRECTORY",
        "TELEGRAM_API_ID",
        "TELEGRAM_API_HASH",
        "PERSONAD_LLM",
        "DEFAULT_AGENT_LLM",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENROUTER_API_KEY",
        "GROK_API_KEY",
        "XAI_API_KEY",
        "OLLAMA_BASE_URL",
        "PERSONAD_SIM_ADDR",
    ] {
        cmd.env_remove(var);
    }
}

/// Starts `personad run --telegram memory` with fast pacing and JSON logs into the log file.
pub(crate) fn start(
    s: &Scratch,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Result<Child, std::io::Error> {
    start_limited(s, extra, env, None)
}

/// As [`start`], with the open file limit lowered to `nofile` (through the shell's `ulimit`).
pub(crate) fn start_limited(
    s: &Scratch,
    extra: &[&str],
    env: &[(&str, &str)],
    nofile: Option<u32>,
) -> Result<Child, std::io::Error> {
    start_on(s, &["--telegram", "memory"], extra, env, nofile)
}

/// Starts `personad run` on the simulated Telegram listening at `sim` (one the test runs).
#[allow(dead_code)]
pub(crate) fn start_sim(
    s: &Scratch,
    sim: std::net::SocketAddr,
    extra: &[&str],
) -> Result<Child, std::io::Error> {
    let addr = sim.to_string();
    start_on(
        s,
        &[
            "--telegram",
            "sim",
            "--sim-addr",
            &addr,
            "--planner",
            "echo",
        ],
        extra,
        &[],
        None,
    )
}

/// Starts `personad run` on the Telegram `telegram` names, with fast pacing and JSON logs
/// into the log file.
pub(crate) fn start_on(
    s: &Scratch,
    telegram: &[&str],
    extra: &[&str],
    env: &[(&str, &str)],
    nofile: Option<u32>,
) -> Result<Child, std::io::Error> {
    let bin = env!("CARGO_BIN_EXE_personad");
    let mut cmd = match nofile {
        None => Command::new(bin),
        Some(n) => {
            let mut sh = Command::new("sh");
            sh.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\""), bin]);
            sh
        }
    };
    base(&mut cmd);
    cmd.arg("--agents")
        .arg(s.agents())
        .arg("--prompts")
        .arg(s.agents())
        .arg("--state")
        .arg(s.state())
        .args(["--log-format", "json", "run"])
        .args(telegram)
        .args(if extra.contains(&"--debounce-ms") {
            &[][..]
        } else {
            &["--debounce-ms", "20"][..]
        })
        .args(["--typing-speed", "100000"])
        .args(["--start-typing-delay", "0"])
        .args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(s.log())?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
}

/// `personad ctl ARGS`; `say` returns at once unless the test asks it to wait (`--wait`).
pub(crate) fn ctl(s: &Scratch, args: &[&str]) -> Result<Output, std::io::Error> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_personad"));
    base(&mut cmd);
    cmd.arg("--state").arg(s.state()).arg("ctl");
    match args.split_first() {
        Some((&"say", rest)) if !rest.contains(&"--wait") => {
            cmd.args(["say", "--no-wait"]).args(rest);
        }
        _ => {
            cmd.args(args);
        }
    }
    cmd.output()
}

/// `ctl wait-quiet`: returns once the daemon's runtime has applied everything given to it and
/// has nothing running or due on its clock (its answer says what waits, and until when). A
/// "nothing happened" check after it does not depend on how fast this machine is.
pub(crate) fn wait_quiet(s: &Scratch) -> Result<String, String> {
    let out = ctl(s, &["wait-quiet", "--timeout", "30"]).map_err(|e| e.to_string())?;
    let text = stdout(&out);
    if out.status.success() && text.starts_with("quiet") {
        Ok(text)
    } else {
        Err(format!(
            "the daemon did not get quiet: {text}{}\nlog:\n{}",
            String::from_utf8_lossy(&out.stderr),
            s.log_text()
        ))
    }
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Polls `f` every 20 ms until it returns `Some`, for at most `limit`.
pub(crate) fn poll<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `ctl status` answers (the daemon is up).
pub(crate) fn wait_up(s: &Scratch) -> Result<String, String> {
    poll(Duration::from_secs(20), || {
        ctl(s, &["status"])
            .ok()
            .filter(|o| o.status.success())
            .map(|o| stdout(&o))
    })
    .ok_or_else(|| format!("daemon did not come up; log:\n{}", s.log_text()))
}

pub(crate) fn signal(child: &Child, sig: &str) -> Result<(), std::io::Error> {
    let status = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()?;
    assert!(status.success(), "kill {sig} failed");
    Ok(())
}

pub(crate) fn wait_exit(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    poll(limit, || child.try_wait().ok().flatten())
}

/// Stops the daemon with SIGTERM and waits (10 s at most) for it to exit.
pub(crate) fn stop_daemon(reaper: &mut Reaper) -> Result<(), String> {
    let child = reaper.0.as_mut().ok_or("no child")?;
    signal(child, "-TERM").map_err(|e| e.to_string())?;
    wait_exit(child, Duration::from_secs(10)).ok_or("no exit")?;
    reaper.0 = None;
    Ok(())
}

/// Stops a child for good if a test failed half-way.
pub(crate) struct Reaper(pub(crate) Option<Child>);
impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The transcript of one in-memory chat, as the daemon saved it.
pub(crate) fn transcript(s: &Scratch, agent: &str) -> Vec<Value> {
    let dir = s.state().join(agent).join("telegram-memory");
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        // A save in progress shows as a hidden temporary file beside the transcript.
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        if entry.path().is_file()
            && let Ok(v) = personad::adapters::memory::read_folded_json(&entry.path())
        {
            all.push(v);
        }
    }
    all
}

/// Texts of messages in chats titled `title`.
pub(crate) fn texts(s: &Scratch, agent: &str, title: &str) -> Vec<String> {
    messages(s, agent, title)
        .into_iter()
        .filter_map(|m| m["text"].as_str().map(str::to_string))
        .collect()
}

/// Texts the agent itself wrote in chats titled `title`.
pub(crate) fn sent(s: &Scratch, agent: &str, title: &str) -> Vec<String> {
    messages(s, agent, title)
        .into_iter()
        .filter(|m| m["outgoing"] == true)
        .filter_map(|m| m["text"].as_str().map(str::to_string))
        .collect()
}

/// Messages (as saved) in chats titled `title`.
pub(crate) fn messages(s: &Scratch, agent: &str, title: &str) -> Vec<Value> {
    transcript(s, agent)
        .into_iter()
        .filter(|c| c["chat"]["title"] == title)
        .flat_map(|c| c["messages"].as_array().cloned().unwrap_or_default())
        .collect()
}
