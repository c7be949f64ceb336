//! The binary as an operator uses it: `check`, `state`, `run`, and the `chat` playground in
//! JSONL mode on virtual time. Exit codes and the lines operators rely on are asserted.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use jiff::Timestamp;
use personad::adapters::store::{GraphStore, StateDir};
use personad::core::graph::TaskGraph;
use personad::core::model::{Chat, ChatId, ChatKind};
use serde_json::Value;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn personad(args: &[&str], cwd: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_personad"));
    cmd.args(args).current_dir(cwd);
    common::clear_env(&mut cmd);
    cmd
}

fn run(args: &[&str], cwd: &Path) -> Result<Output, std::io::Error> {
    personad(args, cwd).output()
}

fn run_with_stdin(
    args: &[&str],
    cwd: &Path,
    input: &str,
) -> Result<Output, Box<dyn std::error::Error>> {
    let mut child = personad(args, cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(input.as_bytes())?;
    Ok(child.wait_with_output()?)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn check_accepts_the_shipped_samples() -> TestResult {
    let out = run(&["check"], &root())?;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("Wren"), "{stdout}");
    assert!(
        stdout.contains("+1555*****01"),
        "phones are masked: {stdout}"
    );
    assert!(!stdout.contains("+15550100001"), "{stdout}");
    Ok(())
}

#[test]
fn check_names_file_and_line_of_a_broken_persona_and_fails() -> TestResult {
    let dir = tempfile::tempdir()?;
    let agents = common::agents_with_a_good_persona(dir.path())?;
    std::fs::write(
        agents.join("bad.md"),
        "# Agent Name\nBad\n# Agent Phone\n+15550100008\n# Agent Timezone\nMars/Olympus\n# Agent Instructions\nHi.\n",
    )?;
    let out = run(&["check"], dir.path())?;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(65), "{stdout}");
    assert!(stdout.contains("UNUSABLE"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("bad.md:6: error:") && l.contains("Mars/Olympus")),
        "the problem names file and line: {stdout}"
    );
    Ok(())
}

/// `check` shows each persona's LLM and group settings (mode, share of voice, cooldown,
/// classifier, the languages of its request words), with the command line filling in what
/// the persona leaves out; an unknown `# Language` is a warning naming the line.
#[test]
fn check_shows_each_personas_llm_and_group_settings() -> TestResult {
    let dir = tempfile::tempdir()?;
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents)?;
    std::fs::write(
        agents.join("Pari.md"),
        "# Agent Name\nPari\n# Agent Phone\n+15550100011\n# LLM\nopenai:gpt-5-mini\n# Group Trigger Mode\ntalkative\n# Group Max Share\n10\n# Group Cooldown\n90\n# Language\nPersian, en, Klingon\n# Agent Instructions\nHi.\n",
    )?;
    std::fs::write(
        agents.join("Wren.md"),
        "# Agent Name\nWren\n# Agent Phone\n+15550100012\n# Agent Instructions\nHi.\n",
    )?;
    let out = run(
        &["check", "--llm", "grok", "--classifier-model", "cls-1"],
        dir.path(),
    )?;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let line_after = |name: &str| {
        let mut lines = stdout.lines();
        lines.find(|l| l.contains(&format!(" {name}  (")));
        lines.next().unwrap_or("").to_string()
    };
    let pari = line_after("Pari");
    assert!(pari.contains("llm openai:gpt-5-mini"), "{pari}");
    assert!(pari.contains("talkative mode"), "{pari}");
    assert!(
        pari.contains("share of voice 10% of the last 40 messages"),
        "{pari}"
    );
    assert!(pari.contains("cooldown 90 s"), "{pari}");
    assert!(pari.contains("classifier cls-1"), "{pari}");
    assert!(pari.contains("request words: Persian, en"), "{pari}");
    let wren = line_after("Wren");
    assert!(
        wren.contains("llm grok") && wren.contains("smart mode"),
        "{wren}"
    );
    assert!(wren.contains("request words: by script"), "{wren}");
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("Pari.md:14: warning:") && l.contains("Klingon")),
        "{stdout}"
    );
    Ok(())
}

/// A start typing delay longer than a saved graph can hold (a day) is refused by `check`,
/// naming the file and line, instead of being saved as a wait that cannot be loaded back.
#[test]
fn check_refuses_a_typing_delay_a_saved_plan_could_not_hold() -> TestResult {
    for delay in ["86401", "1e12"] {
        let dir = tempfile::tempdir()?;
        let agents = common::agents_with_a_good_persona(dir.path())?;
        std::fs::write(
            agents.join("slow.md"),
            format!(
                "# Agent Name\nSlow\n# Agent Phone\n+15550100009\n# Start Typing Delay\n{delay}\n# Agent Instructions\nHi.\n"
            ),
        )?;
        let out = run(&["check"], dir.path())?;
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(65), "{delay}: {stdout}");
        assert!(
            stdout
                .lines()
                .any(|l| l.contains("slow.md:6: error:") && l.contains("from 0 to 86400")),
            "{delay}: {stdout}"
        );
    }
    Ok(())
}

