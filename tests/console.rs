//! The web console of `personad run --telegram memory --console-addr 127.0.0.1:0`: access
//! (401 without the token, a form without its CSRF token refused, the token file 0600, no
//! console unless asked for) over plain HTTP, and a real headless Chromium driven through
//! chromedriver's WebDriver API (plain HTTP, so reqwest drives it): log in with the token, see
//! a conversation appear after `ctl say`, pause a persona from the page and see that a new
//! message is not planned, approve a draft, log out and come back to the page asked for after
//! the login, and stay logged in across a restart with the incidents kept; silent connections
//! do not keep the owner out. Screenshots of each page are kept under
//! `target/console-screenshots/`.
//!
//! The browser test needs `chromium` and `chromedriver` (Debian: `chromium`,
//! `chromium-driver`; `.ci/run` installs them and sets `PERSONAD_REQUIRE_BROWSER=1`); without
//! them it says SKIPPED on stderr (visible under plain `cargo test`), and fails when
//! `PERSONAD_REQUIRE_BROWSER` is set.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::browser::*;
use common::console::*;
use common::daemon::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const DEE: &str = "# Agent Name\nDee\n\n# Agent Phone\n+15550100044\n\n# Approval\nall\n\n# Agent Instructions\nYou are Dee.\n";

/// Without the token every page answers 401; the login form sets a cookie that works; a
/// form without the CSRF token, or from another origin, is refused; the token file is 0600.
/// Every answer carries the security headers. A daemon started without `--console-addr`
/// serves no console and writes no token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_needs_its_token_and_refuses_forms_without_the_csrf_token() -> TestResult {
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    // A port alone listens on loopback.
    let mut reaper = Reaper(Some(start(
        &s,
        &["--planner", "echo", "--console-addr", "0"],
        &[],
    )?));
    wait_up(&s)?;
    let addr = console_addr(&s).ok_or("no console_listening line")?;
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    assert!(!s.log_text().contains("console_not_loopback"));
    let mode = std::fs::metadata(s.state().join("console.token"))?
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let token = token(&s);
    assert_eq!(token.len(), 32);
    let base = format!("http://{addr}");
    let http = client();
    for path in [
        "/",
        "/agent/Tess",
        "/agent/Tess/chat/1",
        "/drafts",
        "/usage",
        "/incidents",
    ] {
        let r = http.get(format!("{base}{path}")).send().await?;
        assert_eq!(r.status().as_u16(), 401, "{path}");
        assert_guarded(&r, path);
        let r = http
            .get(format!("{base}{path}"))
            .header(
                "Cookie",
                "personad_console=0123456789abcdef0123456789abcdef",
            )
            .send()
            .await?;
        assert_eq!(r.status().as_u16(), 401, "{path} with a wrong token");
    }
    let r = http
        .post(format!("{base}/action"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("op=pause&agent=Tess")
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 401, "a form without the token");
    assert_guarded(&r, "a form without the token");
    // The login form sets the cookie.
    let r = http
        .post(format!("{base}/login"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("token={token}"))
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 303);
    assert_guarded(&r, "the login's redirect");
    let cookie = r
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .ok_or("no cookie")?
        .to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let cookie = cookie.split(';').next().unwrap_or("").to_string();
    let page = http
        .get(format!("{base}/"))
        .header("Cookie", &cookie)
        .send()
        .await?;
    assert_eq!(page.status().as_u16(), 200);
    assert_guarded(&page, "the overview");
    let html = page.text().await?;
    assert!(
        html.contains("Tess") && !html.contains("+15550100042"),
        "no phone number"
    );
    let csrf = csrf_of(&html).ok_or("no csrf field")?;
    let post = |body: String, origin: Option<&'static str>| {
        let mut req = http
            .post(format!("{base}/action"))
            .header("Cookie", &cookie)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body);
        if let Some(o) = origin {
            req = req.header("Origin", o);
        }
        req.send()
    };
    let r = post("op=pause&agent=Tess&back=%2F".into(), None).await?;
    assert_eq!(r.status().as_u16(), 403, "no csrf token");
    let r = post(format!("op=pause&agent=Tess&back=%2F&csrf={}x", csrf), None).await?;
    assert_eq!(r.status().as_u16(), 403, "a wrong csrf token");
    let r = post(
        format!("op=pause&agent=Tess&back=%2F&csrf={csrf}"),
        Some("http://evil.example"),
    )
    .await?;
    assert_eq!(r.status().as_u16(), 403, "another origin");
    assert_guarded(&r, "a refused form");
    let missing = http
        .get(format!("{base}/no-such-page"))
        .header("Cookie", &cookie)
        .send()
        .await?;
    assert_eq!(missing.status().as_u16(), 404);
    assert_guarded(&missing, "a missing page");
    let out = stdout(&ctl(&s, &["status"])?);
    assert!(out.contains("paused: -"), "nothing was paused: {out}");
    // With the token, as a bearer header, the same form works.
    let r = http
        .post(format!("{base}/action"))
        .bearer_auth(&token)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("op=pause&agent=Tess&back=%2F&csrf={csrf}"))
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 303);
    let out = stdout(&ctl(&s, &["status"])?);
    assert!(!out.contains("paused: -"), "{out}");
    // A group's mode, set from its conversation page's form.
    ctl(&s, &["say", "--group", "Lobby", "--from", "Cy", "hi all"])?;
    let group = -personad::adapters::memory::user_id_for("Lobby");
    let r = http
        .post(format!("{base}/action"))
        .bearer_auth(&token)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!(
            "op=mode&agent=Tess&chat={group}&mode=strict&back=%2F&csrf={csrf}"
        ))
        .send()
        .await?;
    let location = r
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    assert!(
        location.starts_with("/?done=") && location.contains("strict"),
        "{location}"
    );
    stop_daemon(&mut reaper)?;

    // No flag, no console.
    let quiet = Scratch::new(&[("Tess.md", TESS)])?;
    let mut reaper = Reaper(Some(start(&quiet, &["--planner", "echo"], &[])?));
    wait_up(&quiet)?;
    assert!(!quiet.log_text().contains("console_listening"));
    assert!(!quiet.state().join("console.token").exists());
    stop_daemon(&mut reaper)?;
    Ok(())
}

