//! The console's pages of what each persona knows, plans and spends, against `personad run
//! --telegram memory --planner gemini --console-addr 127.0.0.1:0` and a mock Gemini (450
//! tokens a request): Tess has a daily cap of 300 tokens (reached at her first request), 200
//! chats and some facts in her state from before the start; Dee asks the owner before each
//! answer; Sam keeps a daily schedule; one persona file is broken and one disabled.
//!
//! Over plain HTTP: the personas page shows the cap reached with the spend, a Lift button,
//! the files that do not run (file:line), the local time and the self-refresh (which
//! `?refresh=off` stops); a persona's chats are all listed, newest first, with search,
//! filters and pages; its schedule today and tomorrow; its memory; a conversation shows the
//! plan as steps in words (no JSON, no keys) and the draft with its expiry and its text in an
//! edit form; usage draws the cap as a line. Then in a headless Chromium (when installed): the
//! Lift button lifts the cap, a search and a page, a fact forgotten (gone from the state too),
//! a draft edited from its prefilled form and sent, and, at 390 px wide, no page scrolls
//! sideways. Without a browser the same actions are posted over HTTP. After a restart the
//! chats are all still listed. `PERSONAD_DOCS_SHOTS=1` saves the screenshots under
//! `docs/console/`.

mod common;

use std::time::Duration;

use common::browser::*;
use common::console::*;
use common::daemon::*;
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const ARGS: [&str; 4] = ["--planner", "gemini", "--console-addr", "127.0.0.1:0"];

async fn model() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": "# «send»\nHi!"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 400, "candidatesTokenCount": 50, "totalTokenCount": 450}
        })))
        .mount(&server)
        .await;
    server
}

/// Tess's 200 chats from before the start (`<state>/Tess/chats.json`): chat 1000+n is
/// "Person n", its last message n minutes after a fixed hour, theirs when n is even.
fn seed_chats(s: &Scratch) -> std::io::Result<()> {
    let mut chats = serde_json::Map::new();
    for n in 1..=200 {
        let at = jiff::Timestamp::from_second(1_795_000_000 + n * 60).unwrap_or_default();
        chats.insert(
            (1000 + n).to_string(),
            json!({"title": format!("Person {n:03}"), "last": {
                "at": at.to_string(), "ours": n % 2 == 1,
                "who": if n % 2 == 1 { "Tess".to_string() } else { format!("Person {n:03}") },
                "text": format!("message {n}")}}),
        );
    }
    let dir = s.state().join("Tess");
    std::fs::create_dir_all(dir.join("memory/people"))?;
    std::fs::write(
        dir.join("chats.json"),
        json!({"format": 1, "chats": chats}).to_string(),
    )?;
    std::fs::write(
        dir.join("memory/people/1123.md"),
        "# Person 123\n\n## fact-tea1\n_2026-11-20T10:00:00Z · chat 1123 · message 5_\n\nLikes green tea.\n\n## fact-cats\n_2026-11-21T10:00:00Z · chat 1123 · message 9_\n\nHas two cats.\n\n",
    )
}

/// `GET base+path` with the cookie of `token`: its status and text.
async fn get(
    base: &str,
    path: &str,
    token: &str,
) -> Result<(u16, String), Box<dyn std::error::Error>> {
    let r = client()
        .get(format!("{base}{path}"))
        .header("Cookie", format!("personad_console={token}"))
        .send()
        .await?;
    Ok((r.status().as_u16(), r.text().await?))
}

