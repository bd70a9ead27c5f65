//! The one [`Model`] every provider is: its URL and headers fixed at [`crate::connect`], its
//! body the history crate's request body plus the model and streaming fields, its answer
//! decoded by the provider's decoder.

use std::collections::BTreeMap;
use std::fmt;

use events::model::{Model, ModelError, ModelErrorKind, ModelRequest, ModelStream};
use futures_util::future::BoxFuture;
use futures_util::{StreamExt, TryStreamExt};
use history::providers::Format;
use reqwest::header::HeaderMap;
use reqwest::{Client, Url};
use serde_json::json;
use serde_json::value::{to_raw_value, RawValue};

use crate::config::{default_base_url, ConfigError, ModelConfig, Secret};
use crate::http;

/// A provider's API over HTTP.
pub(crate) struct HttpModel {
    format: Format,
    model: String,
    /// The configured base URL when it is not the provider's own and holds no credentials.
    journaled_base_url: Option<String>,
    url: Url,
    headers: HeaderMap,
    client: Client,
    key: Secret,
    bounds: crate::sse::Bounds,
}

impl fmt::Debug for HttpModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpModel")
            .field("format", &self.format)
            .field("model", &self.model)
            .field("url", &http::shown(&self.url))
            .finish_non_exhaustive()
    }
}

impl HttpModel {
    pub(crate) fn new(config: ModelConfig) -> Result<HttpModel, ConfigError> {
        let format = config.format;
        let url = endpoint(format, config.base_url(), &config.model)?;
        Ok(HttpModel {
            journaled_base_url: journaled_base_url(&config),
            format,
            headers: http::headers(format, config.api_key.expose())?,
            client: http::client(&config)?,
            url,
            bounds: crate::sse::Bounds {
                event_bytes_max: config.event_bytes_max,
                response_bytes_max: config.response_bytes_max,
            },
            model: config.model,
            key: config.api_key,
        })
    }
}

/// The base URL worth journaling: the configured one when it is not the provider's own, and
/// only when it holds no user or password (a URL that does is a credential).
fn journaled_base_url(config: &ModelConfig) -> Option<String> {
    let base = config.base_url.as_deref()?;
    if base.trim_end_matches('/') == default_base_url(config.format).trim_end_matches('/') {
        return None;
    }
    let url = Url::parse(base).ok()?;
    (url.username().is_empty() && url.password().is_none()).then(|| base.to_owned())
}

/// `base` as an error may show it: a user and password in it are left out.
fn without_credentials(base: &str) -> String {
    match Url::parse(base) {
        Ok(mut url) if !url.username().is_empty() || url.password().is_some() => {
            // Cannot fail for a URL that has a user or password: it has a host.
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.to_string()
        }
        _ => base.to_string(),
    }
}

/// The request URL: the base URL with the provider's path added (Gemini's names the model).
fn endpoint(format: Format, base: &str, model: &str) -> Result<Url, ConfigError> {
    let bad = |reason: &str| ConfigError::BadBaseUrl {
        format,
        url: without_credentials(base),
        reason: reason.to_string(),
    };
    let mut url = Url::parse(base).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("not an http or https URL"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("a base URL takes no query or fragment"));
    }
    let gemini_model = model.strip_prefix("models/").unwrap_or(model);
    if format == Format::Gemini && (gemini_model.contains('/') || gemini_model.is_empty()) {
        return Err(ConfigError::BadModel {
            format,
            model: model.to_string(),
            reason: "a Gemini model name is one path segment".to_string(),
        });
    }
    {
        let mut path = url
            .path_segments_mut()
            .map_err(|_| bad("a base URL must be able to take a path"))?;
        path.pop_if_empty();
        match format {
            Format::OpenAiChat => {
                path.extend(["chat", "completions"]);
            }
            Format::OpenAiResponses => {
                path.push("responses");
            }
            Format::Anthropic => {
                path.extend(["v1", "messages"]);
            }
            Format::Gemini => {
                path.extend([
                    "v1beta",
                    "models",
                    &format!("{gemini_model}:streamGenerateContent"),
                ]);
            }
        }
    }
    if format == Format::Gemini {
        url.set_query(Some("alt=sse"));
    }
    Ok(url)
}

/// The body `format` sends for `request`: the history crate's request body with `model` (not
/// for Gemini, whose model is in the URL), `stream` and the provider's extras added.
///
/// The body's top-level fields are kept as raw JSON text ([`RawValue`]) and only the added
/// ones are serialized, so every argument object stays as the model wrote it, byte for byte
/// (a `Value` would round `1.0000000000000000001`). Top-level keys come out sorted.
pub fn request_body(
    format: Format,
    model: &str,
    request: &ModelRequest,
) -> Result<Vec<u8>, ModelError> {
    let text = history::providers::request_body(
        &request.conversation,
        &request.tools,
        &request.settings,
        format,
    )
    .to_json();
    let fail = |e: serde_json::Error| ModelError {
        kind: ModelErrorKind::Config,
        status: None,
        retry_after_ms: None,
        message: format!("{format}: the request body could not be built: {e}"),
    };
    let mut fields: BTreeMap<String, Box<RawValue>> = serde_json::from_str(&text).map_err(fail)?;
    let mut extras = vec![];
    match format {
        Format::OpenAiChat => {
            extras.push(("model", json!(model)));
            extras.push(("stream", json!(true)));
            extras.push(("stream_options", json!({ "include_usage": true })));
        }
        Format::OpenAiResponses => {
            extras.push(("model", json!(model)));
            extras.push(("stream", json!(true)));
            extras.push(("store", json!(false)));
            // With `store: false` a reasoning model's reasoning comes back only encrypted, and
            // must be sent back for the next step; models without reasoning refuse the field
            // ("Encrypted content is not supported with this model").
            if reasons(model) {
                extras.push(("include", json!(["reasoning.encrypted_content"])));
            }
        }
        Format::Anthropic => {
            extras.push(("model", json!(model)));
            extras.push(("stream", json!(true)));
        }
        Format::Gemini => {}
    }
    for (key, value) in extras {
        fields.insert(key.to_string(), to_raw_value(&value).map_err(fail)?);
    }
    serde_json::to_vec(&fields).map_err(fail)
}

