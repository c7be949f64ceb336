//! State files the daemon must survive: graphs that are well-formed but cannot run (cycles,
//! self-dependencies, absurd waits) are quarantined with a reason that `state list` shows;
//! state files that are not regular files or are too big are refused without blocking; one
//! process per state directory; loose permissions are tightened.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use jiff::Timestamp;
use personad::adapters::store::{GraphStore, StateDir};
use personad::core::graph::codec::encode;
use personad::core::graph::{Task, TaskGraph, TaskSpec};
use personad::core::model::{Chat, ChatId, ChatKind, MessageId};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn personad(args: &[&str], cwd: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_personad"));
    cmd.args(args).current_dir(cwd);
    common::clear_env(&mut cmd);
    cmd
}

fn run(args: &[&str], cwd: &Path) -> Result<Output, std::io::Error> {
    personad(args, cwd).output()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn now() -> Timestamp {
    Timestamp::from_second(1_750_000_000).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// A received task followed by a send and a wait, in chat `chat` of agent Wren.
fn graph(chat: i64) -> TaskGraph {
    let chat = Chat {
        id: ChatId(chat),
        kind: ChatKind::Direct,
        title: "Bob".into(),
    };
    let mut g = TaskGraph::with_received("Wren", chat, now(), Some(MessageId(3)), now());
    let first = g.tasks[0].id.clone();
    g.append_chain(
        &first,
        vec![
            Task::new(TaskSpec::send("hi", None), now()),
            Task::new(TaskSpec::wait(2.0, false), now()),
        ],
    );
    g
}

/// Writes `g` as a graph file without validating it (as a damaged or forged file would be).
fn write_raw(state: &Path, g: &TaskGraph) -> TestResult {
    let path = StateDir::new(state).graph_path(&g.key());
    std::fs::create_dir_all(path.parent().ok_or("no parent")?)?;
    std::fs::write(path, encode(g)?)?;
    Ok(())
}

#[test]
fn graphs_that_cannot_run_are_quarantined_with_their_reason_and_listed() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    // 1: a task depending on itself.
    let mut selfdep = graph(1);
    let id = selfdep.tasks[1].id.clone();
    selfdep.tasks[1].depends_on.push(id);
    write_raw(&state, &selfdep)?;
    // 2: a cycle of two tasks.
    let mut cycle = graph(2);
    let (a, b) = (cycle.tasks[1].id.clone(), cycle.tasks[2].id.clone());
    cycle.tasks[1].depends_on = vec![b];
    cycle.tasks[2].depends_on = vec![a];
    write_raw(&state, &cycle)?;
    // 3: a wait of 1e308 seconds.
    let mut huge = graph(3);
    huge.tasks[2].spec = TaskSpec::Wait {
        delay_secs: 1e308,
        typing: false,
        recording: false,
        retry_of: None,
    };
    write_raw(&state, &huge)?;
    // 4: a task not due before the year 9999.
    let mut far = graph(4);
    far.tasks[0].not_before = Some(Timestamp::MAX);
    write_raw(&state, &far)?;
    // 6: a forged file that moves its own clock along: every task updated in 2099 and one
    // due ten days later. Judged against now, it is past the horizon all the same.
    let mut forged = graph(6);
    let y2099 = Timestamp::from_second(4_070_908_800)?;
    for t in &mut forged.tasks {
        t.created_at = y2099;
        t.updated_at = y2099;
    }
    forged.created_at = y2099;
    forged.tasks[2].not_before = Some(y2099.checked_add(jiff::SignedDuration::from_hours(240))?);
    write_raw(&state, &forged)?;
    // 7: a conversation parked until 2099.
    let mut parked = graph(7);
    parked.parked_until = Some(y2099);
    write_raw(&state, &parked)?;
    // 5: a sound graph stays.
    GraphStore::new(StateDir::new(&state)).save(&graph(5))?;

    let st = state.display().to_string();
    let out = run(&["--state", &st, "state", "list"], dir.path())?;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    for (chat, why) in [
        ("1.md", "depends on itself"),
        ("2.md", "dependency cycle"),
        ("3.md", "waits"),
        ("4.md", "days from now"),
        ("6.md", "days from now"),
        ("7.md", "parked until"),
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("UNREADABLE") && l.contains(chat) && l.contains(why)),
            "{chat} must be reported ({why}): {stdout}"
        );
    }

    let loaded = GraphStore::new(StateDir::new(&state)).load_all(jiff::Timestamp::now())?;
    let chats: Vec<i64> = loaded.graphs.iter().map(|g| g.chat.id.0).collect();
    assert_eq!(chats, vec![5], "only the sound graph is loaded");
    assert_eq!(loaded.quarantined.len(), 6);

    let out = run(&["--state", &st, "state", "list"], dir.path())?;
    let stdout = text(&out.stdout);
    let quarantined: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("QUARANTINED"))
        .collect();
    assert_eq!(quarantined.len(), 6, "{stdout}");
    assert!(
        quarantined
            .iter()
            .any(|l| l.contains("1.md") && l.contains("depends on itself")),
        "{stdout}"
    );
    assert!(
        quarantined
            .iter()
            .any(|l| l.contains("2.md") && l.contains("dependency cycle")),
        "{stdout}"
    );
    Ok(())
}