/// `GET` until the page holds `needle` (bounded).
async fn until(
    base: &str,
    path: &str,
    token: &str,
    needle: &str,
) -> Result<String, Box<dyn std::error::Error>> {
    let mut html = String::new();
    for _ in 0..100 {
        html = get(base, path, token).await?.1;
        if html.contains(needle) {
            return Ok(html);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(format!("{path} never showed {needle:?}:\n{html}").into())
}

/// Posts an action form, as the page's button would; the redirect's target.
async fn act(base: &str, token: &str, form: &str) -> Result<String, Box<dyn std::error::Error>> {
    let (_, html) = get(base, "/", token).await?;
    let csrf = csrf_of(&html).ok_or("no csrf")?;
    let r = client()
        .post(format!("{base}/action"))
        .header("Cookie", format!("personad_console={token}"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("{form}&csrf={csrf}"))
        .send()
        .await?;
    assert_eq!(r.status().as_u16(), 303, "{form}: {}", r.text().await?);
    Ok(r.headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string())
}

/// The text between `from` and the next `to` in `html`.
fn between<'a>(html: &'a str, from: &str, to: &str) -> Option<&'a str> {
    let at = html.find(from)? + from.len();
    html[at..].split(to).next()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_show_what_each_persona_knows_plans_and_spends() -> TestResult {
    let server = model().await;
    let tess = persona(
        "Tess",
        "+15550100042",
        "# Agent Timezone\nAsia/Tokyo\n\n# Daily Budget\n300 tokens\n\n",
    );
    let dee = persona("Dee", "+15550100044", "# Approval\nall\n\n");
    let sam = persona(
        "Sam",
        "+15550100046",
        "# Agent Timezone\nEurope/Berlin\n\n# Daily Schedule\nUp early, asleep by eleven.\n\n",
    );
    let off = persona("Off", "+15550100047", "# Disabled\nyes\n\n");
    let bad = "# Agent Name\nBad\n\n# Agent Phone\n+15550100048\n\n# Daily Budget\nlots\n\n# Agent Instructions\nYou are Bad.\n";
    let s = Scratch::new(&[
        ("Tess.md", &tess),
        ("Dee.md", &dee),
        ("Sam.md", &sam),
        ("Off.md", &off),
        ("Bad.md", bad),
    ])?;
    seed_chats(&s)?;
    let uri = server.uri();
    let env = [("GEMINI_API_KEY", "k"), ("GEMINI_BASE_URL", uri.as_str())];
    let mut reaper = Reaper(Some(start(&s, &ARGS, &env)?));
    wait_up(&s)?;
    let base = format!("http://{}", console_addr(&s).ok_or("no console")?);
    let token = token(&s);
    ctl(
        &s,
        &[
            "say", "--agent", "Tess", "--wait", "20", "--from", "Alice", "one",
        ],
    )?;
    ctl(
        &s,
        &["say", "--agent", "Dee", "--from", "Bob", "coming tonight?"],
    )?;

    let (drafts, link) = check_pages(&base, &token).await?;

    // The owner's actions: in a browser when there is one, else posted as its forms would.
    let fact = s.state().join("Tess/memory/people/1123.md");
    match browser_tools() {
        Some((chromium, driver)) => walk(&chromium, &driver, &base, &token, &link).await?,
        None => {
            act(&base, &token, "op=lift&agent=Tess&back=%2F").await?;
            act(
                &base,
                &token,
                "op=forget-fact&agent=Tess&id=fact-tea1&back=%2F",
            )
            .await?;
            let id = between(&drafts, "name=\"id\" value=\"", "\"").ok_or("no draft id")?;
            act(
                &base,
                &token,
                &format!("op=approve&agent=Dee&id={id}&text=See+you+at+eight&back=%2Fdrafts"),
            )
            .await?;
        }
    }
    let (_, home) = get(&base, "/", &token).await?;
    assert!(
        !home.contains("id=\"at-cap\"") && home.contains("lifted by the owner"),
        "{home}"
    );
    let kept = std::fs::read_to_string(&fact)?;
    assert!(
        !kept.contains("green tea") && kept.contains("two cats"),
        "{kept}"
    );
    let answered = poll(Duration::from_secs(20), || {
        let sent = sent(&s, "Dee", "Bob");
        (!sent.is_empty()).then_some(sent)
    })
    .ok_or("the edited draft was never sent")?;
    assert_eq!(answered, ["See you at eight"]);

    // After a restart every chat is still listed.
    stop_daemon(&mut reaper)?;
    reaper = Reaper(Some(start(&s, &ARGS, &env)?));
    wait_up(&s)?;
    let base = format!("http://{}", nth_console_addr(&s, 1).ok_or("no console")?);
    let (_, chats) = get(&base, "/agent/Tess", &token).await?;
    assert!(
        chats.contains("201 chat(s)") && chats.contains(">Alice<"),
        "{chats}"
    );
    stop_daemon(&mut reaper)?;
    Ok(())
}

/// The pages over plain HTTP, before the owner acts; the drafts page and the conversation of
/// Dee's draft.
async fn check_pages(
    base: &str,
    token: &str,
) -> Result<(String, String), Box<dyn std::error::Error>> {
    let (base, token) = (base.to_string(), token.to_string());
    // The personas page: the cap reached, the spend against it, a Lift button; the files
    // that do not run; the local time; the self-refresh.
    let home = until(&base, "/", &token, "id=\"at-cap\"").await?;
    let row = between(&home, "data-agent=\"Tess\"", "</tr>").ok_or("no Tess")?;
    assert!(
        row.contains("300 tokens a day")
            && row.contains("value=\"lift\"")
            && row.contains("Asia/Tokyo"),
        "{row}"
    );
    assert!(
        row.contains("450 tokens"),
        "the spend against the cap: {row}"
    );
    let files = between(&home, "id=\"not-running\"", "</ul></li></ul>").unwrap_or(&home);
    assert!(
        files.contains("Off.md") && files.contains("disabled"),
        "{home}"
    );
    assert!(
        home.contains("Bad.md:8:"),
        "the broken file with its line: {home}"
    );
    assert!(home.contains("http-equiv=\"refresh\"") && home.contains("refresh=off"));
    let (_, quiet) = get(&base, "/?refresh=off", &token).await?;
    assert!(!quiet.contains("http-equiv") && quiet.contains("id=\"refresh-on\""));

    // Tess's chats: every one she has known, newest first, 50 a page, searched and filtered.
    let (_, chats) = get(&base, "/agent/Tess", &token).await?;
    assert!(chats.contains("201 chat(s), page 1 of 5"), "{chats}");
    assert!(chats.contains("Tess's local time") && chats.contains("(Asia/Tokyo)"));
    let first = between(&chats, "<tbody>", "</tr>").unwrap_or("");
    assert!(first.contains(">Alice<"), "the newest first: {first}");
    assert_eq!(chats.matches("<tr data-chat=").count(), 50);
    let (_, found) = get(&base, "/agent/Tess?q=Person+123", &token).await?;
    assert!(
        found.contains("1 chat(s)") && found.contains(">Person 123<"),
        "{found}"
    );
    let (_, last) = get(&base, "/agent/Tess?page=5", &token).await?;
    assert!(
        last.contains(">Person 001<")
            && last.contains("id=\"prev\"")
            && !last.contains("id=\"next\"")
    );
    let (_, waiting) = get(&base, "/agent/Tess?show=waiting", &token).await?;
    assert!(waiting.contains("tag waits") && !waiting.contains(">Person 001<"));

    // Sam's schedule, today and tomorrow; Tess's memory with where each fact came from.
    let (_, schedule) = get(&base, "/agent/Sam/schedule", &token).await?;
    assert!(
        schedule.contains("id=\"day-0\">Today, ") && schedule.contains("id=\"day-1\">Tomorrow, "),
        "{schedule}"
    );
    assert!(
        schedule.contains("Europe/Berlin") && schedule.contains("id=\"intents\""),
        "{schedule}"
    );
    let (_, memory) = get(&base, "/agent/Tess/memory", &token).await?;
    assert!(
        memory.contains("Likes green tea.")
            && memory.contains("2026-11-20 10:00 UTC · chat Person 123"),
        "{memory}"
    );
    assert!(memory.contains("value=\"forget-fact\""), "{memory}");

    // Dee's conversation: the plan in words, the draft with its expiry and its text to edit.
    let drafts = until(&base, "/drafts", &token, "class=\"draft\"").await?;
    assert!(drafts.contains("id=\"drafts-count\">1<") && drafts.contains("http-equiv=\"refresh\""));
    let link = between(&drafts, "<h2>Dee in <a href=\"", "\"")
        .ok_or("no link")?
        .to_string();
    let (_, talk) = get(&base, &link, &token).await?;
    let plan = between(&talk, "id=\"plan\">", "</ol>").ok_or_else(|| format!("no plan: {talk}"))?;
    assert!(
        plan.contains("wait for the owner&#39;s answer to the draft")
            && plan.contains("then send “Hi!”"),
        "{plan}"
    );
    for raw in ["idempotency", "{&quot;", "{\"", "delay_secs"] {
        assert!(!talk.contains(raw), "{raw} in {talk}");
    }
    assert!(
        talk.contains("<textarea name=\"text\" rows=\"3\">Hi!</textarea>"),
        "{talk}"
    );
    assert!(talk.contains("Expires at "), "{talk}");

    // Usage: per day and model, the cap as a line for Tess, totals.
    let (_, usage) = get(&base, "/usage?agent=Tess", &token).await?;
    assert!(
        usage.contains("id=\"cap-line\"") && usage.contains("cap 300"),
        "{usage}"
    );
    let (_, all) = get(&base, "/usage", &token).await?;
    assert!(all.contains("id=\"grand-total\""), "{all}");
    for page in [&home, &chats, &schedule, &memory, &talk, &usage] {
        assert!(!page.contains("<script"), "a script");
    }

    Ok((drafts, link))
}

/// The owner's walk in a headless Chromium: log in, lift the cap, search and page the chats,
/// see a schedule, forget a fact, edit a draft from its prefilled form and send it; then at
/// 390 px wide, no page is wider than the screen. Screenshots of the desktop and the phone.
async fn walk(
    chromium: &std::path::Path,
    driver: &std::path::Path,
    base: &str,
    token: &str,
    conversation: &str,
) -> TestResult {
    let b = Browser::start(chromium, driver).await?;
    let docs = std::env::var_os("PERSONAD_DOCS_SHOTS")
        .map(|_| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/console"));
    let shots = docs.clone().unwrap_or_else(|| b.shots.clone());
    b.go(&format!("{base}/agent/Tess")).await?;
    b.type_into("#token", token).await?;
    b.click("#login").await?;
    b.shows("chat(s)").await?;
    assert_eq!(
        b.url().await?,
        format!("{base}/agent/Tess"),
        "back where it was asked"
    );
    b.shot_to(&shots, "desktop-chats").await?;

    // The cap and its Lift button.
    b.go(&format!("{base}/?refresh=off")).await?;
    b.shot_to(&shots, "desktop-personas").await?;
    b.click("tr[data-agent=\"Tess\"] button[value=\"lift\"]")
        .await?;
    b.shows("The spending cap is lifted").await?;
    assert!(!b.source().await?.contains("id=\"at-cap\""));

    // A search, then the next page.
    b.go(&format!("{base}/agent/Tess")).await?;
    b.type_into("#q", "Person 123").await?;
    b.click("#search").await?;
    // The count itself: "1 chat(s)" is also the end of "201 chat(s)" on the page before.
    b.shows("id=\"chat-count\">1 chat(s)").await?;
    b.go(&format!("{base}/agent/Tess")).await?;
    b.click("#next").await?;
    b.shows("page 2 of 5").await?;

    // A schedule, then a fact forgotten.
    b.go(&format!("{base}/agent/Sam/schedule")).await?;
    b.shows("Tomorrow, ").await?;
    b.shot_to(&shots, "desktop-schedule").await?;
    b.go(&format!("{base}/agent/Tess/memory")).await?;
    b.click("li[data-fact=\"fact-tea1\"] button").await?;
    let html = b.shows("The fact is forgotten.").await?;
    assert!(
        !html.contains("Likes green tea.") && html.contains("Has two cats."),
        "{html}"
    );

    // The conversation, its plan, and the draft edited from its prefilled form.
    b.go(&format!("{base}{conversation}")).await?;
    b.shows("answer to the draft").await?;
    b.shot_to(&shots, "desktop-conversation").await?;
    let area = b.find("section.draft form.edit textarea").await?;
    b.call("POST", &b.at(&format!("/element/{area}/clear")), None)
        .await?;
    b.type_into("section.draft form.edit textarea", "See you at eight")
        .await?;
    b.click("section.draft .send-edit").await?;
    b.shows("Draft approved.").await?;
    b.go(&format!("{base}/usage?agent=Tess")).await?;
    b.shot_to(&shots, "desktop-usage").await?;

    // A phone: no page scrolls sideways.
    b.window(390, 844).await?;
    for path in [
        "/?refresh=off",
        "/agent/Tess",
        "/agent/Tess?page=2",
        "/agent/Sam/schedule",
        "/agent/Tess/memory",
        conversation,
        "/drafts?refresh=off",
        "/usage",
        "/usage?agent=Tess",
        "/incidents",
    ] {
        b.go(&format!("{base}{path}")).await?;
        let (page, view) = b.widths().await?;
        assert!(view <= 420, "the window is not a phone's: {view} px");
        assert!(
            page <= view,
            "{path} scrolls sideways at {view} px: {page} px wide"
        );
    }
    for (path, name) in [
        ("/?refresh=off", "phone-personas"),
        ("/agent/Tess", "phone-chats"),
        (conversation, "phone-conversation"),
    ] {
        b.go(&format!("{base}{path}")).await?;
        b.shot_to(&shots, name).await?;
    }
    let _ = b.call("DELETE", &b.at(""), None).await;
    Ok(())
}