/// A console bound beyond loopback (`--console-addr 0.0.0.0:0`) says so in the log
/// (`console_not_loopback`), and still answers 401 without the token, with its headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_beyond_loopback_is_warned_about() -> TestResult {
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let mut reaper = Reaper(Some(start(
        &s,
        &["--planner", "echo", "--console-addr", "0.0.0.0:0"],
        &[],
    )?));
    wait_up(&s)?;
    let addr = console_addr(&s).ok_or("no console_listening line")?;
    assert!(addr.starts_with("0.0.0.0:"), "{addr}");
    assert!(
        s.log_text().contains("console_not_loopback"),
        "no warning: {}",
        s.log_text()
    );
    let port = addr.rsplit(':').next().unwrap_or("");
    let r = client()
        .get(format!("http://127.0.0.1:{port}/"))
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 401);
    assert_guarded(&r, "beyond loopback");
    stop_daemon(&mut reaper)?;
    Ok(())
}

/// The name of the browser test, as the harness filters it.
const BROWSER_TEST: &str =
    "a_browser_logs_in_follows_a_conversation_pauses_a_persona_and_approves_a_draft";

/// The browser test never passes silently: run by the plain harness (output captured) with
/// no browser on the PATH, it says SKIPPED on stderr; with `PERSONAD_REQUIRE_BROWSER` set it
/// fails.
#[test]
fn without_a_browser_the_browser_test_says_skipped_on_stderr_or_fails_when_required() -> TestResult
{
    let empty = tempfile::tempdir()?;
    let run = |require: bool| -> std::io::Result<std::process::Output> {
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.args([BROWSER_TEST, "--exact", "--test-threads=1"])
            .env("PATH", empty.path())
            .env_remove("PERSONAD_REQUIRE_BROWSER");
        if require {
            cmd.env("PERSONAD_REQUIRE_BROWSER", "1");
        }
        cmd.output()
    };
    let skipped = run(false)?;
    let stderr = String::from_utf8_lossy(&skipped.stderr);
    assert!(skipped.status.success(), "{stderr}");
    assert!(stderr.contains("SKIPPED: the browser test"), "{stderr}");
    assert!(
        String::from_utf8_lossy(&skipped.stdout).contains("1 passed"),
        "the browser test did not run"
    );
    let required = run(true)?;
    assert!(
        !required.status.success(),
        "a required browser that is missing must fail"
    );
    assert!(String::from_utf8_lossy(&required.stdout).contains("PERSONAD_REQUIRE_BROWSER is set"));
    Ok(())
}

