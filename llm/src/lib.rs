//! tooljournal's model adapters: the runtime's [`Model`] seam spoken over HTTP to OpenAI Chat
//! Completions (and every server that copies it: vLLM, Ollama, LiteLLM, OpenRouter), OpenAI
//! Responses, Anthropic Messages and Gemini, all streamed.
//!
//! An adapter sends one request and decodes one stream: text deltas as they come, tool calls
//! begun / argument deltas / ended (arguments byte for byte as the model wrote them), usage,
//! the response's id, the state the provider wants back (reasoning, signatures) and the stop
//! reason. Retries, backoff, the attempt's deadline, the user's stop and journaling are the
//! agent loop's; an adapter says what failed ([`ModelError`]: transport, HTTP status with
//! `Retry-After`, a context overflow by each provider's code or words, malformed answer,
//! configuration) and never names the key.
//!
//! - [`config`]: `PROVIDER:MODEL` specs, keys and base URLs from the environment, [`Secret`];
//! - [`connect`]: a [`ModelConfig`] to a [`Model`];
//! - [`decode`]: a response's bytes to its events, for any byte stream (a recording, a bench).
//!
//! ```no_run
//! # async fn run(request: events::model::ModelRequest) -> Result<(), Box<dyn std::error::Error>> {
//! use futures_util::StreamExt;
//! use tooljournal_llm::{connect, ModelConfig};
//!
//! // OPENAI_API_KEY (and OPENAI_BASE_URL, for a local server) from the environment.
//! let config = ModelConfig::from_env("openai-chat:gpt-4.1-mini", None)?;
//! let mut model = connect(config)?;
//! let body = model.body(&request)?;
//! let mut events = model.send(body).await?;
//! while let Some(event) = events.next().await {
//!     println!("{:?}", event?);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Decoding needs no network:
//!
//! ```
//! use futures_util::{stream, StreamExt};
//! use events::event::StopReason;
//! use events::model::ModelEvent;
//! use tooljournal_llm::{decode, Format};
//!
//! let sse = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n\
//!            data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
//!            data: [DONE]\n\n";
//! let bytes = stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from(sse))]);
//! let rt = tokio::runtime::Builder::new_current_thread().build()?;
//! let events: Vec<_> = rt.block_on(decode(Format::OpenAiChat, bytes).collect());
//! assert_eq!(events, vec![
//!     Ok(ModelEvent::TextDelta("hi".into())),
//!     // The finish reason's chunk says nothing kept yet: the stream is alive.
//!     Ok(ModelEvent::KeepAlive),
//!     Ok(ModelEvent::Stop(StopReason::EndTurn)),
//! ]);
//! # Ok::<(), std::io::Error>(())
//! ```

#![warn(missing_docs)]

mod adapter;
mod anthropic;
pub mod config;
mod gemini;
mod http;
mod openai_chat;
mod openai_responses;
pub mod secret;
mod sse;
pub mod windows;

use std::fmt;

use bytes::Bytes;
use events::model::{Model, ModelError, ModelErrorKind, ModelStream};
use futures_util::stream::{Stream, TryStreamExt};

pub use adapter::request_body;
pub use config::{parse_spec, ConfigError, ModelConfig, Secret};
pub use history::providers::Format;

/// A model reached as `config` says: the URL, headers and HTTP client are made here, so that a
/// bad base URL or key fails now rather than at the first request. Needs no async runtime;
/// [`Model::send`] runs on Tokio.
pub fn connect(config: ModelConfig) -> Result<Box<dyn Model>, ConfigError> {
    Ok(Box::new(adapter::HttpModel::new(config)?))
}

/// The events `format`'s response stream `bytes` says, in order, ending with
/// [`events::model::ModelEvent::Stop`] or an error: a failure of `bytes` itself, or a stream
/// that ends before the provider's last event, is a transport error; an event the provider
/// does not send is malformed.
pub fn decode<'a, S, E>(format: Format, bytes: S) -> ModelStream<'a>
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'a,
    E: fmt::Display + Send + 'a,
{
    decode_stream(
        format,
        bytes.map_err(|e| ModelError {
            kind: ModelErrorKind::Transport,
            status: None,
            retry_after_ms: None,
            message: format!("the response stream broke: {e}"),
        }),
        Secret::default(),
        sse::Bounds::default(),
    )
}

/// [`decode`] of a stream whose failures are already model errors.
/// `key` is redacted from every event the stream quotes, before the quote is cut.
pub(crate) fn decode_stream<'a, S>(
    format: Format,
    bytes: S,
    key: Secret,
    bounds: sse::Bounds,
) -> ModelStream<'a>
where
    S: Stream<Item = Result<Bytes, ModelError>> + Send + 'a,
{
    match format {
        Format::OpenAiChat => sse::drive(openai_chat::ChatDecoder::default(), bytes, key, bounds),
        Format::OpenAiResponses => sse::drive(
            openai_responses::ResponsesDecoder::default(),
            bytes,
            key,
            bounds,
        ),
        Format::Anthropic => sse::drive(anthropic::AnthropicDecoder::default(), bytes, key, bounds),
        Format::Gemini => sse::drive(gemini::GeminiDecoder::default(), bytes, key, bounds),
    }
}
