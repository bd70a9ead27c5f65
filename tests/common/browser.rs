//! A real headless Chromium, driven through chromedriver (WebDriver), for the tests of the pages
//! the project writes (`recover audit DIR --html FILE`).
//!
//! Why a real browser: the page's worth is what a browser does with it (its script runs without
//! an error, its Content-Security-Policy blocks every request, its keys move the selection); only
//! a browser can tell. Why blocking: test authors write plain `#[test] fn`s; each call runs on a
//! runtime the [`Browser`] owns, under a timeout, and panics with what it was doing when it fails.
//!
//! Without chromedriver or Chromium, [`Browser::start`] panics saying how to install them: a
//! browser test never passes without a browser. chromedriver (and the Chromium it starts) run in
//! a process group of their own, killed when the [`Browser`] is dropped, a panicking test too.
#![allow(dead_code)]

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::future::Future;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The keys [`Browser::press`] takes (`Key::Down` is ArrowDown, `Key::Enter`, `Key::Tab`, …).
pub use fantoccini::key::Key;

/// Longest one WebDriver command may take before the test fails.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest chromedriver may take to answer `/status` after it was started.
const DRIVER_START_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest the session's close may take when the browser is dropped; then it is killed anyway.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

const INSTALL_HINT: &str = "install them with `apt-get install chromium chromium-driver` \
                            (Debian), or name them with the CHROMEDRIVER and CHROME variables";

/// One entry of the browser's console (chromedriver's `browser` log).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct ConsoleEntry {
    /// `SEVERE`, `WARNING`, `INFO`, `DEBUG`.
    pub level: String,
    /// The text, with the source's URL and line first (`file:///… 3:9 Uncaught Error: …`).
    pub message: String,
    /// Where it came from: `javascript`, `security`, `network`, `console-api`, ….
    #[serde(default)]
    pub source: Option<String>,
}

/// A headless Chromium session and the chromedriver serving it.
pub struct Browser {
    runtime: tokio::runtime::Runtime,
    /// `None` once closed.
    client: Option<Client>,
    driver: Child,
    /// The browser's `--user-data-dir` and chromedriver's log.
    scratch: tempfile::TempDir,
    /// Everything read from the console so far: chromedriver hands each entry out once.
    console: RefCell<Vec<ConsoleEntry>>,
}