/// Runs the command, killing it (and failing) if it has not finished within 30 s: a reader
/// blocked on a FIFO or reading `/dev/zero` must fail this test, not hang the suite.
fn run_bounded(args: &[&str], cwd: &Path) -> Result<Output, Box<dyn std::error::Error>> {
    bounded_output(personad(args, cwd))
}

/// [`run_bounded`] for a command already set up.
fn bounded_output(mut cmd: Command) -> Result<Output, Box<dyn std::error::Error>> {
    let args: Vec<_> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    for _ in 0..3000 {
        if child.try_wait()?.is_some() {
            return Ok(child.wait_with_output()?);
        }
        // A watchdog poll, not a timing assertion.
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill()?;
    let out = child.wait_with_output()?;
    Err(format!("personad {args:?} hung: {}", text(&out.stdout)).into())
}

fn mkfifo(path: &Path) -> TestResult {
    let status = Command::new("mkfifo").arg(path).status()?;
    assert!(status.success(), "mkfifo {}", path.display());
    Ok(())
}

#[test]
fn fifos_links_and_oversized_state_files_are_refused_without_blocking() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let store = GraphStore::new(StateDir::new(&state));
    store.save(&graph(5))?;
    let graphs = state.join("graphs/Wren");
    mkfifo(&graphs.join("6.md"))?;
    std::os::unix::fs::symlink("/dev/zero", graphs.join("7.md"))?;
    let outside = dir.path().join("outside.md");
    std::fs::write(&outside, encode(&graph(8))?)?;
    std::os::unix::fs::symlink(&outside, graphs.join("8.md"))?;
    // Sparse: 9 MiB that takes no disk space, over the 8 MiB graph cap.
    std::fs::File::create(graphs.join("9.md"))?.set_len(9 << 20)?;
    std::fs::create_dir_all(state.join("Wren"))?;
    mkfifo(&state.join("Wren/agent-state.json"))?;

    let st = state.display().to_string();
    let out = run_bounded(&["--state", &st, "state", "list"], dir.path())?;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    for (file, why) in [
        ("6.md", "FIFO"),
        ("7.md", "symbolic link"),
        ("8.md", "symbolic link"),
        ("9.md", "over the cap"),
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("UNREADABLE") && l.contains(file) && l.contains(why)),
            "{file}: {why}: {stdout}"
        );
    }
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("agent state UNREADABLE") && l.contains("FIFO")),
        "{stdout}"
    );

    // Startup's load moves them aside (never reading through them) and keeps the sound one.
    let loaded = store.load_all(jiff::Timestamp::now())?;
    let chats: Vec<i64> = loaded.graphs.iter().map(|g| g.chat.id.0).collect();
    assert_eq!(chats, vec![5]);
    assert_eq!(loaded.quarantined.len(), 4);
    assert!(outside.exists(), "the link's target is left alone");
    let (agent_state, q) = personad::adapters::store::load_agent_state(store.state_dir(), "Wren")?;
    assert!(agent_state.disabled_chats.is_empty());
    assert!(q.is_some_and(|q| q.reason.contains("FIFO")));
    Ok(())
}

