//! The web console's sessions and what it keeps across restarts, over plain HTTP against
//! `personad run --telegram memory --console-addr 127.0.0.1:0`: the token file is kept at a
//! restart (a logged-in tab and a form it shows still work) and `ctl console-token --rotate`
//! retires it at once, never printing or logging the token; the login returns to the page
//! first asked for (local paths only) and the logout clears the cookie; `done=` banners come
//! from a fixed set; the incidents are still there after a restart, problems apart from the
//! owner's decisions; and a busy port (the console's or the metrics endpoint's) fails the start
//! before the token file is written or an agent starts.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::console::*;
use common::daemon::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const DEE: &str = "# Agent Name\nDee\n\n# Agent Phone\n+15550100044\n\n# Approval\nall\n\n# Agent Instructions\nYou are Dee.\n";

const ARGS: [&str; 4] = ["--planner", "echo", "--console-addr", "127.0.0.1:0"];

fn location(r: &reqwest::Response) -> String {
    r.headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// `GET base+path` with the cookie of `token`.
async fn get(
    base: &str,
    path: &str,
    token: &str,
) -> Result<reqwest::Response, Box<dyn std::error::Error>> {
    Ok(client()
        .get(format!("{base}{path}"))
        .header("Cookie", format!("personad_console={token}"))
        .send()
        .await?)
}

/// `POST base+path` of a form, with the cookie of `token`.
async fn post(
    base: &str,
    path: &str,
    token: &str,
    form: String,
) -> Result<reqwest::Response, Box<dyn std::error::Error>> {
    Ok(client()
        .post(format!("{base}{path}"))
        .header("Cookie", format!("personad_console={token}"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await?)
}

/// The token is kept at a restart: the cookie still works, and so does a form rendered before
/// it (its CSRF value lasts as the token does). `ctl console-token` says where the file is and
/// `--rotate` replaces it: the old token stops working at the next request. Neither the output
/// nor the log ever holds a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_survives_a_restart_and_a_rotation_retires_it() -> TestResult {
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let mut reaper = Reaper(Some(start(&s, &ARGS, &[])?));
    wait_up(&s)?;
    let base = format!("http://{}", console_addr(&s).ok_or("no console")?);
    let first = token(&s);
    let page = get(&base, "/", &first).await?;
    assert_eq!(page.status().as_u16(), 200);
    let csrf = csrf_of(&page.text().await?).ok_or("no csrf field")?;
    let said = stdout(&ctl(&s, &["console-token"])?);
    assert!(
        said.contains("console.token") && !said.contains(&first),
        "{said}"
    );
    stop_daemon(&mut reaper)?;

    reaper = Reaper(Some(start(&s, &ARGS, &[])?));
    wait_up(&s)?;
    let base = format!("http://{}", nth_console_addr(&s, 1).ok_or("no console")?);
    assert_eq!(token(&s), first, "a new token at the restart");
    assert!(
        s.log_text().contains("\"token\":\"kept\""),
        "{}",
        s.log_text()
    );
    let mode = std::fs::metadata(s.state().join("console.token"))?
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(get(&base, "/", &first).await?.status().as_u16(), 200);
    // A click in a tab opened before the restart still counts.
    let r = post(
        &base,
        "/action",
        &first,
        format!("op=pause&agent=Tess&back=%2F&csrf={csrf}"),
    )
    .await?;
    assert_eq!(r.status().as_u16(), 303, "{}", r.text().await?);

    let rotated = ctl(&s, &["console-token", "--rotate"])?;
    assert!(rotated.status.success());
    let second = token(&s);
    assert!(second.len() == 32 && second != first);
    assert!(!stdout(&rotated).contains(&second), "{}", stdout(&rotated));
    assert_eq!(get(&base, "/", &first).await?.status().as_u16(), 401);
    assert_eq!(get(&base, "/", &second).await?.status().as_u16(), 200);
    let r = post(
        &base,
        "/action",
        &second,
        format!("op=resume&agent=Tess&back=%2F&csrf={csrf}"),
    )
    .await?;
    assert_eq!(r.status().as_u16(), 403, "the old token's form");
    stop_daemon(&mut reaper)?;
    let log = s.log_text();
    assert!(
        !log.contains(&first) && !log.contains(&second),
        "a token in the log"
    );
    Ok(())
}

/// A page asked for without the token answers with the login form, which returns there (a
/// local path only: anything else goes to `/`); the logout clears the cookie. `done=` shows
/// one of a fixed set of banners, never text from the address; a refused action says why on
/// its own page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_login_returns_to_the_asked_page_and_the_logout_clears_the_cookie() -> TestResult {
    let s = Scratch::new(&[("Tess.md", TESS)])?;
    let mut reaper = Reaper(Some(start(&s, &ARGS, &[])?));
    wait_up(&s)?;
    let base = format!("http://{}", console_addr(&s).ok_or("no console")?);
    let token = token(&s);
    let http = client();
    let r = http.get(format!("{base}/agent/Tess?q=ann")).send().await?;
    assert_eq!(r.status().as_u16(), 401);
    assert_guarded(&r, "log in first");
    let html = r.text().await?;
    assert!(
        html.contains("name=\"next\" value=\"/agent/Tess?q=ann\""),
        "{html}"
    );
    let login = |next: &str| {
        http.post(format!("{base}/login"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("token={token}&next={}", urlencode(next)))
            .send()
    };
    let r = login("/agent/Tess?q=ann").await?;
    assert_eq!(r.status().as_u16(), 303);
    assert_eq!(location(&r), "/agent/Tess?q=ann");
    for unsafe_next in ["//evil.example", "https://evil.example/", "/a\r\nX: y", "x"] {
        let r = login(unsafe_next).await?;
        assert_eq!(location(&r), "/", "{unsafe_next:?}");
    }
    let r = http
        .post(format!("{base}/login"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("token=0123456789abcdef0123456789abcdef&next=%2Fdrafts")
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 401);

    // Banners from a fixed set only.
    let page = get(&base, "/?done=paused", &token).await?.text().await?;
    assert!(page.contains("id=\"note\">Paused.<"), "{page}");
    let page = get(&base, "/?done=Call+this+number", &token)
        .await?
        .text()
        .await?;
    assert!(!page.contains("Call this number") && !page.contains("id=\"note\""));
    assert!(page.contains("id=\"logout\""), "a logout button");
    // A refused action: its reason on its own page.
    let csrf = csrf_of(&page).ok_or("no csrf")?;
    let r = post(
        &base,
        "/action",
        &token,
        format!("op=forget&agent=Tess&chat=nobody-here&back=%2F&csrf={csrf}"),
    )
    .await?;
    assert_eq!(r.status().as_u16(), 409);
    assert!(r.text().await?.contains("Not done"));

    // The logout clears the cookie; from another site it is refused.
    let r = http
        .post(format!("{base}/logout"))
        .header("Origin", "http://evil.example")
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 403);
    let r = http.post(format!("{base}/logout")).send().await?;
    assert_eq!(r.status().as_u16(), 303);
    assert_guarded(&r, "the logout");
    assert_eq!(location(&r), "/login?done=logged-out");
    let cookie = r
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    assert!(
        cookie.starts_with("personad_console=;") && cookie.contains("Max-Age=0"),
        "{cookie}"
    );
    let page = http
        .get(format!("{base}/login?done=logged-out"))
        .send()
        .await?
        .text()
        .await?;
    assert!(page.contains("Logged out.") && !page.contains("id=\"logout\""));
    stop_daemon(&mut reaper)?;
    Ok(())
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A draft approved from the console is an owner decision on the incidents page, kept in
/// `<state>/incidents.jsonl` (0600) and still shown after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incidents_survive_a_restart() -> TestResult {
    let s = Scratch::new(&[("Dee.md", DEE)])?;
    let mut reaper = Reaper(Some(start(&s, &ARGS, &[])?));
    wait_up(&s)?;
    let base = format!("http://{}", console_addr(&s).ok_or("no console")?);
    let token = token(&s);
    ctl(
        &s,
        &["say", "--agent", "Dee", "--from", "Bob", "coming tonight?"],
    )?;
    let mut drafts = String::new();
    for _ in 0..100 {
        drafts = get(&base, "/drafts", &token).await?.text().await?;
        if drafts.contains("class=\"draft\"") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let csrf = csrf_of(&drafts).ok_or("no csrf")?;
    let at = drafts.find("name=\"id\" value=\"").ok_or("no draft")? + 17;
    let id = drafts[at..].split('"').next().ok_or("no id")?.to_string();
    let r = post(
        &base,
        "/action",
        &token,
        format!("op=approve&agent=Dee&id={id}&back=%2Fdrafts&csrf={csrf}"),
    )
    .await?;
    assert_eq!(location(&r), "/drafts?done=approved");
    let shown = |html: &str| {
        html.split_once("id=\"decisions\"")
            .is_some_and(|(_, decisions)| decisions.contains("Draft approved"))
            && html.contains(">Bob</a>")
    };
    let mut html = String::new();
    for _ in 0..100 {
        html = get(&base, "/incidents", &token).await?.text().await?;
        if shown(&html) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(shown(&html), "{html}");
    stop_daemon(&mut reaper)?;
    let file = s.state().join("incidents.jsonl");
    assert_eq!(
        std::fs::metadata(&file)?.permissions().mode() & 0o777,
        0o600
    );
    assert!(std::fs::read_to_string(&file)?.contains("draft_approved"));

    reaper = Reaper(Some(start(&s, &ARGS, &[])?));
    wait_up(&s)?;
    let base = format!("http://{}", nth_console_addr(&s, 1).ok_or("no console")?);
    let html = get(&base, "/incidents", &token).await?.text().await?;
    assert!(shown(&html), "lost at the restart: {html}");
    stop_daemon(&mut reaper)?;
    Ok(())
}

/// A port already taken, the console's or the metrics endpoint's, fails the start at once:
/// the daemon exits non-zero naming the port, before it writes the token file or starts an
/// agent.
#[test]
fn a_busy_port_fails_the_start_before_the_token_is_written() -> TestResult {
    let taken = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = taken.local_addr()?.to_string();
    for flags in [
        [
            "--console-addr",
            addr.as_str(),
            "--metrics-addr",
            "127.0.0.1:0",
        ],
        [
            "--console-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            addr.as_str(),
        ],
    ] {
        let s = Scratch::new(&[("Tess.md", TESS)])?;
        let mut args = vec!["--planner", "echo"];
        args.extend(flags);
        let mut reaper = Reaper(Some(start(&s, &args, &[])?));
        let child = reaper.0.as_mut().ok_or("no child")?;
        let status = wait_exit(child, Duration::from_secs(20)).ok_or("the daemon did not exit")?;
        reaper.0 = None;
        assert!(!status.success(), "{flags:?}");
        let log = s.log_text();
        assert!(log.contains(&format!("cannot listen on {addr}")), "{log}");
        assert!(!s.state().join("console.token").exists(), "token written");
        assert!(!log.contains("agent_connected"), "an agent started: {log}");
    }
    drop(taken);
    Ok(())
}