/// The owner's walk in a real browser: log in, follow a conversation, pause a persona, approve
/// a draft; log out, ask for a page and come back to it after the login; then restart the
/// daemon: the tab is still logged in and the incidents are still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_logs_in_follows_a_conversation_pauses_a_persona_and_approves_a_draft()
-> TestResult {
    let Some((chromium, driver)) = browser_tools() else {
        return Ok(());
    };
    let s = Scratch::new(&[("Tess.md", TESS), ("Dee.md", DEE)])?;
    let mut reaper = Reaper(Some(start(
        &s,
        &["--planner", "echo", "--console-addr", "127.0.0.1:0"],
        &[],
    )?));
    wait_up(&s)?;
    let base = format!("http://{}", console_addr(&s).ok_or("no console")?);
    let b = Browser::start(&chromium, &driver).await?;

    // Without the token: the login page; with it, the personas.
    b.go(&format!("{base}/")).await?;
    assert!(b.source().await?.contains("Log in first"));
    b.go(&format!("{base}/login")).await?;
    b.shot("login").await?;
    b.type_into("#token", &token(&s)).await?;
    b.click("#login").await?;
    b.shows("data-agent=\"Tess\"").await?;
    let html = b.until(&format!("{base}/"), "data-agent=\"Tess\"").await?;
    assert!(html.contains("data-agent=\"Dee\""));
    b.shot("personas").await?;

    // A conversation appears after `ctl say`.
    let out = stdout(&ctl(
        &s,
        &[
            "say", "--agent", "Tess", "--wait", "20", "--from", "Alice", "hello",
        ],
    )?);
    assert!(out.contains("Tess heard: hello"), "{out}");
    let html = b.until(&format!("{base}/agent/Tess"), "Alice").await?;
    assert!(
        html.contains("Tess: Tess heard: hello") && !html.contains("tag waits"),
        "the last message and whether it waits: {html}"
    );
    b.shot("chats").await?;
    b.click("a.chat").await?;
    let html = b.shows("Tess heard: hello").await?;
    assert!(
        html.contains("Tess heard: hello") && html.contains("Alice"),
        "{html}"
    );
    b.shot("conversation").await?;

    // Pause Tess from the personas page: a new message is not planned.
    b.go(&format!("{base}/")).await?;
    b.click("tr[data-agent=\"Tess\"] button").await?;
    let html = b.shows("paused until resumed").await?;
    assert!(html.contains("id=\"note\""), "the answer is shown: {html}");
    let out = stdout(&ctl(
        &s,
        &[
            "say",
            "--agent",
            "Tess",
            "--wait",
            "20",
            "--from",
            "Alice",
            "still there?",
        ],
    )?);
    assert!(out.contains("Tess is paused in every chat"), "{out}");

    // A draft of Dee's waits on the drafts page; approving it sends it.
    ctl(
        &s,
        &["say", "--agent", "Dee", "--from", "Bob", "coming tonight?"],
    )?;
    b.until(&format!("{base}/drafts"), "class=\"draft\"")
        .await?;
    b.shot("drafts").await?;
    b.click("section.draft form.inline button[value=\"approve\"]")
        .await?;
    let answered = poll(Duration::from_secs(20), || {
        let sent = sent(&s, "Dee", "Bob");
        (!sent.is_empty()).then_some(sent)
    })
    .ok_or("the approved draft was never sent")?;
    assert_eq!(answered, ["Dee heard: coming tonight?"]);
    b.until(&format!("{base}/drafts"), "No draft waits").await?;

    // Logged out, a page asked for comes back after the login.
    b.click("#logout").await?;
    b.shows("Logged out.").await?;
    b.go(&format!("{base}/drafts")).await?;
    b.shows("Log in first").await?;
    b.shot("log-in-first").await?;
    b.type_into("#token", &token(&s)).await?;
    b.click("#login").await?;
    b.shows("No draft waits").await?;
    let url = b.call("GET", &b.at("/url"), None).await?;
    assert_eq!(url.as_str(), Some(format!("{base}/drafts").as_str()));

    b.go(&format!("{base}/usage")).await?;
    b.shot("usage").await?;
    let html = b
        .until(&format!("{base}/incidents"), "Draft approved")
        .await?;
    assert!(html.contains("id=\"decisions\""), "{html}");
    b.shot("incidents").await?;

    // After a restart the tab is still logged in (the token is kept) and the incidents are
    // still there.
    let token_before = token(&s);
    stop_daemon(&mut reaper)?;
    reaper = Reaper(Some(start(
        &s,
        &["--planner", "echo", "--console-addr", "127.0.0.1:0"],
        &[],
    )?));
    wait_up(&s)?;
    assert_eq!(token(&s), token_before, "the token changed at the restart");
    let base = format!("http://{}", nth_console_addr(&s, 1).ok_or("no console")?);
    let html = b
        .until(&format!("{base}/incidents"), "Draft approved")
        .await?;
    assert!(!html.contains("Log in first"), "{html}");
    b.shot("incidents-after-restart").await?;
    let _ = b.call("DELETE", &b.at(""), None).await;
    drop(b);
    stop_daemon(&mut reaper)?;
    Ok(())
}