#[test]
fn the_shared_reader_caps_what_it_reads_and_follows_links_only_when_asked() -> TestResult {
    use personad::adapters::store::{Symlinks, read_file};
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("f");
    std::fs::write(&file, b"12345")?;
    let link = dir.path().join("l");
    std::os::unix::fs::symlink(&file, &link)?;
    assert_eq!(read_file(&file, 5, Symlinks::Refuse)?, b"12345");
    assert!(read_file(&file, 4, Symlinks::Refuse).is_err());
    assert!(read_file(&link, 5, Symlinks::Refuse).is_err());
    assert_eq!(read_file(&link, 5, Symlinks::Follow)?, b"12345");
    // A device whose metadata says 0 bytes is still refused, link followed or not.
    let zero = dir.path().join("zero");
    std::os::unix::fs::symlink("/dev/zero", &zero)?;
    let e = read_file(&zero, 20 << 20, Symlinks::Follow)
        .err()
        .map(|e| e.to_string());
    assert!(e.is_some_and(|e| e.contains("a device")));
    // `/proc` files say 0 bytes and hold more: at most cap + 1 bytes are read.
    assert!(read_file(Path::new("/proc/self/maps"), 8, Symlinks::Follow).is_err());
    Ok(())
}

fn chat_with_input(state: &str, input: &str) -> Result<Output, Box<dyn std::error::Error>> {
    use std::io::Write as _;
    let mut child = personad(
        &[
            "--state", state, "chat", "--agent", "Wren", "--jsonl", "--fast",
        ],
        Path::new(env!("CARGO_MANIFEST_DIR")),
    )
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()?;
    // A refused process may exit before reading its input: a broken pipe here is expected.
    let _ = child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(input.as_bytes());
    Ok(child.wait_with_output()?)
}

#[test]
fn a_second_process_on_a_state_directory_is_refused_naming_the_holder() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let st = state.display().to_string();
    let input = "{\"text\":\"hello\"}\n";
    {
        let _held = personad::adapters::store::StateLock::acquire(&StateDir::new(&state))?;
        let out = chat_with_input(&st, input)?;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(69), "{stderr}");
        assert!(
            stderr.contains("in use by another personad")
                && stderr.contains(&format!("pid {}", std::process::id())),
            "{stderr}"
        );
        assert!(
            !text(&out.stdout).contains("\"send\""),
            "the refused process sent nothing"
        );
        let again = personad::adapters::store::StateLock::acquire(&StateDir::new(&state));
        assert!(again.is_err(), "the lock excludes other holders");
        let out = run(&["--state", &st, "state", "clear", "--all"], dir.path())?;
        assert_eq!(
            out.status.code(),
            Some(69),
            "state clear waits for the holder too"
        );
    }
    // Released with its holder: the next process runs.
    let out = chat_with_input(&st, input)?;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("\"send\""));
    Ok(())
}

#[test]
fn a_state_directory_others_can_use_is_tightened_with_a_log_line() -> TestResult {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &Path| -> std::io::Result<u32> {
        Ok(std::fs::symlink_metadata(p)?.permissions().mode() & 0o777)
    };
    let set = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    for loose in [0o777, 0o755] {
        let dir = tempfile::tempdir()?;
        let state = dir.path().join("state");
        GraphStore::new(StateDir::new(&state)).save(&graph(5))?;
        let file = StateDir::new(&state).graph_path(&graph(5).key());
        set(&state, loose)?;
        set(&state.join("graphs"), 0o755)?;
        set(&file, 0o644)?;
        let st = state.display().to_string();
        let out = chat_with_input(&st, "{\"text\":\"hello\"}\n")?;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains("readable or writable by others"),
            "one log line says so: {stderr}"
        );
        assert_eq!(mode(&state)?, 0o700, "{loose:o}");
        assert_eq!(mode(&state.join("graphs"))?, 0o700);
        assert_eq!(mode(&file)?, 0o600);
        // A private directory is used without a word.
        let out = chat_with_input(&st, "{\"text\":\"again\"}\n")?;
        assert!(!text(&out.stderr).contains("readable or writable by others"));
    }
    Ok(())
}

#[test]
fn a_loose_state_directory_that_cannot_be_tightened_is_refused_saying_how_to_fix_it() {
    // /proc/1 is 0555 and the kernel refuses to change its mode, even for root: a stand-in
    // for a directory that is not ours.
    let e = personad::adapters::store::secure_state_dir(&StateDir::new("/proc/1"))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("cannot be tightened") && e.contains("chmod -R go-rwx /proc/1"),
        "{e}"
    );
}

