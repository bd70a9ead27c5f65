//! From response bytes to [`ModelEvent`]s: `eventsource-stream` cuts the bytes into SSE events,
//! a provider's [`Decoder`] turns each event's data into model events, and this module drives
//! the two and reads their failures: a broken connection or a stream that ends before the
//! provider's last event is a transport error, an event that is not what the provider sends is
//! malformed.

use std::collections::VecDeque;
use std::fmt;

use bytes::{Buf, Bytes, BytesMut};
use eventsource_stream::{EventStream, EventStreamError};
use futures_util::stream::{self, Stream, StreamExt};
use runtime::model::{ModelError, ModelErrorKind, ModelEvent, ModelStream};

use history::providers::Format;

use crate::http::status_kind;
use crate::secret::Secret;

/// The bytes of whole lines handed to the SSE parser in one piece (a longer line goes alone).
/// `eventsource-stream` scans an unfinished line again from its start each time a piece comes
/// (a line of n bytes in pieces of p costs about n²/p) and copies the rest of its buffer after
/// every line it reads (a piece of n bytes costs about n²/line): so it is given only whole
/// lines, a few at a time, and a line as long as a call's arguments (Gemini sends each call on
/// one `data:` line) is scanned once.
const PIECE_BYTES_MAX: usize = 2048;

/// The data of an event that is not what the provider sends is quoted up to this many bytes.
const QUOTED_DATA_BYTES_MAX: usize = 200;

/// What a stream that ends before its provider's last event says (the loop records the
/// response as interrupted).
pub(crate) const CUT_SHORT: &str = "the stream ended before the response was complete";

/// Whether the response goes on after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// More events follow.
    More,
    /// That was the provider's last event: [`ModelEvent::Stop`] has been put out.
    Done,
}

/// Why a decoder cannot go on.
#[derive(Debug)]
pub(crate) enum DecodeError {
    /// The event is not what the provider sends (named with the event by the driver).
    Shape(String),
    /// The provider reported an error in the stream.
    Model(ModelError),
}

impl DecodeError {
    /// [`DecodeError::Shape`] from anything printable (a serde error, a sentence).
    pub fn shape(what: impl fmt::Display) -> DecodeError {
        DecodeError::Shape(what.to_string())
    }
}

/// One provider's reading of its events.
pub(crate) trait Decoder: Send {
    /// The provider, as errors name it.
    fn provider(&self) -> &'static str;

    /// Reads one event (`name` is `message` where the stream names none), pushing what it
    /// says to `out`.
    fn event(
        &mut self,
        name: &str,
        data: &str,
        out: &mut Vec<ModelEvent>,
    ) -> Result<Step, DecodeError>;

    /// The stream ended before [`Step::Done`]: a provider whose last event is the end of the
    /// stream itself finishes here; for the others it is a stream cut short.
    fn end(&mut self, _out: &mut Vec<ModelEvent>) -> Result<(), DecodeError> {
        Err(DecodeError::Model(cut_short()))
    }
}

/// The transport error of a stream cut short.
pub(crate) fn cut_short() -> ModelError {
    ModelError {
        kind: ModelErrorKind::Transport,
        status: None,
        retry_after_ms: None,
        message: CUT_SHORT.to_string(),
    }
}

/// `bytes` cut again into pieces that each end at the end of a line (`\n`, `\r\n` or `\r`),
/// holding whole lines up to [`PIECE_BYTES_MAX`] bytes, or one longer line; the bytes after the
/// last line end come last, when `bytes` ends. Pieces are slices of the chunks, copied only when
/// a line spans chunks. A failure of `bytes` is passed on after the whole lines before it.
fn pieces<'a, S>(bytes: S) -> impl Stream<Item = Result<Bytes, ModelError>> + Send + 'a
where
    S: Stream<Item = Result<Bytes, ModelError>> + Send + 'a,
{
    let state = (Box::pin(bytes), Lines::default(), VecDeque::new(), false);
    stream::unfold(
        state,
        |(mut bytes, mut lines, mut ready, mut ended)| async move {
            loop {
                if let Some(item) = ready.pop_front() {
                    return Some((item, (bytes, lines, ready, ended)));
                }
                if ended {
                    return None;
                }
                match bytes.next().await {
                    Some(Ok(chunk)) => lines.push(chunk, &mut ready),
                    Some(Err(e)) => {
                        // Nothing is read after a failure: the line it broke is left unfinished.
                        ready.push_back(Err(e));
                        ended = true;
                    }
                    None => {
                        if let Some(rest) = lines.rest() {
                            ready.push_back(Ok(rest));
                        }
                        ended = true;
                    }
                }
            }
        },
    )
}

/// Cuts chunks into pieces of whole lines (see [`pieces`]).
#[derive(Default)]
struct Lines {
    /// The start of a line that has not ended yet.
    carry: BytesMut,
}

