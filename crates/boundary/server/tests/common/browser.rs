//! Headless Chromium through ChromeDriver, for the web page tests.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{ClientBuilder, Locator};
use serde_json::json;

struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// ChromeDriver (killed on drop) and a WebDriver session in headless Chromium.
pub struct Browser {
    pub client: fantoccini::Client,
    _driver: Driver,
}

impl Browser {
    /// Starts ChromeDriver on a free port and opens a headless Chromium session.
    pub async fn start() -> Browser {
        let chromedriver = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect("ChromeDriver is missing: install the Debian packages chromium and chromium-driver (scripts/check does)");
        let port = livestate_testkit::free_port();
        let driver = Driver(
            Command::new(chromedriver)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({"binary": "/usr/bin/chromium", "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"]}),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            match ClientBuilder::new(connector.clone())
                .capabilities(caps.clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await
            {
                Ok(c) => break c,
                Err(e) => {
                    assert!(Instant::now() < deadline, "ChromeDriver did not start: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        Browser { client, _driver: driver }
    }

    /// Signs in at `url` with `token` and waits for the inbox.
    pub async fn sign_in(&self, url: &str, token: &str) {
        let c = &self.client;
        c.goto(&format!("{url}/signin")).await.unwrap();
        c.find(Locator::Css("#token")).await.unwrap().send_keys(token).await.unwrap();
        c.find(Locator::Css("form button[type=submit]")).await.unwrap().click().await.unwrap();
        wait_for(c, "#pending").await;
    }
}

/// Where screenshots go: `$LIVESTATE_ARTIFACTS`, else `$CARGO_TARGET_DIR/test-artifacts`.
pub fn artifacts() -> PathBuf {
    let dir = std::env::var_os("LIVESTATE_ARTIFACTS").map(PathBuf::from).unwrap_or_else(|| {
        let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it")).join("../../../target")
        });
        target.join("test-artifacts")
    });
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The element `css` selects, once it appears (within 15 s).
pub async fn wait_for(c: &fantoccini::Client, css: &str) -> fantoccini::elements::Element {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(e) = c.find(Locator::Css(css)).await {
            return e;
        }
        assert!(
            Instant::now() < deadline,
            "`{css}` never appeared; page: {}",
            c.source().await.unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
