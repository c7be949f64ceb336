//! Shards and session leases. The lease file on a real temp directory with the virtual clock
//! (taken, refused, taken over after expiry, one winner of a race, a damaged file), and the
//! local proof with real daemon processes on one simulated Telegram (this test runs it):
//! two shards over one agents directory and one state directory answer every agent exactly
//! once; a third process naming held agents refuses them by their lease and runs the rest; a
//! shard killed with SIGKILL leaves its lease, and a replacement refuses the agent until the
//! lease has expired, then takes it over.

mod common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::daemon::{Reaper, Scratch, base, persona, poll, signal, stdout, wait_exit};
use jiff::Timestamp;
use personad::adapters::lease::{FileLeases, Leases, Renewed, Taken};
use personad::adapters::mtproto::sim::{Peer, Sim, SimServer};
use personad::adapters::store::StateDir;
use personad::core::lease::{LeaseRecord, Owner};
use personad::core::shard::shard_of;
use personad::ports::clock::{Clock, SystemClock, VirtualClock};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const TTL: Duration = Duration::from_secs(60);

fn owner(id: &str, pid: u32) -> Owner {
    Owner {
        id: id.into(),
        host: format!("host-{id}"),
        pid,
    }
}

fn t0() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn read_lease(state: &Path, agent: &str) -> Option<LeaseRecord> {
    let bytes = std::fs::read(StateDir::new(state).lease_path(agent)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[test]
fn a_lease_is_refused_until_it_expires_then_taken_over() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = StateDir::new(dir.path());
    let clock = VirtualClock::new(t0(), false);
    let a = FileLeases::new(state.clone(), owner("a", 10), TTL);
    let b = FileLeases::new(state.clone(), owner("b", 20), TTL);
    let Taken::Ours(first) = a.take("tess", clock.now())? else {
        panic!("a free lease was not taken");
    };
    assert_eq!((first.host.as_str(), first.pid), ("host-a", 10));
    // Before expiry: refused, naming the holder.
    clock.advance(Duration::from_secs(59));
    assert_eq!(b.take("tess", clock.now())?, Taken::Refused(first.clone()));
    // a (killed) never renews; at expiry b takes it over.
    clock.advance(Duration::from_secs(1));
    let Taken::Ours(second) = b.take("tess", clock.now())? else {
        panic!("an expired lease was not taken over");
    };
    assert_eq!(second.owner, "b");
    assert_eq!(read_lease(dir.path(), "tess"), Some(second.clone()));
    // a, come back, finds it lost at its renewal and cannot release b's.
    assert_eq!(
        a.renew("tess", first.acquired, clock.now())?,
        Renewed::Lost(second.clone())
    );
    a.release("tess")?;
    assert_eq!(read_lease(dir.path(), "tess"), Some(second.clone()));
    // b renews (a later expiry) and releases on a clean stop.
    clock.advance(Duration::from_secs(20));
    let Renewed::Ours(third) = b.renew("tess", second.acquired, clock.now())? else {
        panic!("b's renewal failed");
    };
    assert!(third.expires > second.expires && third.acquired == second.acquired);
    b.release("tess")?;
    assert_eq!(read_lease(dir.path(), "tess"), None);
    // No temp file is left beside the lease.
    let left: Vec<String> = std::fs::read_dir(state.agent_dir("tess"))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    Ok(())
}

#[test]
fn a_lease_of_a_gone_process_of_this_host_is_taken_at_once() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = StateDir::new(dir.path());
    let here = personad::adapters::lease::this_process();
    // A process of this host that has ended: its pid no longer runs.
    let mut child = Command::new("true").spawn()?;
    let gone = child.id();
    child.wait()?;
    let crashed = Owner {
        id: "crashed".into(),
        host: here.host.clone(),
        pid: gone,
    };
    FileLeases::new(state.clone(), crashed, TTL).take("tess", t0())?;
    let ours = FileLeases::new(state.clone(), here.clone(), TTL);
    assert!(matches!(ours.take("tess", t0())?, Taken::Ours(r) if r.owner == here.id));
    // A live process of this host (a `cat` waiting on its input) holds its lease.
    let mut cat = Command::new("cat").stdin(Stdio::piped()).spawn()?;
    let live = Owner {
        id: "live".into(),
        host: here.host.clone(),
        pid: cat.id(),
    };
    FileLeases::new(state.clone(), live, TTL).take("ivy", t0())?;
    let refused = ours.take("ivy", t0());
    drop(cat.stdin.take());
    cat.wait()?;
    assert!(matches!(refused?, Taken::Refused(r) if r.owner == "live"));
    Ok(())
}

