//! Context windows of known models, in tokens: what `compact_at_percent` is a share of when the
//! configuration does not say (`[model] context_window_tokens`).
//!
//! Why a small table of name prefixes and not a lookup at the provider: the providers' model
//! listings do not all give it, and a session must not depend on one more request. An unknown
//! model gets `None`: no reduction before a request, only after the provider refuses one as too
//! long. The figures are the providers' published input limits; the most specific prefix wins.

/// (model name prefix, context window in tokens), most specific first.
const WINDOWS: &[(&str, u64)] = &[
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    // The input limit (the 400k window holds the output too).
    ("gpt-5", 272_000),
    ("o1-mini", 128_000),
    ("o1-preview", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("claude-", 200_000),
    ("gemini-1.5-pro", 2_097_152),
    ("gemini-", 1_048_576),
];

/// The context window of `model`, if it is a known one.
pub fn context_window_tokens(model: &str) -> Option<u64> {
    let model = model.to_ascii_lowercase();
    // A name may come with a provider path (`models/gemini-2.5-pro`).
    let name = model.rsplit('/').next().unwrap_or(&model);
    WINDOWS
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|&(_, tokens)| tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_and_prefixes_and_unknown_ones() {
        assert_eq!(context_window_tokens("gpt-4o-mini"), Some(128_000));
        assert_eq!(context_window_tokens("gpt-4.1-nano"), Some(1_047_576));
        assert_eq!(context_window_tokens("claude-sonnet-4-5"), Some(200_000));
        assert_eq!(
            context_window_tokens("models/gemini-2.5-flash"),
            Some(1_048_576)
        );
        assert_eq!(context_window_tokens("gemini-1.5-pro-002"), Some(2_097_152));
        assert_eq!(context_window_tokens("o1-mini"), Some(128_000));
        assert_eq!(context_window_tokens("o1"), Some(200_000));
        assert_eq!(context_window_tokens("test-model"), None);
        assert_eq!(context_window_tokens("llama3"), None);
    }
}
