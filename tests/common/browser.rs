//! A headless Chromium driven through chromedriver's WebDriver API (plain HTTP, so reqwest
//! drives it), for the console's browser tests: start a session, go to a page, find and click
//! an element, type, read the page, run a script (to measure the page), resize the window, and
//! take a screenshot. `browser_tools` finds both programs or says SKIPPED (failing instead
//! when `PERSONAD_REQUIRE_BROWSER` is set).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use super::console::client;

/// A WebDriver session on a headless Chromium.
pub(crate) struct Browser {
    http: reqwest::Client,
    base: String,
    session: String,
    driver: Child,
    pub(crate) shots: PathBuf,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn which(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|n| {
        std::env::split_paths(&path)
            .map(|d| d.join(n))
            .find(|p| p.is_file())
    })
}

fn free_port() -> Option<u16> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()
        .map(|a| a.port())
}

impl Browser {
    pub(crate) async fn start(
        chromium: &Path,
        driver: &Path,
    ) -> Result<Browser, Box<dyn std::error::Error>> {
        let port = free_port().ok_or("no free port")?;
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let http = client();
        let base = format!("http://127.0.0.1:{port}");
        let mut browser = Browser {
            http,
            base,
            session: String::new(),
            driver: child,
            shots: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/console-screenshots"),
        };
        // The driver is up once it answers its status.
        for _ in 0..100 {
            if browser
                .http
                .get(format!("{}/status", browser.base))
                .send()
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let caps = json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "binary": chromium.to_string_lossy(),
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,900"]
        }}}});
        let v = browser.call("POST", "/session", Some(caps)).await?;
        browser.session = v["sessionId"].as_str().ok_or("no session id")?.to_string();
        std::fs::create_dir_all(&browser.shots)?;
        Ok(browser)
    }

    pub(crate) async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Box<dyn std::error::Error>> {
        let url = format!("{}{path}", self.base);
        let req = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self
                .http
                .post(url)
                .header("Content-Type", "application/json")
                .body(serde_json::to_vec(&body.unwrap_or(json!({})))?),
        };
        let bytes = req.send().await?.bytes().await?;
        let v: Value = serde_json::from_slice(&bytes)?;
        if v["value"]["error"].is_string() {
            return Err(format!("webdriver {path}: {}", v["value"]).into());
        }
        Ok(v["value"].clone())
    }

    pub(crate) fn at(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    pub(crate) async fn go(&self, url: &str) -> Result<(), Box<dyn std::error::Error>> {
        self.call("POST", &self.at("/url"), Some(json!({"url": url})))
            .await
            .map(|_| ())
    }

    pub(crate) async fn find(&self, css: &str) -> Result<String, Box<dyn std::error::Error>> {
        let v = self
            .call(
                "POST",
                &self.at("/element"),
                Some(json!({"using": "css selector", "value": css})),
            )
            .await?;
        v.as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("no element {css}").into())
    }

    pub(crate) async fn click(&self, css: &str) -> Result<(), Box<dyn std::error::Error>> {
        let id = self.find(css).await?;
        self.call("POST", &self.at(&format!("/element/{id}/click")), None)
            .await
            .map(|_| ())
    }

    pub(crate) async fn type_into(
        &self,
        css: &str,
        text: &str,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let id = self.find(css).await?;
        self.call(
            "POST",
            &self.at(&format!("/element/{id}/value")),
            Some(json!({"text": text})),
        )
        .await
        .map(|_| ())
    }

    pub(crate) async fn source(&self) -> Result<String, Box<dyn std::error::Error>> {
        Ok(self
            .call("GET", &self.at("/source"), None)
            .await?
            .as_str()
            .unwrap_or("")
            .to_string())
    }

    pub(crate) async fn shot(&self, name: &str) -> Result<(), Box<dyn std::error::Error>> {
        let v = self.call("GET", &self.at("/screenshot"), None).await?;
        let png = base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap_or(""))?;
        std::fs::write(self.shots.join(format!("{name}.png")), png)?;
        Ok(())
    }

    /// Waits for the current page to hold `needle` (a click's navigation may still be under
    /// way when the click returns), bounded.
    pub(crate) async fn shows(&self, needle: &str) -> Result<String, Box<dyn std::error::Error>> {
        for _ in 0..50 {
            let html = self.source().await?;
            if html.contains(needle) {
                return Ok(html);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("the page never showed {needle:?}").into())
    }

    /// Reloads `url` until its page holds `needle` (bounded).
    pub(crate) async fn until(
        &self,
        url: &str,
        needle: &str,
    ) -> Result<String, Box<dyn std::error::Error>> {
        for _ in 0..50 {
            self.go(url).await?;
            let html = self.source().await?;
            if html.contains(needle) {
                return Ok(html);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(format!("{url} never showed {needle:?}").into())
    }
}

/// Chromium and chromedriver, if both are installed. When one is missing the browser test is
/// skipped loudly: straight to stderr, which the harness does not swallow (a `println!` is
/// captured and shown only for a failing test), and `PERSONAD_REQUIRE_BROWSER` makes the
/// absence a failure.
pub(crate) fn browser_tools() -> Option<(PathBuf, PathBuf)> {
    if let (Some(chromium), Some(driver)) = (
        which(&["chromium", "chromium-browser", "google-chrome"]),
        which(&["chromedriver"]),
    ) {
        return Some((chromium, driver));
    }
    let msg = "SKIPPED: the browser test: chromium or chromedriver is not installed";
    assert!(
        std::env::var_os("PERSONAD_REQUIRE_BROWSER").is_none(),
        "{msg}, and PERSONAD_REQUIRE_BROWSER is set"
    );
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "\n*** {msg} ***");
    None
}

impl Browser {
    /// Runs `script` in the page (WebDriver's execute/sync) and returns its value.
    pub(crate) async fn run(&self, script: &str) -> Result<Value, Box<dyn std::error::Error>> {
        self.call(
            "POST",
            &self.at("/execute/sync"),
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// Sets the window's size.
    pub(crate) async fn window(
        &self,
        width: u32,
        height: u32,
    ) -> Result<(), Box<dyn std::error::Error>> {
        self.call(
            "POST",
            &self.at("/window/rect"),
            Some(json!({"width": width, "height": height})),
        )
        .await
        .map(|_| ())
    }

    /// The page's width and the viewport's (CSS pixels).
    pub(crate) async fn widths(&self) -> Result<(u64, u64), Box<dyn std::error::Error>> {
        let v = self
            .run("return [document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth];")
            .await?;
        let n = |i: usize| v[i].as_u64().unwrap_or(u64::MAX);
        Ok((n(0).max(n(1)), n(2)))
    }

    /// A screenshot of the viewport as PNG into `dir/name.png`.
    pub(crate) async fn shot_to(
        &self,
        dir: &Path,
        name: &str,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let v = self.call("GET", &self.at("/screenshot"), None).await?;
        let png = base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap_or(""))?;
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join(format!("{name}.png")), png)?;
        Ok(())
    }

    /// The address the browser is at.
    pub(crate) async fn url(&self) -> Result<String, Box<dyn std::error::Error>> {
        Ok(self
            .call("GET", &self.at("/url"), None)
            .await?
            .as_str()
            .unwrap_or("")
            .to_string())
    }
}
