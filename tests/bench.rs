//! `personad bench` runs every scenario to completion at small sizes (idle graphs loaded at
//! startup, the burst, the sustained steps, the fresh-process cold start, disk noise) and its
//! JSON keeps the earlier names beside the new ones; `bench --daemon` runs the daemon path.
//! Figures are not judged here: speed targets live in docs/performance.md, measured by hand.

mod common;

use common::TestResult;

/// Runs `personad --state <state> bench <args>` and returns its JSON report, after checking
/// that it succeeded and that the report has each of `names`.
fn bench_report(
    state: &std::path::Path,
    args: &[&str],
    names: &[&str],
) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_personad"));
    common::clear_env(&mut cmd);
    for malloc in [
        "MALLOC_ARENA_MAX",
        "MALLOC_MMAP_THRESHOLD_",
        "MALLOC_TRIM_THRESHOLD_",
        "GLIBC_TUNABLES",
    ] {
        cmd.env_remove(malloc);
    }
    let out = cmd
        .arg("--state")
        .arg(state)
        .arg("bench")
        .args(args)
        .arg("--json")
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(text.trim())?;
    for name in names {
        assert!(report.get(name).is_some(), "{name} missing: {report}");
    }
    Ok(report)
}

/// The bench's temp state is gone: nothing was left in `--state`.
fn nothing_left(state: &std::path::Path) -> TestResult {
    let left: Vec<_> = std::fs::read_dir(state)?.flatten().collect();
    assert!(left.is_empty(), "{left:?}");
    Ok(())
}

#[test]
fn the_bench_runs_every_scenario_to_completion_and_names_its_figures() -> TestResult {
    let dir = tempfile::tempdir()?;
    let report = bench_report(
        dir.path(),
        &[
            "--idle-graphs",
            "10",
            "--chats",
            "5",
            "--llm-latency-ms",
            "1",
            "--sustain-secs",
            "1",
            "--disk-noise",
        ],
        &[
            "chats",
            "idle_graphs",
            "push_to_plan_ms",
            "plan_to_first_send_ms",
            "total_s",
            "ideal_s",
            "messages_per_s",
            "user_cpu_ms_per_message",
            "sys_cpu_ms_per_message",
            "cpu_ms_per_message",
            "sustained_messages_per_s",
            "burst_messages_per_s",
            "startup_ms",
            "startup_cold_ms",
            "peak_rss_mb",
            "allocator",
        ],
    )?;
    assert_eq!(report["idle_graphs"], 10);
    // The binary tunes glibc's malloc before anything else (the peak RSS depends on it).
    assert_eq!(
        report["allocator"],
        "glibc malloc: 2 arenas, mmap and trim thresholds 128 KiB"
    );
    assert_eq!(report["disk_noise"], true);
    assert!(
        report["disk_noise_mib"].as_f64().is_some_and(|m| m > 0.0),
        "{report}"
    );
    assert!(
        report["startup_cold_ms"].as_f64().is_some_and(|m| m > 0.0),
        "{report}"
    );
    nothing_left(dir.path())
}

/// `--rounds` pushes every chat's message again once all have answered, so the same number
/// of replies can be measured at any chat count: each round is planned and answered (a
/// bench that pushed only one round would report 3 plans here).
#[test]
fn the_bench_runs_each_round_after_the_one_before_is_answered() -> TestResult {
    let dir = tempfile::tempdir()?;
    let report = bench_report(
        dir.path(),
        &[
            "--chats",
            "3",
            "--rounds",
            "4",
            "--llm-latency-ms",
            "1",
            "--sustain-secs",
            "0",
        ],
        &["rounds", "plans", "cpu_ms_per_message"],
    )?;
    assert_eq!(report["rounds"], 4);
    assert_eq!(report["plans"], 12, "{report}");
    nothing_left(dir.path())
}

/// `bench --daemon` boots the daemon's own wiring, feeds it through the control socket,
/// and reports every message answered with the store's syscalls counted (a bench that read
/// no counters would report zeros here).
#[test]
fn the_daemon_bench_answers_every_message_and_counts_the_stores_syscalls() -> TestResult {
    let dir = tempfile::tempdir()?;
    let report = bench_report(
        dir.path(),
        &[
            "--daemon",
            "--chats",
            "5",
            "--messages-per-chat",
            "2",
            "--debounce-ms",
            "20",
        ],
        &[
            "messages",
            "answered",
            "answers",
            "total_s",
            "messages_per_s",
            "user_cpu_ms_per_message",
            "sys_cpu_ms_per_message",
            "cpu_ms_per_message",
            "peak_rss_mb",
            "store_io",
            "store_io_per_message",
            "proc_io_per_message",
        ],
    )?;
    assert_eq!(report["scenario"], "daemon");
    assert_eq!(report["messages"], 10);
    assert_eq!(report["answered"], 10, "{report}");
    assert!(
        report["answers"].as_u64().is_some_and(|n| n >= 5),
        "{report}"
    );
    let store = &report["store_io_per_message"];
    for name in [
        "fsync",
        "fdatasync",
        "rename",
        "open",
        "open_absent",
        "mkdir",
        "temp_file",
    ] {
        assert!(store[name].as_f64().is_some(), "{name} missing: {report}");
    }
    let syncs = report["store_io"]["fsync"].as_u64().unwrap_or(0)
        + report["store_io"]["fdatasync"].as_u64().unwrap_or(0);
    assert!(syncs > 0, "no sync counted: {report}");
    assert!(
        report["store_io"]["rename"].as_u64().is_some_and(|n| n > 0),
        "{report}"
    );
    assert!(
        report["proc_io_per_message"]["syscw"]
            .as_f64()
            .is_some_and(|n| n > 0.0),
        "{report}"
    );
    nothing_left(dir.path())
}