#[test]
fn of_processes_racing_for_a_lease_exactly_one_wins() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = StateDir::new(dir.path());
    // An expired lease of a dead owner, so the racers take over as well as create.
    let dead = FileLeases::new(state.clone(), owner("dead", 1), TTL);
    dead.take("tess", t0())?;
    let now = jiff::Timestamp::from_second(1_700_000_000 + 61)?;
    let winners: Vec<bool> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let leases = FileLeases::new(state.clone(), owner(&format!("r{i}"), i), TTL);
                s.spawn(move || matches!(leases.take("tess", now), Ok(Taken::Ours(_))))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(false))
            .collect()
    });
    assert_eq!(winners.iter().filter(|w| **w).count(), 1, "{winners:?}");
    let holder = read_lease(dir.path(), "tess").map(|r| r.owner);
    assert!(holder.is_some_and(|o| o.starts_with('r')));
    Ok(())
}

#[test]
fn a_damaged_lease_file_counts_as_held_until_its_time_runs_out() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = StateDir::new(dir.path());
    std::fs::create_dir_all(state.agent_dir("tess"))?;
    std::fs::write(state.lease_path("tess"), "{half a lease")?;
    let now = Timestamp::now();
    let b = FileLeases::new(state.clone(), owner("b", 20), TTL);
    assert!(matches!(b.take("tess", now)?, Taken::Refused(r) if r.pid == 0));
    let later = personad::core::time::add(now, TTL + Duration::from_secs(5));
    assert!(matches!(b.take("tess", later)?, Taken::Ours(_)));
    Ok(())
}

// ---- real daemons on one simulated Telegram -------------------------------------------

/// A simulator on its own runtime (its worker threads serve the daemons while the test
/// blocks).
struct World {
    _rt: tokio::runtime::Runtime,
    server: SimServer,
}

impl World {
    fn new() -> Result<World, Box<dyn std::error::Error>> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let server = rt.block_on(SimServer::start(
            Arc::new(SystemClock),
            "127.0.0.1:0".parse()?,
        ))?;
        Ok(World { _rt: rt, server })
    }
    fn sim(&self) -> &Sim {
        &self.server.sim
    }
}

/// `personad run --telegram sim` over the scratch's agents and state, with its own log.
fn start(s: &Scratch, w: &World, log: &str, extra: &[&str]) -> Result<Child, std::io::Error> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_personad"));
    base(&mut cmd);
    cmd.env_remove("PERSONAD_SHARD");
    cmd.arg("--agents")
        .arg(s.agents())
        .arg("--prompts")
        .arg(s.agents())
        .arg("--state")
        .arg(s.state())
        .args(["--log-format", "json", "run", "--telegram", "sim"])
        .args([
            "--sim-addr",
            &w.server.addr.to_string(),
            "--planner",
            "echo",
        ])
        .args(["--debounce-ms", "20", "--typing-speed", "100000"])
        .args(["--start-typing-delay", "0", "--no-watch"])
        .args(extra);
    let log = std::fs::File::create(s.path().join(log))?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
}

/// `personad ctl [WHICH] ARGS` for one of the processes.
fn ctl(s: &Scratch, which: &[&str], args: &[&str]) -> Result<Output, std::io::Error> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_personad"));
    base(&mut cmd);
    cmd.env_remove("PERSONAD_SHARD");
    cmd.arg("--state")
        .arg(s.state())
        .arg("ctl")
        .args(which)
        .args(args)
        .output()
}

fn log_text(s: &Scratch, log: &str) -> String {
    std::fs::read_to_string(s.path().join(log)).unwrap_or_default()
}

/// Waits until the process `which` names answers `ctl status`; returns its answer.
fn wait_up(s: &Scratch, which: &[&str], log: &str) -> Result<String, String> {
    poll(Duration::from_secs(30), || {
        ctl(s, which, &["status"])
            .ok()
            .filter(|o| o.status.success())
            .map(|o| stdout(&o))
    })
    .ok_or_else(|| format!("{which:?} did not come up; log:\n{}", log_text(s, log)))
}

