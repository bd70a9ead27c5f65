//! What an adapter needs to reach a model: the provider's format, the model's name, where the
//! API is, the key, and the two timeouts; read from a `PROVIDER:MODEL` string and the
//! environment as each provider's own SDK reads it.

use history::providers::Format;

/// How long a connection attempt may take, by default, in ms.
pub const CONNECT_TIMEOUT_MS_DEFAULT: u64 = 10_000;

/// How long a read may wait for the provider's next bytes, by default, in ms: ten minutes, the
/// OpenAI SDK's own default, since a reasoning model may think that long before it streams.
pub const REQUEST_TIMEOUT_MS_DEFAULT: u64 = 600_000;

/// The most bytes one server-sent event may hold, by default: the journal's record limit, since
/// no event larger than a record could be kept (Gemini sends a call's whole arguments in one).
pub const EVENT_BYTES_MAX_DEFAULT: u64 = 16 * 1024 * 1024;

/// The most bytes one response's stream may hold, by default: 128 MiB, four times what the
/// longest answer a model writes today (128k tokens, OpenAI's envelope of ~250 bytes around
/// each token's delta) takes on the wire.
pub const RESPONSE_BYTES_MAX_DEFAULT: u64 = 128 * 1024 * 1024;

pub use crate::secret::Secret;

/// Everything [`crate::connect`] needs.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// The provider's wire format.
    pub format: Format,
    /// The model's name at the provider (`gpt-4.1-mini`, `claude-sonnet-4-5`, …).
    pub model: String,
    /// The API's base URL; `None` for the provider's own ([`default_base_url`]).
    pub base_url: Option<String>,
    /// The API key.
    pub api_key: Secret,
    /// How long a read may wait for the provider's next bytes (the response's headers, then
    /// each piece of its stream), in ms. A stream that stalls longer fails as a transport
    /// error. The attempt as a whole has no deadline here: that is the agent loop's.
    pub request_timeout_ms: u64,
    /// How long connecting (TCP and TLS) may take, in ms.
    pub connect_timeout_ms: u64,
    /// The most bytes one event of the stream may hold (its lines up to the blank line that
    /// ends it); past it the attempt fails, naming the limit, and nothing more is read.
    pub event_bytes_max: u64,
    /// The most bytes one response's stream may hold, all events together; past it the
    /// attempt fails as for [`ModelConfig::event_bytes_max`].
    pub response_bytes_max: u64,
}

impl ModelConfig {
    /// A configuration with the provider's own base URL and the default timeouts.
    pub fn new(format: Format, model: impl Into<String>, api_key: Secret) -> ModelConfig {
        ModelConfig {
            format,
            model: model.into(),
            base_url: None,
            api_key,
            request_timeout_ms: REQUEST_TIMEOUT_MS_DEFAULT,
            connect_timeout_ms: CONNECT_TIMEOUT_MS_DEFAULT,
            event_bytes_max: EVENT_BYTES_MAX_DEFAULT,
            response_bytes_max: RESPONSE_BYTES_MAX_DEFAULT,
        }
    }

    /// `spec` (`PROVIDER:MODEL`) with its key and base URL read from the process environment,
    /// as [`ModelConfig::resolve`] describes.
    pub fn from_env(spec: &str, api_key_env: Option<&str>) -> Result<ModelConfig, ConfigError> {
        ModelConfig::resolve(spec, api_key_env, |name| std::env::var(name).ok())
    }