#[test]
fn a_cyclic_graph_left_in_the_playground_no_longer_hangs_it() -> TestResult {
    use std::io::Write as _;
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let chat = personad::adapters::memory::user_id_for("User");
    let mut g = graph(chat);
    let (a, b) = (g.tasks[1].id.clone(), g.tasks[2].id.clone());
    g.tasks[0].status = personad::core::graph::TaskStatus::Done;
    g.tasks[1].depends_on = vec![b];
    g.tasks[2].depends_on = vec![a];
    // The playground keeps its graphs under <state>/<agent>/playground.
    write_raw(&state.join("Wren").join("playground"), &g)?;
    let st = state.display().to_string();
    let mut child = personad(
        &[
            "--state", &st, "chat", "--agent", "Wren", "--jsonl", "--fast",
        ],
        Path::new(env!("CARGO_MANIFEST_DIR")),
    )
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()?;
    let _ = child.stdin.take().ok_or("no stdin")?.write_all(b"");
    for _ in 0..3000 {
        if child.try_wait()?.is_some() {
            let out = child.wait_with_output()?;
            let stdout = text(&out.stdout);
            assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
            assert!(!stdout.contains("\"send\""), "nothing of it runs: {stdout}");
            let q = personad::adapters::store::list_quarantined(&StateDir::new(
                state.join("Wren").join("playground"),
            ));
            assert!(
                q.iter()
                    .any(|(_, r)| r.as_deref().is_some_and(|r| r.contains("cycle"))),
                "{q:?}"
            );
            return Ok(());
        }
        // A watchdog poll, not a timing assertion.
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill()?;
    Err("the playground hung on a cyclic graph".into())
}

#[test]
fn a_fifo_among_usage_records_does_not_stall_state_usage() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    std::fs::create_dir_all(state.join("usage"))?;
    mkfifo(&state.join("usage/Wren.json"))?;
    let st = state.display().to_string();
    let out = run_bounded(&["--state", &st, "state", "usage"], dir.path())?;
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        all.contains("FIFO"),
        "the file is named as unreadable: {all}"
    );
    Ok(())
}

/// `personad check` with a FIFO named `x.md` and a persona over the 256 KiB cap in the agents
/// directory finishes (no read blocks on the FIFO), names both files with the reason, and still
/// loads the good persona next to them.
#[test]
fn check_reports_a_fifo_and_an_oversize_persona_and_loads_the_good_one() -> TestResult {
    let dir = tempfile::tempdir()?;
    let agents = common::agents_with_a_good_persona(dir.path())?;
    mkfifo(&agents.join("x.md"))?;
    std::fs::File::create(agents.join("big.md"))?.set_len(1 << 20)?;
    let out = run_bounded(&["check"], dir.path())?;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(65), "{stdout}{}", text(&out.stderr));
    for (file, why) in [
        ("x.md", "is a FIFO, not a regular file"),
        ("big.md", "over the 262144-byte (256 KiB) limit"),
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(file) && l.contains("error:") && l.contains(why)),
            "{file}: {why}: {stdout}"
        );
    }
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("ok") && l.contains("Good") && l.contains("good.md")),
        "{stdout}"
    );
    Ok(())
}

/// `personad run` with a FIFO where an agent's Telegram session should be stops at once with
/// exit 69 and a message naming the file and what it is, instead of handing the FIFO to SQLite
/// (which would block on it).
#[test]
fn run_refuses_a_fifo_as_the_telegram_session() -> TestResult {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let agent_dir = dir.path().join("state").join("Wren");
    std::fs::create_dir_all(&agent_dir)?;
    std::fs::set_permissions(&agent_dir, std::fs::Permissions::from_mode(0o700))?;
    let session = agent_dir.join("telegram.session");
    mkfifo(&session)?;
    // Private, so only the file-type check stands between it and SQLite.
    std::fs::set_permissions(&session, std::fs::Permissions::from_mode(0o600))?;
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents)?;
    std::fs::copy(root.join("agents/Wren.md"), agents.join("Wren.md"))?;
    let (agents, prompts, state) = (
        agents.display().to_string(),
        root.join("prompts").display().to_string(),
        dir.path().join("state").display().to_string(),
    );
    let mut cmd = personad(&["run"], dir.path());
    cmd.env("PERSONAD_AGENTS_DIR", &agents)
        .env("PERSONAD_PROMPTS_PATH", &prompts)
        .env("PERSONAD_STATE_DIR", &state)
        .env("TELEGRAM_API_ID", "12345")
        .env("TELEGRAM_API_HASH", "SENTINEL_HASH_0123456789")
        .env("GEMINI_API_KEY", "SENTINEL_GEMINI_KEY");
    let out = bounded_output(cmd)?;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    assert!(
        stderr.contains(&session.display().to_string()) && stderr.contains("is a FIFO"),
        "{stderr}"
    );
    Ok(())
}