/// An element of the page, found by [`Browser::find`] or [`Browser::find_all`].
pub struct Element<'b> {
    browser: &'b Browser,
    inner: fantoccini::elements::Element,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a headless Chromium session.
    ///
    /// Panics when chromedriver or Chromium is missing (saying how to install them), or when
    /// either fails to start (with chromedriver's log).
    pub fn start() -> Browser {
        let chromedriver = find_program("CHROMEDRIVER", &["chromedriver"], "/usr/bin/chromedriver");
        let chromium = find_program(
            "CHROME",
            &["chromium", "chromium-browser", "google-chrome"],
            "/usr/bin/chromium",
        );
        let scratch = tempfile::tempdir().expect("a temporary directory for the browser");
        let port = free_port();
        let driver = spawn_driver(&chromedriver, port, scratch.path());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime for the browser");
        let mut browser = Browser {
            runtime,
            client: None,
            driver,
            scratch,
            console: RefCell::new(Vec::new()),
        };
        browser.wait_for_driver(port);
        browser.client = Some(browser.connect(port, &chromium));
        browser
    }

    /// Navigates to the `file://` URL of a local HTML file and waits for it to load.
    #[track_caller]
    pub fn open_file(&self, path: &Path) {
        let path = path
            .canonicalize()
            .unwrap_or_else(|e| panic!("browser: open_file {}: {e}", path.display()));
        let url = url::Url::from_file_path(&path)
            .unwrap_or_else(|()| panic!("browser: no file:// URL for {}", path.display()));
        self.run(&format!("open {url}"), self.client().goto(url.as_str()));
    }

    /// Every console entry of the session so far, all levels, oldest first.
    #[track_caller]
    pub fn console(&self) -> Vec<ConsoleEntry> {
        let value = self.run("read the console log", self.client().issue_cmd(BrowserLog));
        let fresh: Vec<ConsoleEntry> = serde_json::from_value(value.clone())
            .unwrap_or_else(|e| panic!("browser: the console log {value} is not a list: {e}"));
        let mut console = self.console.borrow_mut();
        console.extend(fresh);
        console.clone()
    }

    /// The console entries at level SEVERE so far (uncaught errors, failed or CSP-refused
    /// loads, `console.error`).
    #[track_caller]
    pub fn console_errors(&self) -> Vec<ConsoleEntry> {
        let mut entries = self.console();
        entries.retain(|e| e.level == "SEVERE");
        entries
    }

    /// The element the CSS selector finds first; panics when there is none.
    #[track_caller]
    pub fn find(&self, css: &str) -> Element<'_> {
        let inner = self.run(
            &format!("find {css:?}"),
            self.client().find(Locator::Css(css)),
        );
        Element {
            browser: self,
            inner,
        }
    }

    /// Every element the CSS selector finds, in document order (maybe none).
    #[track_caller]
    pub fn find_all(&self, css: &str) -> Vec<Element<'_>> {
        let found = self.run(
            &format!("find all {css:?}"),
            self.client().find_all(Locator::Css(css)),
        );
        found
            .into_iter()
            .map(|inner| Element {
                browser: self,
                inner,
            })
            .collect()
    }

    /// Clicks the first element the CSS selector finds.
    #[track_caller]
    pub fn click(&self, css: &str) {
        self.find(css).click();
    }

    /// The rendered text of the first element the CSS selector finds.
    #[track_caller]
    pub fn text(&self, css: &str) -> String {
        self.find(css).text()
    }

    /// Runs `js` as a function body (`arguments[0]`, … are `args`); its `return` value as JSON.
    #[track_caller]
    pub fn execute(&self, js: &str, args: Vec<Value>) -> Value {
        self.run(&format!("execute {js:?}"), self.client().execute(js, args))
    }

    /// Presses and releases one key on whatever has the focus (as a person would, so the page's
    /// own key handlers and the browser's Tab order both apply).
    #[track_caller]
    pub fn press(&self, key: Key) {
        let value = char::from(key);
        let keys = KeyActions::new("keyboard".to_string())
            .then(KeyAction::Down { value })
            .then(KeyAction::Up { value });
        self.run(
            &format!("press {key:?}"),
            self.client().perform_actions(keys),
        );
    }

    /// Types `text` into the first element the CSS selector finds (focusing it first).
    #[track_caller]
    pub fn send_keys(&self, css: &str, text: &str) {
        self.find(css).send_keys(text);
    }

    /// Writes a PNG of the viewport to `path`.
    #[track_caller]
    pub fn screenshot(&self, path: &Path) {
        let png = self.run("take a screenshot", self.client().screenshot());
        std::fs::write(path, png)
            .unwrap_or_else(|e| panic!("browser: write the screenshot {}: {e}", path.display()));
    }

    /// Closes the session and stops chromedriver (dropping does the same, errors ignored).
    #[track_caller]
    pub fn close(mut self) {
        if let Some(client) = self.client.take() {
            self.run("close the session", client.close());
        }
        // Drop stops chromedriver and removes the scratch directory.
    }

    fn client(&self) -> &Client {
        self.client
            .as_ref()
            .expect("the client is only taken by close(), which consumes the browser")
    }

    /// Runs one WebDriver step to its end; panics naming `what` if it fails or takes too long.
    #[track_caller]
    fn run<T, E: std::fmt::Display>(
        &self,
        what: &str,
        step: impl Future<Output = Result<T, E>>,
    ) -> T {
        match self.within(COMMAND_TIMEOUT, step) {
            Ok(Ok(value)) => value,
            Ok(Err(e)) => panic!("browser: {what}: {e}"),
            Err(_) => panic!("browser: {what}: no answer in {COMMAND_TIMEOUT:?}"),
        }
    }

    /// Runs `step` on the browser's runtime for at most `limit` (`Err` when it took longer).
    fn within<T>(
        &self,
        limit: Duration,
        step: impl Future<Output = T>,
    ) -> Result<T, tokio::time::error::Elapsed> {
        // The timer is made inside the runtime: tokio's timers need its context.
        self.runtime
            .block_on(async { tokio::time::timeout(limit, step).await })
    }

    /// Polls chromedriver's `/status` until it says it is ready.
    fn wait_for_driver(&mut self, port: u16) {
        let deadline = Instant::now() + DRIVER_START_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.driver.try_wait() {
                panic!(
                    "browser: chromedriver exited ({status}) before it answered; its log:\n{}",
                    self.driver_log()
                );
            }
            if driver_ready(port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "browser: chromedriver did not answer /status on port {port} in \
             {DRIVER_START_TIMEOUT:?}; its log:\n{}",
            self.driver_log()
        );
    }

    /// Opens the WebDriver session: headless Chromium with its console log kept.
    fn connect(&self, port: u16, chromium: &Path) -> Client {
        let profile = self.scratch.path().join("profile");
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new",
                    // Tests run as root, where Chromium's sandbox refuses to start.
                    "--no-sandbox",
                    "--disable-gpu",
                    "--window-size=1400,1000",
                    format!("--user-data-dir={}", profile.display()),
                    // Nothing but loopback is reachable; the browser is not to try anything else.
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--no-first-run",
                ],
            },
            "goog:loggingPrefs": { "browser": "ALL" },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!("json!({{…}}) is an object")
        };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let connect = async {
            ClientBuilder::new(connector)
                .capabilities(capabilities)
                .connect(&format!("http://127.0.0.1:{port}/"))
                .await
        };
        match self.within(COMMAND_TIMEOUT, connect) {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => panic!(
                "browser: chromedriver could not start {} ({e}); its log:\n{}",
                chromium.display(),
                self.driver_log()
            ),
            Err(_) => panic!(
                "browser: no session from chromedriver in {COMMAND_TIMEOUT:?}; its log:\n{}",
                self.driver_log()
            ),
        }
    }

    /// The end of chromedriver's log, for failure messages.
    fn driver_log(&self) -> String {
        let log = std::fs::read_to_string(self.scratch.path().join("chromedriver.log"))
            .unwrap_or_else(|e| format!("(no log: {e})"));
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Browser {
    /// Closes the session if it is still open, then kills chromedriver's process group (and so
    /// any Chromium left); never panics, as it may run while a failed test unwinds.
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = self.within(CLOSE_TIMEOUT, client.close());
        }
        let group = nix::unistd::Pid::from_raw(self.driver.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.driver.wait();
    }
}