/// Silent connections (no token needed to open one) must not lock the console: 48 of them
/// (three times its 16 connection slots) do not keep the owner out for as long as the idle
/// timeout (5 s): when every slot is held, the connection idle the longest is closed to make
/// room for the next, and each silent one is closed anyway once its idle time is up. (Closing
/// each only at its idle timeout, the owner waited for three rounds of it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_are_closed_and_do_not_lock_the_console_out() -> TestResult {
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let _reaper = Reaper(Some(start(
        &s,
        &["--planner", "echo", "--console-addr", "0"],
        &[],
    )?));
    wait_up(&s)?;
    let addr = console_addr(&s).ok_or("no console_listening line")?;
    let mut silent = Vec::new();
    for _ in 0..48 {
        silent.push(tokio::net::TcpStream::connect(&addr).await?);
    }
    let started = std::time::Instant::now();
    let answer = tokio::time::timeout(
        Duration::from_secs(20),
        client().get(format!("http://{addr}/login")).send(),
    )
    .await
    .map_err(|_| "the console stayed locked by silent connections")??;
    assert_eq!(answer.status(), 200);
    // Within the idle timeout.
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_secs(5),
        "the owner waited {waited:?}"
    );
    // And the first silent connection was closed by the console.
    use tokio::io::AsyncReadExt as _;
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(10), silent[0].read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0))), "still open: {read:?}");
    // A silent connection that got a slot is closed at its idle time too.
    let last = silent.last_mut().ok_or("no connection")?;
    let read = tokio::time::timeout(Duration::from_secs(10), last.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0))), "still open: {read:?}");
    Ok(())
}

/// A voice note in a conversation plays in the console: the page has a plain `<audio>` player
/// (no script) whose source is the note itself, served as `audio/ogg` to the owner only. The
/// persona speaks when asked (the echo planner answers "send me a voice note" with one, made by
/// espeak-ng).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_plays_in_the_conversation_page() -> TestResult {
    if personad::adapters::speech::espeak::find_program(Path::new("espeak-ng")).is_none() {
        assert!(
            std::env::var_os("PERSONAD_REQUIRE_ESPEAK").is_none(),
            "espeak-ng is missing and PERSONAD_REQUIRE_ESPEAK is set"
        );
        eprintln!("SKIPPED: espeak-ng not installed");
        return Ok(());
    }
    let vox = "# Agent Name\nVox\n\n# Agent Phone\n+15550100045\n\n# Agent Instructions\nYou are Vox.\n\n# Voice\nspeak: when asked\n";
    let s = Scratch::new(&[("Vox.md", vox)])?;
    let mut reaper = Reaper(Some(start(
        &s,
        &["--planner", "echo", "--console-addr", "0"],
        &[],
    )?));
    let s2 = &s;
    let (addr, said) = tokio::task::block_in_place(|| -> Result<_, String> {
        wait_up(s2).map_err(|e| e.to_string())?;
        let addr = console_addr(s2).ok_or("no console_listening line")?;
        let out = ctl(
            s2,
            &[
                "say",
                "--wait",
                "20",
                "--from",
                "Alice",
                "send me a voice note",
            ],
        )
        .map_err(|e| e.to_string())?;
        Ok((addr, String::from_utf8_lossy(&out.stdout).into_owned()))
    })?;
    let chat = said
        .split("to chat ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .ok_or_else(|| format!("no chat in {said:?}"))?
        .to_string();
    let base = format!("http://{addr}");
    let cookie = format!("personad_console={}", token(&s));
    let http = client();
    let page = http
        .get(format!("{base}/agent/Vox/chat/{chat}"))
        .header("Cookie", &cookie)
        .send()
        .await?
        .text()
        .await?;
    let at = page
        .find("<audio controls preload=\"none\" src=\"")
        .ok_or_else(|| format!("no player in the page:\n{page}\n{said}"))?;
    let src = page[at..]
        .split("src=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .ok_or("no src")?;
    assert!(!page.contains("<script"), "{page}");
    let r = http.get(format!("{base}{src}")).send().await?;
    assert_eq!(r.status().as_u16(), 401, "the note without the token");
    let r = http
        .get(format!("{base}{src}"))
        .header("Cookie", &cookie)
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 200);
    assert_guarded(&r, src);
    assert_eq!(
        r.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("audio/ogg")
    );
    let bytes = r.bytes().await?;
    let decoded = personad::adapters::voice::decode_ogg_opus(&bytes)?;
    assert_eq!(decoded.channels, 1);
    stop_daemon(&mut reaper)?;
    Ok(())
}
