//! Which live model a command talks to, and how: `--model PROVIDER:MODEL` and `--base-url`
//! over `[model]` in the configuration file over the providers' own environment variables
//! (`OPENAI_API_KEY`, `OPENAI_BASE_URL`, `ANTHROPIC_API_KEY`, ...). The key is read from the
//! environment only (taken out of it at start, `runtime::secrets`), and never leaves the
//! adapter: not in the journal, a message, a log or a tool's reach.

use crate::config::ModelSection;
use crate::system_prompt;
use crate::CliError;
use runtime::event::SessionModel;
use runtime::model::{Model, ModelSettings};
use runtime::AgentConfig;

/// Steps per turn unless `--max-steps` says otherwise.
pub const STEPS_MAX_DEFAULT: u32 = 50;

/// What the command line says about the model.
#[derive(Debug, Default, Clone)]
pub struct ModelFlags {
    /// `--model PROVIDER:MODEL`.
    pub spec: Option<String>,
    /// `--base-url URL`.
    pub base_url: Option<String>,
    /// `--max-steps N`.
    pub steps_max: Option<u32>,
}

/// The `PROVIDER:MODEL` to use: the flag, else the model the journal last recorded (a resume
/// goes on with the model it was talking to), else `[model]`'s provider and model.
pub fn spec(
    flags: &ModelFlags,
    section: &ModelSection,
    journaled: Option<&SessionModel>,
) -> Result<Option<String>, CliError> {
    if let Some(spec) = &flags.spec {
        return Ok(Some(spec.clone()));
    }
    // A transcript's session records the model `scripted`: no provider to go on with.
    if let Some(m) = journaled.filter(|m| m.provider != "scripted") {
        return Ok(Some(format!("{}:{}", m.provider, m.model)));
    }
    match (&section.provider, &section.model) {
        (Some(provider), Some(model)) => Ok(Some(format!("{provider}:{model}"))),
        (None, None) => Ok(None),
        (Some(_), None) => Err(CliError::Failed(
            "configuration: [model] names a provider but no model".into(),
        )),
        (None, Some(_)) => Err(CliError::Failed(
            "configuration: [model] names a model but no provider".into(),
        )),
    }
}

/// The adapter for `spec`: its key from the environment (`[model] api_key_env`, else the
/// provider's variable), its base URL from `--base-url`, else `[model] base_url`, else the
/// provider's variable, else the one the journal recorded ([`journaled_base_url`]), else the
/// provider's own. Fails before any session is touched: an unknown provider, a missing key
/// (naming the variable), a bad URL, a journaled address the key may not be sent to.
pub fn connect(
    spec: &str,
    flags: &ModelFlags,
    section: &ModelSection,
    journaled: Option<&SessionModel>,
) -> Result<Box<dyn Model>, CliError> {
    // The providers' own variables were taken at start (`secrets::take`); one the
    // configuration names is taken now, before the session's tools or threads exist.
    if let Some(var) = section.api_key_env.as_deref() {
        runtime::take_secrets_from_environment(&[var])
            .map_err(|e| CliError::Failed(e.to_string()))?;
    }
    let mut config =
        llm::ModelConfig::resolve(spec, section.api_key_env.as_deref(), runtime::secret_var)
            .map_err(|e| CliError::Failed(e.to_string()))?;
    // Read now, before any journal is touched (`agent_config` reads it again once the tools
    // are known): a missing prompt file must not leave a session begun behind it.
    system_prompt_file(section)?;
    if let Some(url) = flags.base_url.as_ref().or(section.base_url.as_ref()) {
        config.base_url = Some(url.clone());
    } else if config.base_url.is_none() {
        config.base_url = journaled_base_url(spec, flags, journaled)?;
    }
    if let Some(ms) = section.request_timeout_ms {
        config.request_timeout_ms = ms;
    }
    if let Some(bytes) = section.event_bytes_max {
        config.event_bytes_max = bytes;
    }
    if let Some(bytes) = section.response_bytes_max {
        config.response_bytes_max = bytes;
    }
    llm::connect(config).map_err(|e| CliError::Failed(e.to_string()))
}

/// The text of `[model] system_prompt_file`, if the configuration names one.
fn system_prompt_file(section: &ModelSection) -> Result<Option<String>, CliError> {
    let Some(path) = &section.system_prompt_file else {
        return Ok(None);
    };
    std::fs::read_to_string(path).map(Some).map_err(|e| {
        CliError::Failed(format!(
            "{}: cannot read the system prompt ([model] system_prompt_file): {e}",
            path.display()
        ))
    })
}

