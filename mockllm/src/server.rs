//! The HTTP side: routes, the per-request flow (check, record, reply), and sending a planned
//! stream with its delays, cut and hang.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, Query, State as AxumState};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use history::providers::Format;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::check::{check, Incoming};
use crate::stream::{failed_frames, frames, Ctx, Frame};
use crate::{errors, lock, Recorded, Reply, Shared};

/// Binds `127.0.0.1:port` and serves on a new thread until the returned sender fires (or is
/// dropped).
pub(crate) fn spawn(
    port: u16,
    shared: Shared,
) -> std::io::Result<(SocketAddr, oneshot::Sender<()>, JoinHandle<()>)> {
    // Bound with std, not in a runtime: the caller may itself be inside one (a tokio test).
    let listener = std::net::TcpListener::bind(("127.0.0.1", port))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (tx, rx) = oneshot::channel::<()>();
    let app = router(shared);
    let thread = std::thread::Builder::new()
        .name(format!("mockllm-{}", addr.port()))
        .spawn(move || {
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(listener) => listener,
                    Err(e) => {
                        eprintln!("mockllm: cannot serve on {addr}: {e}");
                        return;
                    }
                };
                tokio::select! {
                    result = axum::serve(listener, app) => {
                        if let Err(e) = result {
                            eprintln!("mockllm: server stopped: {e}");
                        }
                    }
                    _ = rx => {}
                }
            });
            // Hanging streams are still open: drop them with the runtime, not wait for them.
            runtime.shutdown_background();
        })?;
    Ok((addr, tx, thread))
}

fn router(shared: Shared) -> Router {
    Router::new()
        .route(
            "/v1/chat/completions",
            post(
                |s: AxumState<Shared>, uri: Uri, h: HeaderMap, q: Query<Q>, body: Bytes| {
                    handle(s.0, Format::OpenAiChat, None, uri, h, q.0, body)
                },
            ),
        )
        .route(
            "/v1/responses",
            post(
                |s: AxumState<Shared>, uri: Uri, h: HeaderMap, q: Query<Q>, body: Bytes| {
                    handle(s.0, Format::OpenAiResponses, None, uri, h, q.0, body)
                },
            ),
        )
        .route(
            "/v1/messages",
            post(
                |s: AxumState<Shared>, uri: Uri, h: HeaderMap, q: Query<Q>, body: Bytes| {
                    handle(s.0, Format::Anthropic, None, uri, h, q.0, body)
                },
            ),
        )
        .route(
            // `{model}:streamGenerateContent` is one path segment; it is split in `gemini`.
            "/v1beta/models/{target}",
            post(
                |s: AxumState<Shared>,
                 Path(target): Path<String>,
                 uri: Uri,
                 h: HeaderMap,
                 q: Query<Q>,
                 body: Bytes| async move {
                    match target.strip_suffix(":streamGenerateContent") {
                        Some(model) if !model.is_empty() => {
                            let model = model.to_string();
                            handle(s.0, Format::Gemini, Some(model), uri, h, q.0, body).await
                        }
                        _ => not_found(&uri),
                    }
                },
            ),
        )
        .fallback(|uri: Uri| async move { not_found(&uri) })
        // Conversations grow; the provider's own limits are not what these tests check.
        .layer(DefaultBodyLimit::disable())
        .with_state(shared)
}

type Q = HashMap<String, String>;

fn not_found(uri: &Uri) -> Response {
    (
        StatusCode::NOT_FOUND,
        format!("mockllm: no route for {}", uri.path()),
    )
        .into_response()
}

fn plain_response(status: u16, headers: &[(String, String)], body: String) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let named_type = headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("content-type"));
    if !named_type {
        response
            .headers_mut()
            .insert("content-type", HeaderValue::from_static("application/json"));
    }
    for (name, value) in headers {
        match (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) {
            (Ok(name), Ok(value)) => {
                response.headers_mut().append(name, value);
            }
            _ => eprintln!("mockllm: skipping a scripted header that is not valid: {name}"),
        }
    }
    response
}

