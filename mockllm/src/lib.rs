//! A loopback server that speaks the streaming APIs of OpenAI (Chat Completions and
//! Responses), Anthropic (Messages) and Gemini (`streamGenerateContent`) from scripted
//! replies, for tooljournal's end-to-end tests.
//!
//! Each provider's SSE wire format is written here from the providers' API references (event
//! names and shapes), independently of tooljournal's client adapters, so that a test using
//! both checks one against the other. Every request is checked as the provider would check it
//! (credentials, `model`, `stream`, the history's pairing rules through
//! [`history::providers::validate`], the tools' shape) and recorded; a request that breaks a
//! rule gets the provider's error status and body, naming the rule, and takes no scripted
//! reply. Faults ([`Faults`]) break a stream the ways networks and providers do.
//!
//! ```
//! use tooljournal_mockllm::{Answer, Format, MockServer, Reply};
//!
//! let server = MockServer::start();
//! server.expect_key("sk-test");
//! server.push(Format::Anthropic, Reply::rate_limited(Format::Anthropic, 1));
//! server.push(Format::Anthropic, Answer::text("hello").into());
//! // point the client at server.base_url(Format::Anthropic) with key "sk-test" ...
//! assert_eq!(server.remaining(Format::Anthropic), 2);
//! ```
//!
//! Routes: `POST /v1/chat/completions` (openai-chat), `POST /v1/responses`
//! (openai-responses), `POST /v1/messages` (anthropic), `POST
//! /v1beta/models/{model}:streamGenerateContent?alt=sse` (gemini). Anything else is a 404,
//! not recorded.

#![warn(missing_docs)]

mod check;
mod errors;
mod script;
mod server;
mod stream;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// The provider formats, as `tooljournal-history` names them.
pub use history::providers::Format;
pub use script::{Answer, Faults, Reply, Stop};
pub use stream::PIECE_BYTES;

/// One request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The provider whose route it came to.
    pub format: Format,
    /// The path with its query (`/v1beta/models/m:streamGenerateContent?alt=sse`).
    pub path: String,
    /// Every header, names in lower case, values as text (lossy for non-UTF-8 bytes).
    pub headers: Vec<(String, String)>,
    /// The body; `Null` when it was not JSON.
    pub body: serde_json::Value,
    /// The first rule the request broke (`rule: what`, e.g. `auth.missing_key: ...` or
    /// `openai_chat.missing_tool_result at index 3: ...`), or `None`; such a request was
    /// answered with the provider's error and took no scripted reply. Also set, to
    /// `mockllm.no_reply: ...`, when no reply was left for a valid request (answered with a
    /// 400 naming it).
    pub violation: Option<String>,
}

impl Recorded {
    /// The value of header `name` (lower case), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the handlers share with the test.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub queues: HashMap<Format, VecDeque<Reply>>,
    pub requests: Vec<Recorded>,
    pub key: Option<String>,
    /// Response ids made up so far (to keep them unique).
    pub ids: u64,
}

pub(crate) type Shared = Arc<Mutex<State>>;

/// Locks the state; a handler that panicked while holding it left nothing half-written that
/// matters more than the test going on, so a poisoned lock is taken as is.
pub(crate) fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The loopback server: one thread running a tokio runtime, serving until dropped.
#[derive(Debug)]
pub struct MockServer {
    addr: SocketAddr,
    shared: Shared,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MockServer {
    /// Starts a server on `127.0.0.1` at a free port.
    ///
    /// # Panics
    /// When no loopback port can be bound (the machine is out of sockets): a test fixture has
    /// nothing better to do then. [`MockServer::start_on`] returns the error instead.
    #[allow(clippy::expect_used)]
    pub fn start() -> MockServer {
        // Binding port 0 on loopback fails only when the machine is out of sockets or
        // threads, and no test can go on without its server.
        MockServer::start_on(0).expect("mockllm: cannot bind a loopback port")
    }

    /// Starts a server on `127.0.0.1:port` (0: any free port).
    pub fn start_on(port: u16) -> std::io::Result<MockServer> {
        let shared: Shared = Arc::default();
        let (addr, shutdown, thread) = server::spawn(port, shared.clone())?;
        Ok(MockServer {
            addr,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The provider base URL to give a client for `format`: `http://127.0.0.1:P/v1` for the
    /// OpenAI formats, `http://127.0.0.1:P` for Anthropic and Gemini.
    pub fn base_url(&self, format: Format) -> String {
        match format {
            Format::OpenAiChat | Format::OpenAiResponses => format!("http://{}/v1", self.addr),
            Format::Anthropic | Format::Gemini => format!("http://{}", self.addr),
        }
    }

    /// From now on, requests whose auth header (`Authorization: Bearer`, `x-api-key`,
    /// `x-goog-api-key` or Gemini's `?key=`) does not hold `key` are turned away as the
    /// provider does (401; Gemini: 400 `API_KEY_INVALID`). Without it any non-empty key
    /// passes; a missing one never does (401; Gemini: 403).
    pub fn expect_key(&self, key: &str) {
        lock(&self.shared).key = Some(key.to_string());
    }

    /// Queues `reply` for the next valid request of `format` (first in, first out).
    pub fn push(&self, format: Format, reply: Reply) {
        lock(&self.shared)
            .queues
            .entry(format)
            .or_default()
            .push_back(reply);
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared).requests.clone()
    }

    /// How many replies are still queued for `format`.
    pub fn remaining(&self, format: Format) -> usize {
        lock(&self.shared)
            .queues
            .get(&format)
            .map_or(0, VecDeque::len)
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            // The server may already be gone; nothing to stop then.
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            // A panic on the server thread was already printed; dropping must not panic too.
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    /// A test binary keeps one server in a `static`: it must be shareable across threads.
    #[test]
    fn the_server_can_live_in_a_static() {
        fn shareable<T: Send + Sync + 'static>() {}
        shareable::<super::MockServer>();
    }
}
