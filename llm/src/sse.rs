//! From response bytes to [`ModelEvent`]s: `eventsource-stream` cuts the bytes into SSE events,
//! a provider's [`Decoder`] turns each event's data into model events, and this module drives
//! the two and reads their failures: a broken connection or a stream that ends before the
//! provider's last event is a transport error, an event that is not what the provider sends is
//! malformed.

use std::collections::VecDeque;
use std::fmt;

use bytes::{Bytes, BytesMut};
use events::model::{ModelError, ModelErrorKind, ModelEvent, ModelStream};
use eventsource_stream::{EventStream, EventStreamError};
use futures_util::stream::{self, Stream, StreamExt};

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

/// A chunk of an unfinished line this long or longer is kept as it came; shorter ones are
/// copied together into pieces of [`CARRY_SMALL_BYTES_MAX`] (a stream of tiny chunks would
/// otherwise cost a handle per chunk).
const CARRY_WHOLE_BYTES_MIN: usize = 4096;

/// See [`CARRY_WHOLE_BYTES_MIN`].
const CARRY_SMALL_BYTES_MAX: usize = 64 * 1024;

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
    pub(crate) fn shape(what: impl fmt::Display) -> DecodeError {
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
fn pieces<'a, S>(
    bytes: S,
    bounds: Bounds,
) -> impl Stream<Item = Result<Bytes, ModelError>> + Send + 'a
where
    S: Stream<Item = Result<Bytes, ModelError>> + Send + 'a,
{
    let state = (Box::pin(bytes), Lines::new(bounds), VecDeque::new(), false);
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
                    Some(Ok(chunk)) => {
                        if let Err(e) = lines.push(chunk, &mut ready) {
                            // Nothing more is read: the limit is the attempt's end.
                            ready.push_back(Err(e));
                            ended = true;
                        }
                    }
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

/// The most bytes a stream may bring: one event, and the whole response
/// ([`crate::ModelConfig::event_bytes_max`], [`crate::ModelConfig::response_bytes_max`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub event_bytes_max: u64,
    pub response_bytes_max: u64,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            event_bytes_max: crate::config::EVENT_BYTES_MAX_DEFAULT,
            response_bytes_max: crate::config::RESPONSE_BYTES_MAX_DEFAULT,
        }
    }
}

/// Cuts chunks into pieces of whole lines (see [`pieces`]), counting what they bring against
/// the [`Bounds`]: the SSE parser holds an event's lines until the blank line that ends it, so
/// an event is bounded here, before it is handed on.
struct Lines {
    /// The start of a line that has not ended yet, as the chunks brought it: joined once, when
    /// the line ends (a buffer grown chunk by chunk would double and copy its way up to the
    /// event's bound, holding twice what it keeps).
    carry: Vec<Bytes>,
    /// Short chunks of the line not yet ended, after those in `carry`.
    small: BytesMut,
    /// The bytes in `carry` and `small`.
    carry_bytes: u64,
    bounds: Bounds,
    /// Bytes of the event not yet ended, in the pieces handed on.
    event_bytes: u64,
    /// Bytes of the response so far.
    response_bytes: u64,
    /// The last piece ended with `\r`: a `\n` first in the next is the same line end.
    after_cr: bool,
}

impl Lines {
    fn new(bounds: Bounds) -> Lines {
        Lines {
            carry: Vec::new(),
            small: BytesMut::new(),
            carry_bytes: 0,
            bounds,
            event_bytes: 0,
            response_bytes: 0,
            after_cr: false,
        }
    }