async fn handle(
    shared: Shared,
    format: Format,
    path_model: Option<String>,
    uri: Uri,
    headers: HeaderMap,
    query: Q,
    raw: Bytes,
) -> Response {
    let parsed: Result<Value, String> = serde_json::from_slice(&raw).map_err(|e| e.to_string());
    let incoming = Incoming {
        format,
        headers: &headers,
        query: &query,
        body: parsed.as_ref().map_err(String::as_str),
    };
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string());
    let recorded_headers = headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = parsed.clone().unwrap_or(Value::Null);

    // Check, record and take the reply under one lock, so that requests and replies pair in
    // arrival order.
    let (reply, id_n) = {
        let mut state = lock(&shared);
        let verdict = check(&incoming, state.key.as_deref());
        let (reply, violation) = match verdict {
            Err(rejection) => (
                Err((rejection.status, rejection.body)),
                Some(rejection.violation),
            ),
            Ok(()) => match state.queues.get_mut(&format).and_then(|q| q.pop_front()) {
                Some(reply) => (Ok(reply), None),
                None => {
                    let violation =
                        format!("mockllm.no_reply: no scripted reply is left for {format}");
                    let body = errors::body(format, 400, &format!("mockllm: {violation}"));
                    (Err((400, body)), Some(violation))
                }
            },
        };
        state.requests.push(Recorded {
            format,
            path,
            headers: recorded_headers,
            body: body.clone(),
            violation,
        });
        state.ids += 1;
        (reply, state.ids)
    };

    match reply {
        Err((status, body)) => plain_response(status, &[], body.to_string()),
        Ok(Reply::Status {
            status,
            headers,
            body,
        }) => plain_response(status, &headers, body),
        Ok(Reply::Recorded { chunks }) => {
            let planned = chunks
                .into_iter()
                .map(|c| Frame::Send(Bytes::from(c)))
                .collect();
            stream_response(planned, 0)
        }
        Ok(Reply::LongEvent {
            head,
            fill_bytes,
            tail,
        }) => {
            let planned = vec![
                Frame::Send(Bytes::from(head)),
                Frame::Fill { bytes: fill_bytes },
                Frame::Send(Bytes::from(tail)),
            ];
            stream_response(planned, 0)
        }
        Ok(Reply::ContextOverflow { in_stream: false }) => {
            let (status, body) = errors::context_overflow(format);
            plain_response(status, &[], body.to_string())
        }
        Ok(Reply::ContextOverflow { in_stream: true }) => {
            let ctx = context(format, path_model, &body, "", id_n);
            match failed_frames(format, &ctx) {
                Ok(planned) => stream_response(planned, 0),
                Err(e) => {
                    let message = format!("mockllm: the script cannot be sent: {e}");
                    let body = errors::body(format, 500, &message);
                    plain_response(500, &[], body.to_string())
                }
            }
        }
        Ok(Reply::Answer(answer)) => {
            let ctx = context(format, path_model, &body, &answer.response_id, id_n);
            let planned = match frames(format, &answer, &ctx) {
                Ok(planned) => planned,
                Err(e) => {
                    let message = format!("mockllm: the script cannot be sent: {e}");
                    let body = errors::body(format, 500, &message);
                    return plain_response(500, &[], body.to_string());
                }
            };
            let faults = &answer.faults;
            if faults.first_byte_delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(faults.first_byte_delay_ms)).await;
            }
            stream_response(planned, faults.chunk_delay_ms)
        }
    }
}

/// What the stream needs from the request.
fn context(
    format: Format,
    path_model: Option<String>,
    body: &Value,
    scripted_id: &str,
    id_n: u64,
) -> Ctx {
    let model = path_model
        .or_else(|| body.get("model").and_then(Value::as_str).map(String::from))
        .unwrap_or_default();
    let response_id = if scripted_id.is_empty() {
        match format {
            Format::OpenAiChat => format!("chatcmpl-mock{id_n}"),
            Format::OpenAiResponses => format!("resp_mock{id_n}"),
            Format::Anthropic => format!("msg_mock{id_n}"),
            Format::Gemini => format!("mock{id_n}"),
        }
    } else {
        scripted_id.to_string()
    };
    let include_usage = body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let encrypted_reasoning = body
        .get("include")
        .and_then(Value::as_array)
        .is_some_and(|i| {
            i.iter()
                .any(|v| v.as_str() == Some("reasoning.encrypted_content"))
        });
    let include_thoughts = body
        .pointer("/generationConfig/thinkingConfig/includeThoughts")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let created_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Ctx {
        model,
        response_id,
        created_s,
        include_usage,
        encrypted_reasoning,
        include_thoughts,
    }
}

/// Streams `planned` as the response body, `chunk_delay_ms` before each frame after the
/// first. A cut ends the body with an error, which makes hyper drop the connection without
/// the chunked body's end; a hang waits until the client is gone.
fn stream_response(planned: Vec<Frame>, chunk_delay_ms: u64) -> Response {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    tokio::spawn(async move {
        for (n, frame) in planned.into_iter().enumerate() {
            if n > 0 && chunk_delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(chunk_delay_ms)).await;
            }
            match frame {
                Frame::Send(bytes) => {
                    if tx.send(Ok(bytes)).await.is_err() {
                        return; // the client went away
                    }
                }
                Frame::Cut(bytes) => {
                    if !bytes.is_empty() && tx.send(Ok(bytes)).await.is_err() {
                        return;
                    }
                    // Let hyper write out what it has before the error drops the connection.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let cut = std::io::Error::other("mockllm: connection cut (scripted fault)");
                    let _ = tx.send(Err(cut)).await;
                    return;
                }
                Frame::Hang => {
                    tx.closed().await;
                    return;
                }
                Frame::Fill { bytes } => {
                    let piece = Bytes::from(vec![b'a'; 64 * 1024]);
                    let mut left = bytes;
                    while left > 0 {
                        let n = left.min(piece.len() as u64);
                        // `n` is at most the piece's length, a usize.
                        if tx.send(Ok(piece.slice(..n as usize))).await.is_err() {
                            return;
                        }
                        left -= n;
                    }
                }
                Frame::Repeat { bytes, every_ms } => loop {
                    tokio::time::sleep(Duration::from_millis(every_ms)).await;
                    if tx.send(Ok(bytes.clone())).await.is_err() {
                        return;
                    }
                },
            }
        }
    });
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let mut response = Response::new(Body::from_stream(body));
    response.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    response
        .headers_mut()
        .insert("cache-control", HeaderValue::from_static("no-cache"));
    response
}
