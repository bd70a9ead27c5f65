//! Shared by the adapter tests: the recorded streams under `tests/data`, decoding them, and a
//! loopback HTTP server that answers each request with a canned response and keeps what it
//! was sent.

#![allow(dead_code)]

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use events::model::{ModelError, ModelEvent};
use futures_util::{stream, StreamExt};
use tooljournal_llm::{decode, Format};

/// A file of `tests/data`.
pub fn data(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// Everything `format`'s decoder makes of `bytes` handed over in pieces of `piece_bytes`.
pub async fn decode_all(
    format: Format,
    bytes: &[u8],
    piece_bytes: usize,
) -> Vec<Result<ModelEvent, ModelError>> {
    let pieces: Vec<Result<bytes::Bytes, Infallible>> = bytes
        .chunks(piece_bytes.max(1))
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    decode(format, stream::iter(pieces))
        .filter(|e| std::future::ready(!matches!(e, Ok(ModelEvent::KeepAlive))))
        .collect()
        .await
}

/// [`decode_all`] with the keep-alives left in.
pub async fn decode_with_keep_alives(
    format: Format,
    bytes: &[u8],
) -> Vec<Result<ModelEvent, ModelError>> {
    let pieces = vec![Ok::<_, Infallible>(bytes::Bytes::copy_from_slice(bytes))];
    decode(format, stream::iter(pieces)).collect().await
}

/// What a canned response is.
#[derive(Clone)]
pub struct Canned {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    /// The body, in the pieces it is sent in.
    pub pieces: Vec<Vec<u8>>,
    /// After the pieces, the body breaks (the connection is cut) instead of ending.
    pub break_after: bool,
}

impl Canned {
    /// A 200 event stream of `body`.
    pub fn sse(body: Vec<u8>) -> Canned {
        Canned {
            status: 200,
            headers: vec![("content-type", "text/event-stream".into())],
            pieces: vec![body],
            break_after: false,
        }
    }

    /// `status` with a JSON `body`.
    pub fn json(status: u16, body: &str) -> Canned {
        Canned {
            status,
            headers: vec![("content-type", "application/json".into())],
            pieces: vec![body.as_bytes().to_vec()],
            break_after: false,
        }
    }

    pub fn header(mut self, name: &'static str, value: &str) -> Canned {
        self.headers.push((name, value.to_string()));
        self
    }
}

/// One request the server was sent.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// A loopback server answering every request with its canned response.
pub struct Server {
    pub base: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a server on 127.0.0.1 (a port of its own) that answers with `canned`.
pub async fn serve(canned: Canned) -> Server {
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = seen.clone();
    let app = axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let canned = canned.clone();
            let record = record.clone();
            async move {
                record.lock().unwrap().push(Seen {
                    method,
                    uri,
                    headers,
                    body: body.to_vec(),
                });
                respond(canned)
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding a loopback port");
    let port = listener.local_addr().expect("a bound address").port();
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .await
            .expect("the test server runs");
    });
    Server {
        base: format!("http://127.0.0.1:{port}"),
        seen,
        task,
    }
}

fn respond(canned: Canned) -> Response {
    let items: Vec<Result<Vec<u8>, std::io::Error>> = canned.pieces.into_iter().map(Ok).collect();
    let body = stream::iter(items);
    let body = if canned.break_after {
        // After a pause, so that the headers and the pieces go out before the connection is
        // cut (else hyper may read the error first and send nothing).
        body.chain(stream::once(async {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            Err(std::io::Error::other("cut by the test"))
        }))
        .boxed()
    } else {
        body.boxed()
    };
    let mut response = Response::new(Body::from_stream(body));
    *response.status_mut() = StatusCode::from_u16(canned.status).expect("a valid status");
    for (name, value) in canned.headers {
        response
            .headers_mut()
            .insert(name, value.parse().expect("a valid header value"));
    }
    response
}

/// A loopback address nothing listens on (a port bound, then let go).
pub async fn refused_base() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding a loopback port");
    let port = listener.local_addr().expect("a bound address").port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}
