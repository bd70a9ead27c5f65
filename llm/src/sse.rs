//! From response bytes to [`ModelEvent`]s: `eventsource-stream` cuts the bytes into SSE events,
//! a provider's [`Decoder`] turns each event's data into model events, and this module drives
//! the two and reads their failures: a broken connection or a stream that ends before the
//! provider's last event is a transport error, an event that is not what the provider sends is
//! malformed.

use std::collections::VecDeque;
use std::fmt;

use bytes::Bytes;
use eventsource_stream::{EventStream, EventStreamError};
use futures_util::stream::{self, Stream, StreamExt};
use runtime::model::{ModelError, ModelErrorKind, ModelEvent, ModelStream};

use crate::http::cut;

/// The bytes of one piece handed to the SSE parser. `eventsource-stream` copies the rest of its
/// buffer after every line it reads, so a piece of n bytes costs about n²/line; reqwest's
/// pieces are a few KiB, but a recorded stream handed over whole would take quadratic time.
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

/// `bytes` in pieces of at most [`PIECE_BYTES_MAX`] (a cheap slice of each, no copy).
fn pieces<'a, S>(bytes: S) -> impl Stream<Item = Result<Bytes, ModelError>> + Send + 'a
where
    S: Stream<Item = Result<Bytes, ModelError>> + Send + 'a,
{
    bytes.flat_map(|item| {
        let items: Vec<Result<Bytes, ModelError>> = match item {
            Ok(chunk) => (0..chunk.len())
                .step_by(PIECE_BYTES_MAX)
                .map(|at| Ok(chunk.slice(at..chunk.len().min(at + PIECE_BYTES_MAX))))
                .collect(),
            Err(e) => vec![Err(e)],
        };
        stream::iter(items)
    })
}

struct Drive<S, D> {
    events: EventStream<S>,
    decoder: D,
    /// What is decoded and not yet handed out.
    pending: VecDeque<Result<ModelEvent, ModelError>>,
    /// Nothing more is read once the last event, an error or the end has come.
    over: bool,
    /// Events read so far, to name the one that is malformed.
    count: u64,
}

/// The model events `decoder` reads from `bytes`: ends after [`ModelEvent::Stop`] or the first
/// error.
pub(crate) fn drive<'a, S, D>(decoder: D, bytes: S) -> ModelStream<'a>
where
    S: Stream<Item = Result<Bytes, ModelError>> + Send + 'a,
    D: Decoder + 'a,
{
    let state = Drive {
        events: EventStream::new(Box::pin(pieces(bytes))),
        decoder,
        pending: VecDeque::new(),
        over: false,
        count: 0,
    };
    stream::unfold(state, |mut st| async move {
        loop {
            if let Some(item) = st.pending.pop_front() {
                return Some((item, st));
            }
            if st.over {
                return None;
            }
            let mut out = Vec::new();
            let result = match st.events.next().await {
                Some(Ok(event)) => {
                    st.count += 1;
                    match st.decoder.event(&event.event, &event.data, &mut out) {
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
                        .end(&mut out)
                        .map_err(|e| named(&st, e, "(end of stream)", ""))
                }
            };
            st.pending.extend(out.into_iter().map(Ok));
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
            cut(data, QUOTED_DATA_BYTES_MAX)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pieces_are_small_slices_in_order() {
        let big = Bytes::from(vec![7u8; PIECE_BYTES_MAX * 3 + 5]);
        let small = Bytes::from_static(b"abc");
        let input = stream::iter(vec![Ok(big.clone()), Ok(small.clone())]);
        let out: Vec<Bytes> = pieces(input)
            .map(|r| r.expect("no error given"))
            .collect()
            .await;
        let sizes: Vec<usize> = out.iter().map(Bytes::len).collect();
        assert_eq!(
            sizes,
            vec![PIECE_BYTES_MAX, PIECE_BYTES_MAX, PIECE_BYTES_MAX, 5, 3]
        );
        assert_eq!(out.concat(), [big.to_vec(), small.to_vec()].concat());
    }
}