impl Lines {
    /// Queues the pieces of whole lines `chunk` ends; keeps the rest.
    fn push(&mut self, mut chunk: Bytes, out: &mut VecDeque<Result<Bytes, ModelError>>) {
        if !self.carry.is_empty() {
            match line_end(&chunk) {
                Some(end) => {
                    self.carry.extend_from_slice(&chunk[..end]);
                    out.push_back(Ok(self.carry.split().freeze()));
                    chunk.advance(end);
                }
                None => {
                    self.carry.extend_from_slice(&chunk);
                    return;
                }
            }
        }
        // Each piece: the whole lines in the first PIECE_BYTES_MAX bytes (found from the back,
        // so that only the last line is scanned), else the one longer line.
        loop {
            let window = &chunk[..chunk.len().min(PIECE_BYTES_MAX)];
            let end = match window.iter().rposition(|&b| b == b'\n' || b == b'\r') {
                Some(at) if chunk[at] == b'\r' && chunk.get(at + 1) == Some(&b'\n') => at + 2,
                Some(at) => at + 1,
                None => match line_end(&chunk[window.len()..]) {
                    Some(len) => window.len() + len,
                    None => break,
                },
            };
            out.push_back(Ok(chunk.split_to(end)));
        }
        self.carry.extend_from_slice(&chunk);
    }

    /// The bytes after the last line end, if any (the stream has ended).
    fn rest(&mut self) -> Option<Bytes> {
        (!self.carry.is_empty()).then(|| self.carry.split().freeze())
    }
}

/// The length of `bytes`' first line, its end included: up to a `\n`, a `\r\n`, or a `\r`
/// that is not followed by `\n` (one that ends `bytes` too: a `\n` in the next chunk is then a
/// line end of its own, which the SSE parser reads together with the `\r`).
fn line_end(bytes: &[u8]) -> Option<usize> {
    let at = bytes.iter().position(|&b| b == b'\n' || b == b'\r')?;
    if bytes[at] == b'\r' && bytes.get(at + 1) == Some(&b'\n') {
        Some(at + 2)
    } else {
        Some(at + 1)
    }
}

struct Drive<S, D> {
    events: EventStream<S>,
    decoder: D,
    /// What is decoded and not yet handed out.
    pending: VecDeque<Result<ModelEvent, ModelError>>,
    /// What the decoder puts out for one event (kept, so as not to allocate one per event).
    out: Vec<ModelEvent>,
    /// Nothing more is read once the last event, an error or the end has come.
    over: bool,
    /// Events read so far, to name the one that is malformed.
    count: u64,
    /// Redacted from an event's data before it is quoted.
    key: Secret,
}

/// The model events `decoder` reads from `bytes`: ends after [`ModelEvent::Stop`] or the first
/// error.
pub(crate) fn drive<'a, S, D>(decoder: D, bytes: S, key: Secret) -> ModelStream<'a>
where
    S: Stream<Item = Result<Bytes, ModelError>> + Send + 'a,
    D: Decoder + 'a,
{
    let state = Drive {
        events: EventStream::new(Box::pin(pieces(bytes))),
        decoder,
        pending: VecDeque::new(),
        out: Vec::new(),
        over: false,
        count: 0,
        key,
    };
    stream::unfold(state, |mut st| async move {
        loop {
            if let Some(item) = st.pending.pop_front() {
                return Some((item, st));
            }
            if st.over {
                return None;
            }
            let result = match st.events.next().await {
                Some(Ok(event)) => {
                    st.count += 1;
                    match st.decoder.event(&event.event, &event.data, &mut st.out) {
                        // An event that says nothing kept (a ping, reasoning not shown) still
                        // shows the stream is alive: the loop's idle timer counts it.
                        Ok(Step::More) if st.out.is_empty() => {
                            st.out.push(ModelEvent::KeepAlive);
                            Ok(())
                        }
                        Ok(Step::More) => Ok(()),
                        Ok(Step::Done) => {
                            st.over = true;
                            Ok(())
                        }
                        Err(e) => Err(named(&st, e, &event.event, &event.data)),
                    }
                }
                Some(Err(EventStreamError::Transport(e))) => Err(e),
                // Only the stream's end can leave a character unfinished: it was cut short.
                Some(Err(EventStreamError::Utf8(e))) if e.utf8_error().error_len().is_none() => {
                    Err(cut_short())
                }
                Some(Err(EventStreamError::Utf8(e))) => Err(malformed(format!(
                    "{}: the stream is not UTF-8 text: {e}",
                    st.decoder.provider()
                ))),
                Some(Err(EventStreamError::Parser(e))) => Err(malformed(format!(
                    "{}: the stream is not server-sent events: {e:?}",
                    st.decoder.provider()
                ))),
                None => {
                    st.over = true;
                    st.decoder
                        .end(&mut st.out)
                        .map_err(|e| named(&st, e, "(end of stream)", ""))
                }
            };
            st.pending.extend(st.out.drain(..).map(Ok));
            if let Err(e) = result {
                st.over = true;
                st.pending.push_back(Err(e));
            }
        }
    })
    .boxed()
}