/// What `account` wrote to `peer`.
fn written(sim: &Sim, account: i64, peer: Peer) -> Vec<String> {
    sim.transcript(account, peer)
        .into_iter()
        .filter(|m| m.out)
        .map(|m| m.text)
        .collect()
}

/// Whether the account's update stream has started (what is posted next is live).
fn streaming(sim: &Sim, account: i64) -> bool {
    sim.requests(account)
        .iter()
        .skip_while(|r| **r != "messages.getDialogs")
        .any(|r| *r == "updates.getState" || *r == "updates.getDifference")
}

/// Six persona names, three in each of two shards.
fn six_names() -> Vec<String> {
    let (mut zero, mut one) = (Vec::new(), Vec::new());
    for i in 0.. {
        let name = format!("P{i}");
        match shard_of(&name, 2) {
            0 if zero.len() < 3 => zero.push(name),
            1 if one.len() < 3 => one.push(name),
            _ => {}
        }
        if zero.len() == 3 && one.len() == 3 {
            break;
        }
    }
    zero.into_iter().chain(one).collect()
}

fn scratch(names: &[String]) -> Result<Scratch, std::io::Error> {
    let files: Vec<(String, String)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            (
                format!("{n}.md"),
                persona(n, &format!("+1555010{i:04}"), ""),
            )
        })
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(f, t)| (f.as_str(), t.as_str()))
        .collect();
    Scratch::new(&refs)
}

fn stop(reaper: &mut Reaper) -> Result<(), String> {
    let child = reaper.0.as_mut().ok_or("no child")?;
    signal(child, "-TERM").map_err(|e| e.to_string())?;
    wait_exit(child, Duration::from_secs(15)).ok_or("no exit")?;
    reaper.0 = None;
    Ok(())
}

