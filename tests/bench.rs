//! `personad bench` runs every scenario to completion at small sizes (idle graphs loaded at
//! startup, the burst, the sustained steps, the fresh-process cold start, disk noise) and its
//! JSON keeps the earlier names beside the new ones. Figures are not judged here: speed
//! targets live in docs/performance.md, measured by hand.

mod common;

use common::TestResult;

#[test]
fn the_bench_runs_every_scenario_to_completion_and_names_its_figures() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_personad"));
    common::clear_env(&mut cmd);
    let out = cmd
        .arg("--state")
        .arg(dir.path())
        .args(["bench", "--idle-graphs", "10", "--chats", "5", "--json"])
        .args([
            "--llm-latency-ms",
            "1",
            "--sustain-secs",
            "1",
            "--disk-noise",
        ])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(text.trim())?;
    for name in [
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
    ] {
        assert!(report.get(name).is_some(), "{name} missing: {report}");
    }
    assert_eq!(report["idle_graphs"], 10);
    assert_eq!(report["disk_noise"], true);
    assert!(
        report["disk_noise_mib"].as_f64().is_some_and(|m| m > 0.0),
        "{report}"
    );
    assert!(
        report["startup_cold_ms"].as_f64().is_some_and(|m| m > 0.0),
        "{report}"
    );
    // The temp state is gone; nothing else was left in --state.
    let left: Vec<_> = std::fs::read_dir(dir.path())?.flatten().collect();
    assert!(left.is_empty(), "{left:?}");
    Ok(())
}