    /// Queues the pieces of whole lines `chunk` ends; keeps the rest. Fails once the response
    /// or the event being read passes its bound (the pieces before are queued).
    fn push(
        &mut self,
        mut chunk: Bytes,
        out: &mut VecDeque<Result<Bytes, ModelError>>,
    ) -> Result<(), ModelError> {
        self.response_bytes = self.response_bytes.saturating_add(chunk.len() as u64);
        if self.response_bytes > self.bounds.response_bytes_max {
            return Err(too_large(
                "the response",
                "response_bytes_max",
                self.bounds.response_bytes_max,
            ));
        }
        if self.carry_bytes > 0 {
            match line_end(&chunk) {
                Some(end) => {
                    self.keep(chunk.split_to(end));
                    let piece = self.joined();
                    self.count(&piece)?;
                    out.push_back(Ok(piece));
                }
                None => {
                    self.keep(chunk);
                    return self.check_event(self.carry_bytes);
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
            let piece = chunk.split_to(end);
            self.count(&piece)?;
            out.push_back(Ok(piece));
        }
        self.keep(chunk);
        self.check_event(self.carry_bytes)
    }

    /// Keeps `bytes` as the start, or more, of a line not yet ended.
    fn keep(&mut self, bytes: Bytes) {
        self.carry_bytes += bytes.len() as u64;
        if bytes.len() >= CARRY_WHOLE_BYTES_MIN {
            self.keep_small();
            self.carry.push(bytes);
        } else {
            self.small.extend_from_slice(&bytes);
            if self.small.len() >= CARRY_SMALL_BYTES_MAX {
                self.keep_small();
            }
        }
    }

    /// Moves the short chunks into `carry`, as one piece.
    fn keep_small(&mut self) {
        if !self.small.is_empty() {
            self.carry.push(self.small.split().freeze());
        }
    }

    /// The kept bytes as one piece (no copy when one chunk holds them all).
    fn joined(&mut self) -> Bytes {
        self.keep_small();
        self.carry_bytes = 0;
        if self.carry.len() == 1 {
            return self.carry.pop().unwrap_or_default();
        }
        let mut joined = BytesMut::with_capacity(self.carry.iter().map(Bytes::len).sum());
        for bytes in self.carry.drain(..) {
            joined.extend_from_slice(&bytes);
        }
        joined.freeze()
    }

    /// Counts the lines of `piece` (whole lines) into the event they belong to: a blank line
    /// ends it.
    fn count(&mut self, piece: &[u8]) -> Result<(), ModelError> {
        let mut rest = piece;
        if self.after_cr && rest.first() == Some(&b'\n') {
            // The end of the last piece's last line, counted with it.
            rest = &rest[1..];
            if self.event_bytes > 0 {
                self.event_bytes += 1;
                self.check_event(0)?;
            }
        }
        while let Some(len) = line_end(rest) {
            let ending = if rest[..len].ends_with(b"\r\n") { 2 } else { 1 };
            if len == ending {
                self.event_bytes = 0;
            } else {
                self.event_bytes = self.event_bytes.saturating_add(len as u64);
                self.check_event(0)?;
            }
            rest = &rest[len..];
        }
        // Only the stream's end leaves bytes after the last line end; they are counted too.
        self.event_bytes = self.event_bytes.saturating_add(rest.len() as u64);
        self.after_cr = piece.last() == Some(&b'\r');
        self.check_event(0)
    }

    /// Fails when the event being read, with `more` bytes not yet handed on, passes its bound.
    fn check_event(&self, more: u64) -> Result<(), ModelError> {
        if self.event_bytes.saturating_add(more) > self.bounds.event_bytes_max {
            return Err(too_large(
                "one event of the response",
                "event_bytes_max",
                self.bounds.event_bytes_max,
            ));
        }
        Ok(())
    }

    /// The bytes after the last line end, if any (the stream has ended).
    fn rest(&mut self) -> Option<Bytes> {
        (self.carry_bytes > 0).then(|| self.joined())
    }
}

/// The failed attempt of a stream past one of its [`Bounds`]: not retried (the provider would
/// send the same again), and named by the `[model]` key that sets the bound.
fn too_large(what: &str, key: &str, max: u64) -> ModelError {
    malformed(format!(
        "{what} passed {max} bytes, the limit ([model] {key}); nothing more was read"
    ))
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
pub(crate) fn drive<'a, S, D>(decoder: D, bytes: S, key: Secret, bounds: Bounds) -> ModelStream<'a>
where
    S: Stream<Item = Result<Bytes, ModelError>> + Send + 'a,
    D: Decoder + 'a,
{
    let state = Drive {
        events: EventStream::new(Box::pin(pieces(bytes, bounds))),
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
        pieces(stream::iter(chunks), Bounds::default())
            .collect()
            .await
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

    /// For every cut of a stream into chunks (sizes 1 to 9 and larger, CR LF line ends cut
    /// between `\r` and `\n`), the largest event is refused by a bound one byte below its size
    /// and read whole by a bound of its size.
    #[tokio::test]
    async fn an_event_is_bounded_alike_however_the_stream_is_cut() {
        let small = "event: a\r\ndata: 1\r\n\r\n";
        // The largest event: a long line and ten short ones.
        let big = format!(
            "data: {}\r\n{}",
            "y".repeat(3000),
            "data: zz\r\n".repeat(10)
        );
        let big_bytes = big.len() as u64;
        let all = format!("{small}{big}\r\n{small}{small}");
        for size in (1..=9).chain([64, 2048, 5000]) {
            for (max, refused) in [(big_bytes - 1, true), (big_bytes, false)] {
                let bounds = Bounds {
                    event_bytes_max: max,
                    response_bytes_max: u64::MAX,
                };
                let chunks = all
                    .as_bytes()
                    .chunks(size)
                    .map(|c| Ok(Bytes::copy_from_slice(c)));
                let out: Vec<_> = pieces(stream::iter(chunks), bounds).collect().await;
                let failed = out.iter().any(|p| {
                    p.as_ref()
                        .is_err_and(|e| e.message.contains("[model] event_bytes_max"))
                });
                assert_eq!(failed, refused, "chunks of {size}, bound {max}");
            }
        }
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