#[test]
fn two_shards_answer_every_agent_once_and_a_third_refuses_held_agents() -> TestResult {
    let w = World::new()?;
    let names = six_names();
    let s = scratch(&names)?;
    let accounts: Vec<i64> = names.iter().map(|n| w.sim().account(n)).collect();
    let alice = w.sim().person("Alice");
    let mut zero = Reaper(Some(start(&s, &w, "zero.log", &["--shard", "0/2"])?));
    let mut one = Reaper(Some(start(&s, &w, "one.log", &["--shard", "1/2"])?));
    let status0 = wait_up(&s, &["--shard", "0/2"], "zero.log")?;
    let status1 = wait_up(&s, &["--shard", "1/2"], "one.log")?;
    assert!(
        status0.contains(&format!(
            "this process runs shard 0/2: {}",
            names[..3].join(", ")
        )),
        "{status0}"
    );
    assert!(
        status1.contains("this process runs shard 1/2: "),
        "{status1}"
    );
    for (n, a) in names.iter().zip(&accounts) {
        poll(Duration::from_secs(30), || {
            streaming(w.sim(), *a).then_some(())
        })
        .ok_or_else(|| {
            format!(
                "{n} never streamed; logs:\n{}\n{}",
                log_text(&s, "zero.log"),
                log_text(&s, "one.log")
            )
        })?;
    }
    for (n, a) in names.iter().zip(&accounts) {
        w.sim().dm(alice, *a, &format!("hello {n}"))?;
    }
    for (n, a) in names.iter().zip(&accounts) {
        let want = format!("{n} heard: hello {n}");
        poll(Duration::from_secs(30), || {
            written(w.sim(), *a, Peer::User(alice))
                .contains(&want)
                .then_some(())
        })
        .ok_or_else(|| {
            format!(
                "{n} never answered; wrote {:?}",
                written(w.sim(), *a, Peer::User(alice))
            )
        })?;
    }
    for which in [["--shard", "0/2"], ["--shard", "1/2"]] {
        let out = ctl(&s, &which, &["wait-quiet", "--timeout", "30"])?;
        assert!(out.status.success(), "{}", stdout(&out));
    }
    // Exactly once each: no agent ran in both processes.
    for (n, a) in names.iter().zip(&accounts) {
        assert_eq!(written(w.sim(), *a, Peer::User(alice)).len(), 1, "{n}");
    }
    // Each shard's leases name its own process.
    let pid0 = zero.0.as_ref().map(Child::id).unwrap_or_default();
    for n in &names[..3] {
        assert_eq!(read_lease(&s.state(), n).map(|r| r.pid), Some(pid0), "{n}");
    }
    // Shard 1 stops cleanly: its leases are released at once.
    stop(&mut one)?;
    for n in &names[3..] {
        assert_eq!(
            read_lease(&s.state(), n),
            None,
            "{n}'s lease was left behind"
        );
    }
    // A third process names an agent shard 0 holds and one of the stopped shard's: it
    // refuses the held one by its lease and runs the other.
    let (held, free) = (&names[0], &names[3]);
    let list = format!("{held},{free}");
    let mut third = Reaper(Some(start(&s, &w, "third.log", &["--agent", &list])?));
    let which = ["--agent", list.as_str()];
    let status = wait_up(&s, &which, "third.log")?;
    let mut sorted = [held.as_str(), free.as_str()];
    sorted.sort_unstable();
    let runs = format!("this process runs agents {}: {free}\n", sorted.join(","));
    assert!(status.contains(&runs), "{status}");
    let log = log_text(&s, "third.log");
    let line = format!("agent {held}'s session is held by host ");
    assert!(
        log.contains(&line) && log.contains(&format!("pid {pid0} until ")),
        "{log}"
    );
    assert!(log.contains("; not started"), "{log}");
    w.sim().dm(alice, accounts[3], "again")?;
    let want = format!("{free} heard: again");
    poll(Duration::from_secs(30), || {
        written(w.sim(), accounts[3], Peer::User(alice))
            .contains(&want)
            .then_some(())
    })
    .ok_or_else(|| {
        format!(
            "{free} never answered in the third process; log:\n{}",
            log_text(&s, "third.log")
        )
    })?;
    // The held agent still answers in shard 0 only.
    w.sim().dm(alice, accounts[0], "still there")?;
    let want = format!("{held} heard: still there");
    poll(Duration::from_secs(30), || {
        written(w.sim(), accounts[0], Peer::User(alice))
            .contains(&want)
            .then_some(())
    })
    .ok_or("the held agent stopped answering")?;
    for which in [vec!["--shard", "0/2"], which.to_vec()] {
        let out = ctl(&s, &which, &["wait-quiet", "--timeout", "30"])?;
        assert!(out.status.success(), "{}", stdout(&out));
    }
    assert_eq!(written(w.sim(), accounts[0], Peer::User(alice)).len(), 2);
    stop(&mut third)?;
    stop(&mut zero)?;
    Ok(())
}