#[test]
fn check_loads_the_python_originals_persona_files_unchanged() -> TestResult {
    let Some(data) = common::shared_data("cw-telegram-agent") else {
        return Ok(());
    };
    for (agents, prompts) in [
        ("v27bdb37/agents", "v27bdb37/prompts".to_string()),
        (
            "head/agents",
            format!(
                "{}:{}",
                data.join("head/prompts").display(),
                data.join("head/configprompts").display()
            ),
        ),
    ] {
        let prompts = if prompts.contains(':') {
            prompts
        } else {
            data.join(prompts).display().to_string()
        };
        let agents = data.join(agents).display().to_string();
        let out = run(
            &["--agents", &agents, "--prompts", &prompts, "check"],
            &root(),
        )?;
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{agents}: {stdout}");
        assert!(stdout.contains(" 0 error(s)"), "{stdout}");
    }
    Ok(())
}

#[test]
fn options_come_from_the_environment_too() -> TestResult {
    let dir = tempfile::tempdir()?;
    let out = personad(&["check"], dir.path())
        .env("PERSONAD_AGENTS_DIR", root().join("agents"))
        .env("PERSONAD_PROMPTS_PATH", root().join("prompts"))
        .output()?;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let out = personad(&["check"], dir.path())
        .env("PERSONAD_AGENTS_DIR", dir.path().join("nowhere"))
        .output()?;
    assert_eq!(out.status.code(), Some(66));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("nowhere") && stderr.lines().count() == 1,
        "one clear line: {stderr}"
    );
    Ok(())
}

fn sample_graph(chat: i64) -> TaskGraph {
    let now = Timestamp::from_second(1_750_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
    let chat = Chat {
        id: ChatId(chat),
        kind: ChatKind::Direct,
        title: "Bob".into(),
    };
    TaskGraph::with_received(
        "Wren",
        chat,
        now,
        Some(personad::core::model::MessageId(3)),
        now,
    )
}

#[test]
fn state_list_and_show_print_graphs_and_report_corrupt_files() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let store = GraphStore::new(StateDir::new(&state));
    store.save(&sample_graph(42))?;
    std::fs::write(state.join("graphs/Wren/43.md"), "not a graph")?;
    std::fs::create_dir_all(state.join("Wren"))?;
    std::fs::write(
        state.join("Wren/agent-state.json"),
        r#"{"disabled_chats":{"-77":{"since":"2026-11-22T10:00:00Z","reason":"CHAT_WRITE_FORBIDDEN"}}}"#,
    )?;
    let st = state.display().to_string();

    let out = run(&["--state", &st, "state", "list"], dir.path())?;
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a corrupt file is reported, not fatal: {stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("Wren") && l.contains("42") && l.contains("received")),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("UNREADABLE") && l.contains("43.md")),
        "{stdout}"
    );

    let out = run(&["--state", &st, "state", "show", "Wren", "42"], dir.path())?;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("received")
            && stdout.contains("pending")
            && stdout.contains("\"message_id\":3"),
        "{stdout}"
    );

    let out = run(&["--state", &st, "state", "show", "Wren", "43"], dir.path())?;
    assert_eq!(out.status.code(), Some(65));
    let out = run(&["--state", &st, "state", "show", "Wren", "44"], dir.path())?;
    assert_eq!(out.status.code(), Some(66));

    let out = run(
        &[
            "--state", &st, "state", "clear", "--agent", "Wren", "--chat", "42",
        ],
        dir.path(),
    )?;
    assert_eq!(out.status.code(), Some(0));
    assert!(!state.join("graphs/Wren/42.md").exists());
    assert!(
        state.join("graphs/Wren/43.md").exists(),
        "clearing one chat leaves the others"
    );
    Ok(())
}