/// Whether an OpenAI model name is a reasoning model's (o1, o3, o4-mini, gpt-5…, codex-…):
/// those take `include: ["reasoning.encrypted_content"]`, the others refuse it. A name this
/// does not know is taken as not reasoning: its reasoning, if any, is then not carried over
/// between steps, where the other guess would fail every request.
pub(crate) fn reasons(model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model);
    let o_series = name
        .strip_prefix('o')
        .is_some_and(|rest| rest.chars().next().is_some_and(|c| c.is_ascii_digit()));
    o_series || name.starts_with("gpt-5") || name.starts_with("codex")
}

impl Model for HttpModel {
    fn provider(&self) -> &str {
        self.format.as_str()
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn base_url(&self) -> Option<String> {
        self.journaled_base_url.clone()
    }

    fn body(&mut self, request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
        request_body(self.format, &self.model, request)
    }

    fn send(&mut self, body: Vec<u8>) -> BoxFuture<'_, Result<ModelStream<'_>, ModelError>> {
        Box::pin(async move {
            let key = self.key.clone();
            let redact = move |mut e: ModelError| {
                e.message = key.redact(&e.message);
                e
            };
            let response = http::post(
                &self.client,
                self.format,
                &self.url,
                &self.headers,
                body,
                &self.key,
            )
            .await
            .map_err(&redact)?;
            let url = self.url.clone();
            let bytes = response
                .bytes_stream()
                .map_err(move |e| http::transport_error(&url, &e));
            let events = crate::decode_stream(self.format, bytes, self.key.clone(), self.bounds)
                .map_err(redact);
            Ok(events.boxed())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_is_journaled_only_when_it_is_not_the_provider_s_and_holds_no_credentials() {
        let with = |url: Option<&str>| {
            let mut config =
                ModelConfig::new(Format::OpenAiChat, "m", crate::config::Secret::new("k"));
            config.base_url = url.map(str::to_owned);
            journaled_base_url(&config)
        };
        assert_eq!(with(None), None);
        assert_eq!(with(Some("https://api.openai.com/v1/")), None);
        assert_eq!(
            with(Some("http://localhost:11434/v1")),
            Some("http://localhost:11434/v1".into())
        );
        assert_eq!(with(Some("https://user:secret@proxy.example/v1")), None);
    }

    #[test]
    fn only_reasoning_models_are_asked_for_their_encrypted_reasoning() {
        for model in [
            "o1",
            "o3-mini",
            "o4-mini",
            "gpt-5",
            "gpt-5-codex",
            "codex-mini-latest",
        ] {
            assert!(reasons(model), "{model}");
        }
        for model in [
            "gpt-4.1-mini",
            "gpt-4o",
            "omni-moderation",
            "llama3.1:8b",
            "",
        ] {
            assert!(!reasons(model), "{model}");
        }
    }

    #[test]
    fn endpoints() {
        let url = |f, base, model| endpoint(f, base, model).map(|u| u.to_string());
        assert_eq!(
            url(Format::OpenAiChat, "https://api.openai.com/v1", "m").unwrap(),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(
            url(Format::OpenAiResponses, "http://127.0.0.1:8080/v1/", "m").unwrap(),
            "http://127.0.0.1:8080/v1/responses"
        );
        assert_eq!(
            url(Format::Anthropic, "https://api.anthropic.com", "m").unwrap(),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            url(Format::Gemini, "https://generativelanguage.googleapis.com", "models/gemini-2.5-flash")
                .unwrap(),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert!(matches!(
            url(Format::OpenAiChat, "ftp://x", "m"),
            Err(ConfigError::BadBaseUrl { .. })
        ));
        match url(
            Format::OpenAiChat,
            "ftp://user:hunter2@proxy.example/v1",
            "m",
        ) {
            Err(ConfigError::BadBaseUrl { url, .. }) => {
                assert!(
                    !url.contains("hunter2") && url.contains("proxy.example"),
                    "{url}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            url(Format::OpenAiChat, "not a url", "m"),
            Err(ConfigError::BadBaseUrl { .. })
        ));
        assert!(matches!(
            url(Format::Gemini, "https://g", "a/b"),
            Err(ConfigError::BadModel { .. })
        ));
    }
}