#[test]
fn a_killed_shard_leaves_its_lease_and_a_replacement_takes_it_over_after_expiry() -> TestResult {
    let w = World::new()?;
    let names = vec!["Tess".to_string(), "Ivy".to_string()];
    let s = scratch(&names)?;
    let tess = w.sim().account("Tess");
    let ivy = w.sim().account("Ivy");
    let alice = w.sim().person("Alice");
    let mut first = Reaper(Some(start(&s, &w, "first.log", &["--agent", "Tess"])?));
    wait_up(&s, &["--agent", "Tess"], "first.log")?;
    let pid = first.0.as_ref().map(Child::id).unwrap_or_default();
    signal(first.0.as_ref().ok_or("no child")?, "-KILL")?;
    wait_exit(first.0.as_mut().ok_or("no child")?, Duration::from_secs(10)).ok_or("no exit")?;
    first.0 = None;
    // The killed process's lease stays, unexpired.
    let mut left = read_lease(&s.state(), "Tess").ok_or("no lease left behind")?;
    assert_eq!(left.pid, pid);
    // On this host its gone pid makes it stale at once; as if it ran on another host sharing
    // the volume, it holds until it expires.
    left.host = "another-host".into();
    std::fs::write(
        StateDir::new(s.state()).lease_path("Tess"),
        serde_json::to_vec(&left)?,
    )?;
    // A replacement for both agents refuses Tess (held until the lease expires), runs Ivy.
    let which = ["--agent", "Tess,Ivy"];
    let mut second = Reaper(Some(start(&s, &w, "second.log", &which)?));
    let status = wait_up(&s, &which, "second.log")?;
    assert!(
        status.contains("this process runs agents Ivy,Tess: Ivy\n"),
        "{status}"
    );
    let log = log_text(&s, "second.log");
    assert!(
        log.contains(&format!(
            "agent Tess's session is held by host {} pid {pid} until {}; not started",
            left.host, left.expires
        )),
        "{log}"
    );
    // Time passes: the dead owner's lease expires (its expiry moved to the past, as the
    // clock would have), and a reload takes it over.
    let mut expired = left.clone();
    expired.expires = personad::ports::clock::SystemClock.now();
    std::fs::write(
        StateDir::new(s.state()).lease_path("Tess"),
        serde_json::to_vec(&expired)?,
    )?;
    let out = ctl(&s, &which, &["reload"])?;
    assert!(out.status.success(), "{}", stdout(&out));
    let taken = poll(Duration::from_secs(30), || {
        read_lease(&s.state(), "Tess").filter(|r| r.pid != pid)
    })
    .ok_or_else(|| {
        format!(
            "the lease was never taken over; log:\n{}",
            log_text(&s, "second.log")
        )
    })?;
    assert_eq!(
        taken.pid,
        second.0.as_ref().map(Child::id).unwrap_or_default()
    );
    poll(Duration::from_secs(30), || {
        streaming(w.sim(), tess).then_some(())
    })
    .ok_or("Tess never streamed")?;
    w.sim().dm(alice, tess, "hi")?;
    w.sim().dm(alice, ivy, "hi")?;
    for (n, a) in [("Tess", tess), ("Ivy", ivy)] {
        let want = format!("{n} heard: hi");
        poll(Duration::from_secs(30), || {
            written(w.sim(), a, Peer::User(alice))
                .contains(&want)
                .then_some(())
        })
        .ok_or_else(|| format!("{n} never answered; log:\n{}", log_text(&s, "second.log")))?;
    }
    stop(&mut second)?;
    assert_eq!(read_lease(&s.state(), "Tess"), None);
    Ok(())
}

/// `personad ARGS` over the scratch's agents and state.
fn personad(s: &Scratch, args: &[&str]) -> Result<Output, std::io::Error> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_personad"));
    base(&mut cmd);
    cmd.env_remove("PERSONAD_SHARD");
    cmd.arg("--agents")
        .arg(s.agents())
        .arg("--prompts")
        .arg(s.agents())
        .arg("--state")
        .arg(s.state())
        .args(args)
        .output()
}

#[test]
fn the_assignment_is_printed_for_planning_and_by_check() -> TestResult {
    let names = six_names();
    let s = scratch(&names)?;
    let out = personad(&s, &["shards", "2"])?;
    assert!(out.status.success());
    let text = stdout(&out);
    for (i, n) in names.iter().enumerate() {
        let shard = if i < 3 { 0 } else { 1 };
        assert!(
            text.lines()
                .any(|l| l.starts_with(n.as_str()) && l.ends_with(&format!("shard {shard}/2"))),
            "{n}: {text}"
        );
    }
    assert!(
        text.contains("6 agent(s) over 2 shard(s)") && text.contains("per shard: 0: 3, 1: 3"),
        "{text}"
    );
    // `check --shard` (and the environment) says which agents the shard runs.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_personad"));
    base(&mut cmd);
    let out = cmd
        .env("PERSONAD_SHARD", "1/2")
        .arg("--agents")
        .arg(s.agents())
        .arg("--prompts")
        .arg(s.agents())
        .arg("check")
        .output()?;
    let text = stdout(&out);
    assert!(
        text.contains(&format!("shard 1/2 runs: {}\n", names[3..].join(", "))),
        "{text}"
    );
    assert!(
        text.contains("(this shard)") && text.contains("assignment for 2 shards:"),
        "{text}"
    );
    // Bad selections are refused before anything starts, naming what is wrong.
    let out = personad(&s, &["run", "--telegram", "memory", "--agent", "P0,Nobody"])?;
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Nobody"));
    let out = personad(&s, &["run", "--telegram", "memory", "--shard", "2/2"])?;
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