/// `run` with the credentials it needs (fake: nothing here reaches Telegram or Gemini).
/// `check` names, per persona, where each kind of LLM call goes (provider, model, base URL
/// without credentials) and warns about a route whose provider is not configured; on a
/// local-only setup the group classifier follows the planner's route.
#[test]
fn check_shows_each_roles_route_with_model_and_base_url() -> TestResult {
    let dir = tempfile::tempdir()?;
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents)?;
    std::fs::write(
        agents.join("Wren.md"),
        "# Agent Name\nWren\n# Agent Phone\n+15550100012\n# Agent Instructions\nHi.\n",
    )?;
    let out = personad(&["check", "--llm", "openai"], dir.path())
        .env("OPENAI_BASE_URL", "http://user:pw@127.0.0.1:8080/v1")
        .env("OPENAI_MODEL", "smollm2")
        .output()?;
    let stdout = text(&out.stdout);
    let routes = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("routes:"))
        .unwrap_or_default();
    assert!(
        routes.contains(
            "plans (task blocks), summaries, schedule: openai:smollm2 at http://127.0.0.1:8080/v1"
        ),
        "{stdout}"
    );
    assert!(
        routes.contains(
            "group classifier (JSON held to its schema): openai:smollm2 at http://127.0.0.1:8080/v1"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("pw@"), "{stdout}");
    assert!(!stdout.contains("not configured"), "{stdout}");
    // The media route is shown too: its Gemini default has no key here, and says so.
    assert!(
        stdout.contains("media (photos, stickers, voice notes described and transcribed): gemini:")
            && stdout.contains("warning: the media route cannot be served"),
        "{stdout}"
    );
    let out = personad(
        &["check", "--llm", "openai", "--media-model", "openai:llava"],
        dir.path(),
    )
    .env("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    .output()?;
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("described and transcribed): openai:llava at http://127.0.0.1:8080/v1\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("media route cannot"), "{stdout}");
    // Gemini without a key: both routes are named as not configured, and counted.
    let out = run(&["check", "--llm", "gemini"], dir.path())?;
    let stdout = text(&out.stdout);
    assert!(stdout.contains("NOT CONFIGURED"), "{stdout}");
    assert!(
        stdout.contains("warning: 2 LLM route(s) not configured"),
        "{stdout}"
    );
    // The key in systemd's credentials directory (`LoadCredential=gemini_api_key:...`), as
    // `run` reads it: every route is served, and the key never printed.
    let creds = dir.path().join("credentials");
    std::fs::create_dir_all(&creds)?;
    std::fs::write(creds.join("gemini_api_key"), "SENTINEL_CREDENTIAL_KEY\n")?;
    let out = personad(&["check", "--llm", "gemini"], dir.path())
        .env("CREDENTIALS_DIRECTORY", &creds)
        .output()?;
    let stdout = text(&out.stdout);
    assert!(!stdout.contains("NOT CONFIGURED"), "{stdout}");
    assert!(!stdout.contains("route(s) not configured"), "{stdout}");
    assert!(!stdout.contains("media route cannot"), "{stdout}");
    assert!(!stdout.contains("SENTINEL_CREDENTIAL_KEY"), "{stdout}");
    Ok(())
}

fn run_cmd(dir: &Path, agents: &Path) -> Command {
    let mut cmd = personad(&["run"], dir);
    cmd.env("PERSONAD_AGENTS_DIR", agents)
        .env("PERSONAD_PROMPTS_PATH", root().join("prompts"))
        .env("PERSONAD_STATE_DIR", dir.join("state"))
        .env("TELEGRAM_API_ID", "12345")
        .env("TELEGRAM_API_HASH", "SENTINEL_HASH_0123456789")
        .env("GEMINI_API_KEY", "SENTINEL_GEMINI_KEY");
    cmd
}

#[test]
fn run_without_usable_agents_exits_unavailable() -> TestResult {
    let dir = tempfile::tempdir()?;
    std::fs::create_dir_all(dir.path().join("agents"))?;
    let out = run_cmd(dir.path(), &dir.path().join("agents")).output()?;
    assert_eq!(out.status.code(), Some(69));
    assert!(text(&out.stderr).contains("no agent could start"));
    Ok(())
}

#[test]
fn run_needs_telegram_credentials() -> TestResult {
    let dir = tempfile::tempdir()?;
    let out = personad(&["run"], &root())
        .env("GEMINI_API_KEY", "x")
        .output()?;
    assert_eq!(out.status.code(), Some(78));
    assert!(text(&out.stderr).contains("TELEGRAM_API_ID and TELEGRAM_API_HASH are required"));
    drop(dir);
    Ok(())
}

#[test]
fn run_names_the_login_command_for_an_agent_without_a_session() -> TestResult {
    let dir = tempfile::tempdir()?;
    let out = run_cmd(dir.path(), &root().join("agents")).output()?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("personad login --agent \"Wren\""),
        "{stderr}"
    );
    assert!(
        stderr.contains("personad login --agent \"Ingrid\""),
        "{stderr}"
    );
    assert!(
        !stderr.contains("SENTINEL"),
        "no secret in the output: {stderr}"
    );
    Ok(())
}

#[test]
fn run_refuses_a_session_file_readable_by_others() -> TestResult {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir()?;
    let agent_dir = dir.path().join("state").join("Wren");
    std::fs::create_dir_all(&agent_dir)?;
    std::fs::set_permissions(&agent_dir, std::fs::Permissions::from_mode(0o700))?;
    let session = agent_dir.join("telegram.session");
    std::fs::write(&session, b"")?;
    std::fs::set_permissions(&session, std::fs::Permissions::from_mode(0o644))?;
    let out = run_cmd(dir.path(), &root().join("agents")).output()?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains("readable by other users") && stderr.contains("chmod 600"),
        "{stderr}"
    );
    Ok(())
}