/// The base URL a resume takes from the journal: only when the model, too, is the journal's
/// (no `--model`), and only a loopback address. A journal is a file anyone may hand over (an
/// audit copy, a CI artifact): following it to another host would send the user's key to
/// whoever wrote it, so that takes `--base-url`, said once, by the user.
fn journaled_base_url(
    spec: &str,
    flags: &ModelFlags,
    journaled: Option<&SessionModel>,
) -> Result<Option<String>, CliError> {
    let Some(model) = journaled.filter(|m| flags.spec.is_none() && m.base_url.is_some()) else {
        return Ok(None);
    };
    if format!("{}:{}", model.provider, model.model) != spec {
        return Ok(None);
    }
    let url = model.base_url.clone().unwrap_or_default();
    let loopback = url::Url::parse(&url).is_ok_and(|u| match u.host() {
        Some(url::Host::Domain(name)) => name == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    });
    if !loopback {
        return Err(CliError::Failed(format!(
            "the session talked to {url}; to send your key there again, say so: --base-url {url}"
        )));
    }
    eprintln!("note: requests go to {url}, where the session talked (recorded in its journal)");
    Ok(Some(url))
}

/// The loop's settings: steps, attempts, backoff and timeout from `[model]`, the system
/// prompt from `system_prompt_file` or the default one for `workspace` and `tools`, and the
/// context window of `model` (`[model] context_window_tokens`, else the table of known models).
pub fn agent_config(
    flags: &ModelFlags,
    section: &ModelSection,
    workspace: &str,
    tools: &[String],
    model: &str,
) -> Result<AgentConfig, CliError> {
    let defaults = AgentConfig::default();
    check_limits(section)?;
    let system = match system_prompt_file(section)? {
        Some(text) => text,
        None => system_prompt::default_prompt(workspace, tools),
    };
    Ok(AgentConfig {
        steps_max: flags.steps_max.unwrap_or(STEPS_MAX_DEFAULT).max(1),
        attempts_max: section
            .retry_attempts
            .map(|r| r.saturating_add(1))
            .unwrap_or(defaults.attempts_max),
        backoff_base_ms: section.backoff_base_ms.unwrap_or(defaults.backoff_base_ms),
        backoff_max_ms: section.backoff_max_ms.unwrap_or(defaults.backoff_max_ms),
        idle_timeout_ms: section
            .request_timeout_ms
            .unwrap_or(defaults.idle_timeout_ms),
        attempt_timeout_ms: section
            .attempt_timeout_ms
            .unwrap_or(defaults.attempt_timeout_ms),
        system: Some(system),
        settings: ModelSettings {
            max_tokens: section.max_tokens,
            temperature: section.temperature,
        },
        context_window_tokens: section
            .context_window_tokens
            .or_else(|| llm::windows::context_window_tokens(model)),
        compact_at_percent: section
            .compact_at_percent
            .unwrap_or(defaults.compact_at_percent),
    })
}

/// Most retries `[model] retry_attempts` may ask for: past it a session would wait for hours.
pub const RETRY_ATTEMPTS_MAX: u32 = 100;