/// A decoder's error as the stream reports it: a shape error names the provider, the event's
/// number and name, and quotes its data.
fn named<S, D: Decoder>(
    st: &Drive<S, D>,
    error: DecodeError,
    name: &str,
    data: &str,
) -> ModelError {
    match error {
        DecodeError::Model(e) => e,
        DecodeError::Shape(what) => malformed(format!(
            "{}: event {} (`{name}`) is not what the provider sends: {what}; data: {}",
            st.decoder.provider(),
            st.count,
            st.key.quote(data, QUOTED_DATA_BYTES_MAX)
        )),
    }
}

fn malformed(message: String) -> ModelError {
    ModelError {
        kind: ModelErrorKind::Malformed,
        status: None,
        retry_after_ms: None,
        message,
    }
}

/// A provider's error reported inside a stream, with the HTTP status the same error has as a
/// response (so that [`ModelError::retryable`] reads it alike).
pub(crate) fn stream_error(status: u16, message: String) -> DecodeError {
    DecodeError::Model(ModelError {
        kind: ModelErrorKind::Status,
        status: Some(status),
        retry_after_ms: None,
        message,
    })
}

/// [`stream_error`] for an error the provider describes: `body` is it in the shape `format`
/// answers it with as a response (`{"error": {...}}`), so that a context overflow reads as one
/// whether it came as a response or in the stream ([`crate::http::status_kind`]).
pub(crate) fn provider_error(
    format: Format,
    status: u16,
    body: &serde_json::Value,
    message: String,
) -> DecodeError {
    DecodeError::Model(ModelError {
        kind: status_kind(format, status, Some(body)),
        status: Some(status),
        retry_after_ms: None,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn cut(chunks: Vec<Result<Bytes, ModelError>>) -> Vec<Result<Bytes, ModelError>> {
        pieces(stream::iter(chunks)).collect().await
    }

    fn ok(piece: &Result<Bytes, ModelError>) -> &[u8] {
        piece.as_ref().expect("no error given")
    }

    #[tokio::test]
    async fn pieces_are_whole_lines_in_order() {
        let long = format!("data: {}\r\n", "x".repeat(PIECE_BYTES_MAX * 3));
        let short = "event: e\ndata: 1\n\n".repeat(300);
        let all = format!("{short}{long}\r\n{short}data: tail");
        // Chunks of 1000 bytes, and a cut between the long line's `\r` and `\n`: lines span
        // chunks.
        let bytes = Bytes::from(all.clone());
        let crlf = short.len() + long.len() - 1;
        let mut cuts: Vec<usize> = (0..bytes.len()).step_by(1000).collect();
        cuts.push(crlf);
        cuts.push(bytes.len());
        cuts.sort_unstable();
        let chunks = cuts
            .windows(2)
            .map(|w| Ok(bytes.slice(w[0]..w[1])))
            .collect();
        let out = cut(chunks).await;
        assert_eq!(
            out.iter().map(ok).collect::<Vec<_>>().concat(),
            all.as_bytes()
        );
        let (last, whole) = out.split_last().expect("pieces");
        assert_eq!(ok(last), b"data: tail");
        for piece in whole {
            let piece = ok(piece);
            assert!(matches!(piece.last(), Some(b'\n' | b'\r')), "ends a line");
            assert!(
                piece.len() <= PIECE_BYTES_MAX || line_end(piece) == Some(piece.len()),
                "a piece over the limit is one line"
            );
        }
        // The long line comes whole but for its `\n`, cut off by the chunk's end.
        assert!(whole
            .iter()
            .any(|p| ok(p) == &long.as_bytes()[..long.len() - 1]));
    }

    #[tokio::test]
    async fn pieces_of_small_chunks_join_their_lines() {
        let all = "data: {\"a\": 1}\n\ndata: {\"b\": 2}\n\n";
        let chunks = all
            .as_bytes()
            .chunks(3)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let out = cut(chunks).await;
        let lines: Vec<&[u8]> = out.iter().map(ok).collect();
        let want: Vec<&[u8]> = vec![b"data: {\"a\": 1}\n", b"\n", b"data: {\"b\": 2}\n", b"\n"];
        assert_eq!(lines, want);
    }

    #[tokio::test]
    async fn a_failure_comes_after_the_whole_lines_before_it() {
        let out = cut(vec![
            Ok(Bytes::from_static(b"data: a\n\ndata: b")),
            Err(cut_short()),
            Ok(Bytes::from_static(b"\n\n")),
        ])
        .await;
        assert_eq!(out.len(), 2);
        assert_eq!(ok(&out[0]), b"data: a\n\n");
        assert_eq!(
            out[1].as_ref().map_err(|e| e.message.as_str()),
            Err(CUT_SHORT)
        );
    }
}