fn playground_args<'a>(state: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "--state", state, "chat", "--agent", "Wren", "--jsonl", "--fast",
    ];
    v.extend_from_slice(extra);
    v
}

fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

#[test]
fn playground_burst_in_the_debounce_window_gets_one_reply() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state").display().to_string();
    let input = (0..5)
        .map(|i| format!("{{\"text\":\"part {i}\",\"after_ms\":300}}\n"))
        .collect::<String>();
    let out = run_with_stdin(&playground_args(&state, &[]), &root(), &input)?;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let evs = events(&stdout);
    let inbound = evs.iter().filter(|e| e["event"] == "inbound").count();
    let sends: Vec<&Value> = evs.iter().filter(|e| e["event"] == "send").collect();
    assert_eq!(inbound, 5, "{stdout}");
    assert_eq!(sends.len(), 1, "one plan for the burst: {stdout}");
    assert_eq!(sends[0]["text"], "Wren heard: part 4");
    // The last message came at 1500 ms; planning follows the 2 s debounce (3500 ms). Wren's
    // pacing then adds her Start Typing Delay (3 s) and typing at 6 chars/s for the 18-char
    // answer (3 s), all on virtual time.
    assert_eq!(sends[0]["at_ms"], 9500);
    let typing: Vec<i64> = evs
        .iter()
        .filter(|e| e["event"] == "typing")
        .filter_map(|e| e["at_ms"].as_i64())
        .collect();
    assert_eq!(
        typing,
        vec![6500],
        "typing shows while the answer is typed: {stdout}"
    );
    Ok(())
}

#[test]
fn playground_reports_bad_input_lines_and_keeps_going() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state").display().to_string();
    let input = "{\"txt\":\"typo\"}\nnot json\n{\"from\":\"Ann\",\"text\":\"hello\"}\n";
    let out = run_with_stdin(
        &playground_args(&state, &["--group", "Readers"]),
        &root(),
        input,
    )?;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let evs = events(&stdout);
    let errors: Vec<&Value> = evs.iter().filter(|e| e["event"] == "error").collect();
    assert_eq!(errors.len(), 2, "{stdout}");
    assert!(
        errors[0]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("line 1:"))
    );
    let inbound: Vec<&Value> = evs.iter().filter(|e| e["event"] == "inbound").collect();
    assert_eq!(inbound.len(), 1);
    assert_eq!(inbound[0]["from"], "Ann");
    Ok(())
}

/// `state history` prints a playground conversation: who wrote what, and the persona's answers.
#[test]
fn state_history_prints_a_playground_conversation() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state").display().to_string();
    let input = "{\"text\":\"hello there\"}\n{\"text\":\"how are you?\",\"after_ms\":60000}\n";
    let out = run_with_stdin(&playground_args(&state, &[]), &root(), input)?;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let chat = personad::adapters::memory::user_id_for("User").to_string();
    let out = run(
        &[
            "--state",
            &state,
            "state",
            "history",
            "Wren",
            &chat,
            "--playground",
            "--last",
            "3",
        ],
        &root(),
    )?;
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}{}", text(&out.stderr));
    assert!(shown.contains("4 message(s), the last 3"), "{shown}");
    assert!(
        !shown.contains("User: hello there"),
        "only the last 3: {shown}"
    );
    assert!(
        shown.contains("Wren (persona): Wren heard: hello there"),
        "{shown}"
    );
    assert!(shown.contains("User: how are you?"), "{shown}");
    let missing = run(
        &["--state", &state, "state", "history", "Wren", "42"],
        &root(),
    )?;
    assert_ne!(missing.status.code(), Some(0));
    Ok(())
}

#[test]
fn playground_keeps_its_transcript_across_runs() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state").display().to_string();
    let out = run_with_stdin(
        &playground_args(&state, &[]),
        &root(),
        "{\"text\":\"one\"}\n",
    )?;
    assert_eq!(out.status.code(), Some(0));
    let out = run_with_stdin(
        &playground_args(&state, &[]),
        &root(),
        "{\"text\":\"two\"}\n",
    )?;
    let evs = events(&text(&out.stdout));
    let ids: Vec<i64> = evs
        .iter()
        .filter(|e| e["event"] == "inbound")
        .filter_map(|e| e["id"].as_i64())
        .collect();
    assert_eq!(
        ids,
        vec![3],
        "message ids continue after the first run's two messages"
    );
    Ok(())
}