    /// `spec` (`PROVIDER:MODEL`, see [`parse_spec`]) with its key and base URL looked up with
    /// `env`, as the provider's SDK does it:
    /// - `openai-chat`, `openai-responses`: `OPENAI_API_KEY`, base URL `OPENAI_BASE_URL`;
    /// - `anthropic`: `ANTHROPIC_API_KEY`, base URL `ANTHROPIC_BASE_URL`;
    /// - `gemini`: `GOOGLE_API_KEY`, else `GEMINI_API_KEY` (google-genai prefers
    ///   `GOOGLE_API_KEY` when both are set), base URL `GOOGLE_GEMINI_BASE_URL`.
    ///
    /// `api_key_env` names another variable to take the key from instead (and only from it).
    /// An empty variable counts as unset. A missing key is [`ConfigError::MissingKey`], naming
    /// the variables looked at.
    pub fn resolve(
        spec: &str,
        api_key_env: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ModelConfig, ConfigError> {
        let (format, model) = parse_spec(spec)?;
        let set = |name: &str| env(name).filter(|v| !v.is_empty());
        let vars: Vec<&str> = match api_key_env {
            Some(name) => vec![name],
            None => key_vars(format).to_vec(),
        };
        let key =
            vars.iter()
                .find_map(|name| set(name))
                .ok_or_else(|| ConfigError::MissingKey {
                    format,
                    vars: vars.iter().map(|v| v.to_string()).collect(),
                })?;
        let mut config = ModelConfig::new(format, model, Secret::new(key));
        config.base_url = set(base_url_var(format));
        Ok(config)
    }

    /// The base URL requests go to: [`ModelConfig::base_url`] or the provider's own.
    pub fn base_url(&self) -> &str {
        self.base_url
            .as_deref()
            .unwrap_or_else(|| default_base_url(self.format))
    }
}

/// `PROVIDER:MODEL` split at its first `:` (a model name may hold more, as Ollama's
/// `llama3.1:8b`): the provider's format and the model's name.
pub fn parse_spec(spec: &str) -> Result<(Format, String), ConfigError> {
    let Some((provider, model)) = spec.split_once(':') else {
        return Err(ConfigError::NoProvider {
            spec: spec.to_string(),
        });
    };
    let format = provider
        .parse::<Format>()
        .map_err(|_| ConfigError::UnknownProvider {
            provider: provider.to_string(),
        })?;
    if model.trim().is_empty() {
        return Err(ConfigError::NoModel {
            spec: spec.to_string(),
        });
    }
    Ok((format, model.to_string()))
}

/// The variables a format's key is read from, in the order they are tried.
pub fn key_vars(format: Format) -> &'static [&'static str] {
    match format {
        Format::OpenAiChat | Format::OpenAiResponses => &["OPENAI_API_KEY"],
        Format::Anthropic => &["ANTHROPIC_API_KEY"],
        Format::Gemini => &["GOOGLE_API_KEY", "GEMINI_API_KEY"],
    }
}

/// The variable a format's base URL is read from.
pub fn base_url_var(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat | Format::OpenAiResponses => "OPENAI_BASE_URL",
        Format::Anthropic => "ANTHROPIC_BASE_URL",
        Format::Gemini => "GOOGLE_GEMINI_BASE_URL",
    }
}

/// The provider's own base URL.
pub fn default_base_url(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat | Format::OpenAiResponses => "https://api.openai.com/v1",
        Format::Anthropic => "https://api.anthropic.com",
        Format::Gemini => "https://generativelanguage.googleapis.com",
    }
}

const SPEC_HELP: &str =
    "expected PROVIDER:MODEL, PROVIDER one of openai-chat, openai-responses, anthropic, gemini \
     (e.g. openai-chat:gpt-4.1-mini, anthropic:claude-sonnet-4-5, gemini:gemini-2.5-flash)";

/// A model that cannot be reached as configured. Never holds the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The spec has no `PROVIDER:` part.
    #[error("`{spec}` names no provider ({SPEC_HELP})")]
    NoProvider {
        /// The spec as given.
        spec: String,
    },
    /// The provider is none of the four.
    #[error("unknown provider `{provider}` ({SPEC_HELP})")]
    UnknownProvider {
        /// The provider as given.
        provider: String,
    },
    /// The spec names no model after its `:`.
    #[error("`{spec}` names no model ({SPEC_HELP})")]
    NoModel {
        /// The spec as given.
        spec: String,
    },
    /// No variable holds a key.
    #[error("no API key for {format}: set {}", vars.join(" or "))]
    MissingKey {
        /// The format the key is for.
        format: Format,
        /// The variables looked at, in order.
        vars: Vec<String>,
    },
    /// The key cannot be sent in an HTTP header (a control character, a newline).
    #[error("the API key for {format} holds characters an HTTP header cannot carry")]
    BadKey {
        /// The format the key is for.
        format: Format,
    },
    /// The base URL is not an http(s) URL a path can be added to.
    #[error("bad base URL `{url}` for {format}: {reason}")]
    BadBaseUrl {
        /// The format it is for.
        format: Format,
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The model's name cannot be put in the request URL (Gemini's is in its path).
    #[error("bad model name `{model}` for {format}: {reason}")]
    BadModel {
        /// The format it is for.
        format: Format,
        /// The name as given.
        model: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be built.
    #[error("the HTTP client could not be built: {0}")]
    Client(String),
}