impl Element<'_> {
    /// The element's rendered text.
    #[track_caller]
    pub fn text(&self) -> String {
        self.browser
            .run("read an element's text", self.inner.text())
    }

    /// Clicks the element (scrolled into view first, as WebDriver does).
    #[track_caller]
    pub fn click(&self) {
        self.browser.run("click an element", self.inner.click());
    }

    /// An attribute's value as written in the HTML, `None` when absent.
    #[track_caller]
    pub fn attr(&self, name: &str) -> Option<String> {
        self.browser
            .run(&format!("read attribute {name:?}"), self.inner.attr(name))
    }

    /// Whether the element is rendered visibly.
    #[track_caller]
    pub fn is_displayed(&self) -> bool {
        self.browser
            .run("read an element's visibility", self.inner.is_displayed())
    }

    /// Types `text` into the element (focusing it first).
    #[track_caller]
    pub fn send_keys(&self, text: &str) {
        self.browser
            .run("type into an element", self.inner.send_keys(text));
    }
}

/// chromedriver's own command for the browser's console log (not in W3C WebDriver, so not in
/// fantoccini): `POST /session/{id}/se/log {"type":"browser"}`, the entries since the last read.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/se/log",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(r#"{"type":"browser"}"#.to_string()),
        )
    }
}

/// The program named by the environment variable `var`, else the first of `names` on PATH, else
/// `fallback`; panics saying how to install it when none exists.
fn find_program(var: &str, names: &[&str], fallback: &str) -> PathBuf {
    if let Some(named) = std::env::var_os(var) {
        let named = PathBuf::from(named);
        if named.is_file() {
            return named;
        }
        panic!(
            "browser: {var}={} names no file; the browser tests need chromedriver and \
             Chromium: {INSTALL_HINT}",
            named.display()
        );
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let on_path = std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file());
    if let Some(found) = on_path {
        return found;
    }
    let fallback = PathBuf::from(fallback);
    if fallback.is_file() {
        return fallback;
    }
    panic!(
        "browser: none of {names:?} found on PATH or as {}; the browser tests need chromedriver \
         and Chromium: {INSTALL_HINT}",
        fallback.display()
    );
}

/// A loopback port nothing listens on now (the kernel's pick; chromedriver binds it next).
fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a free loopback port");
    listener
        .local_addr()
        .expect("a bound socket's address")
        .port()
}

/// Starts chromedriver in a process group of its own (so Drop can kill it with its Chromium),
/// its output in `scratch/chromedriver.log`.
fn spawn_driver(chromedriver: &Path, port: u16, scratch: &Path) -> Child {
    let log_path = scratch.join("chromedriver.log");
    let log = std::fs::File::create(&log_path)
        .unwrap_or_else(|e| panic!("browser: create {}: {e}", log_path.display()));
    let log_err = log
        .try_clone()
        .expect("a second handle on chromedriver's log");
    use std::os::unix::process::CommandExt;
    Command::new(chromedriver)
        .arg(format!("--port={port}"))
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .process_group(0)
        // Chromium's crash handler keeps its database under the XDG directories, not the profile.
        .env("XDG_CONFIG_HOME", scratch.join("xdg-config"))
        .env("XDG_CACHE_HOME", scratch.join("xdg-cache"))
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "browser: start {}: {e}; {INSTALL_HINT}",
                chromedriver.display()
            )
        })
}

/// Whether chromedriver on `port` answers `GET /status` with `"ready": true`.
fn driver_ready(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect((Ipv4Addr::LOCALHOST, port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request =
        format!("GET /status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.1 200") && response.contains("\"ready\":true")
}