/// `[model]` values that would make the loop misbehave, refused naming the key.
fn check_limits(section: &ModelSection) -> Result<(), CliError> {
    let refuse = |what: String| Err(CliError::Failed(format!("[model] {what}")));
    if let Some(n) = section.retry_attempts.filter(|&n| n > RETRY_ATTEMPTS_MAX) {
        return refuse(format!(
            "retry_attempts = {n}: at most {RETRY_ATTEMPTS_MAX}"
        ));
    }
    if let Some(p) = section
        .compact_at_percent
        .filter(|p| !(1..=100).contains(p))
    {
        return refuse(format!("compact_at_percent = {p}: from 1 to 100"));
    }
    for (key, value) in [
        ("request_timeout_ms", section.request_timeout_ms),
        ("attempt_timeout_ms", section.attempt_timeout_ms),
        ("event_bytes_max", section.event_bytes_max),
        ("response_bytes_max", section.response_bytes_max),
    ] {
        if value == Some(0) {
            return refuse(format!(
                "{key} = 0: nothing could be read; leave the key out for the default"
            ));
        }
    }
    if section.context_window_tokens == Some(0) {
        return refuse("context_window_tokens = 0: a window holds at least one token".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(provider: Option<&str>, model: Option<&str>) -> ModelSection {
        ModelSection {
            provider: provider.map(str::to_owned),
            model: model.map(str::to_owned),
            ..ModelSection::default()
        }
    }

    fn journaled(provider: &str) -> SessionModel {
        SessionModel {
            provider: provider.into(),
            model: "m-journal".into(),
            system: None,
            settings: ModelSettings::default(),
            note: None,
            base_url: None,
        }
    }

    #[test]
    fn the_flag_wins_then_the_journal_then_the_configuration() {
        let config = section(Some("anthropic"), Some("m-config"));
        let flag = ModelFlags {
            spec: Some("gemini:m-flag".into()),
            ..ModelFlags::default()
        };
        let chosen = |flags: &ModelFlags, j: Option<&SessionModel>| {
            spec(flags, &config, j).unwrap_or_else(|e| panic!("{e:?}"))
        };
        let j = journaled("openai-chat");
        assert_eq!(chosen(&flag, Some(&j)).as_deref(), Some("gemini:m-flag"));
        assert_eq!(
            chosen(&ModelFlags::default(), Some(&j)).as_deref(),
            Some("openai-chat:m-journal")
        );
        // A transcript's model is nobody's to go on with.
        let scripted = journaled("scripted");
        assert_eq!(
            chosen(&ModelFlags::default(), Some(&scripted)).as_deref(),
            Some("anthropic:m-config")
        );
        assert_eq!(
            spec(&ModelFlags::default(), &ModelSection::default(), None)
                .unwrap_or_else(|e| panic!("{e:?}")),
            None
        );
    }

    #[test]
    fn half_a_model_in_the_configuration_is_an_error() {
        let Err(CliError::Failed(message)) =
            spec(&ModelFlags::default(), &section(Some("gemini"), None), None)
        else {
            panic!("accepted a provider without a model");
        };
        assert!(message.contains("[model]"), "{message}");
    }

    #[test]
    fn retry_attempts_count_after_the_first() {
        let s = ModelSection {
            retry_attempts: Some(0),
            request_timeout_ms: Some(1234),
            max_tokens: Some(77),
            ..ModelSection::default()
        };
        let config = agent_config(&ModelFlags::default(), &s, "/w", &[], "test-model")
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(config.attempts_max, 1);
        assert_eq!(config.idle_timeout_ms, 1234);
        assert_eq!(config.steps_max, STEPS_MAX_DEFAULT);
        assert_eq!(config.settings.max_tokens, Some(77));
        assert!(config
            .system
            .as_deref()
            .is_some_and(|p| p.contains("TOOL_OUTCOME_UNKNOWN")));
    }

    #[test]
    fn a_journaled_base_url_is_followed_only_to_loopback_and_only_with_the_journal_s_model() {
        let at = |url: &str| SessionModel {
            base_url: Some(url.into()),
            ..journaled("openai-chat")
        };
        let spec = "openai-chat:m-journal";
        let none = ModelFlags::default();
        let local = at("http://127.0.0.1:11434/v1");
        assert_eq!(
            journaled_base_url(spec, &none, Some(&local)).unwrap_or_else(|e| panic!("{e:?}")),
            Some("http://127.0.0.1:11434/v1".into())
        );
        let named = at("http://localhost:8000/v1");
        assert!(journaled_base_url(spec, &none, Some(&named)).is_ok_and(|u| u.is_some()));
        // Elsewhere: the user must say so, naming the address.
        let remote = at("https://collector.example/v1");
        match journaled_base_url(spec, &none, Some(&remote)) {
            Err(CliError::Failed(m)) => {
                assert!(m.contains("--base-url https://collector.example/v1"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        // Another model than the journal's: the journal's address is not followed at all.
        let flagged = ModelFlags {
            spec: Some("openai-chat:other".into()),
            ..ModelFlags::default()
        };
        assert!(matches!(
            journaled_base_url("openai-chat:other", &flagged, Some(&remote)),
            Ok(None)
        ));
    }

    #[test]
    fn limits_that_would_make_the_loop_misbehave_are_refused_naming_the_key() {
        for (section, key) in [
            (
                ModelSection {
                    retry_attempts: Some(u32::MAX),
                    ..ModelSection::default()
                },
                "retry_attempts",
            ),
            (
                ModelSection {
                    compact_at_percent: Some(0),
                    ..ModelSection::default()
                },
                "compact_at_percent",
            ),
            (
                ModelSection {
                    compact_at_percent: Some(150),
                    ..ModelSection::default()
                },
                "compact_at_percent",
            ),
            (
                ModelSection {
                    context_window_tokens: Some(0),
                    ..ModelSection::default()
                },
                "context_window_tokens",
            ),
        ] {
            match agent_config(&ModelFlags::default(), &section, "/w", &[], "test-model") {
                Err(CliError::Failed(m)) => assert!(m.contains(key), "{m}"),
                _ => panic!("{key} accepted"),
            }
        }
    }
}
