//! The provider's own token count, read from its context-overflow error (`context/calibrated`).
//!
//! Why: the runtime's estimate is the request's bytes / 4, and for some text it is far off
//! (a CJK character is 3 bytes in UTF-8 and about one token or more). When the provider refuses
//! a request as too long and says how many tokens it counted, its count is the truth about
//! that request; the session's estimates are set against it from then on.

/// `(tokens counted, most the model takes)` from an overflow error's words, where it gives
/// them: OpenAI "maximum context length is M tokens. However, your messages resulted in N
/// tokens", Anthropic "prompt is too long: N tokens > M maximum", Gemini "The input token count
/// (N) exceeds the maximum number of tokens allowed (M)". `None` when no count is found (as in
/// OpenAI Responses' "Your input exceeds the context window of this model").
pub(super) fn overflow_counts(message: &str) -> Option<(u64, Option<u64>)> {
    let lower = message.to_ascii_lowercase();
    let text = lower.as_str();
    let (tokens, max) = if let Some(tokens) = number_after(text, "resulted in ") {
        (tokens, number_after(text, "maximum context length is "))
    } else if let Some(at) = text.find(" tokens > ") {
        let tokens = number_before(&text[..at])?;
        (tokens, number_after(&text[at..], " tokens > "))
    } else if let Some(tokens) = number_after(text, "input token count (") {
        (tokens, number_after(text, "tokens allowed ("))
    } else {
        return None;
    };
    (tokens > 0).then_some((tokens, max.filter(|&m| m > 0)))
}

/// The decimal number right after the first `marker` (digits, commas as thousands separators).
fn number_after(text: &str, marker: &str) -> Option<u64> {
    let rest = &text[text.find(marker)? + marker.len()..];
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The decimal number `text` ends with.
fn number_before(text: &str) -> Option<u64> {
    let start = text
        .rfind(|c: char| !(c.is_ascii_digit() || c == ','))
        .map_or(0, |i| i + 1);
    let digits: String = text[start..].chars().filter(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::overflow_counts;

    #[test]
    fn each_providers_words_give_their_counts() {
        let cases = [
            (
                "HTTP 400: This model's maximum context length is 128000 tokens. However, your \
                 messages resulted in 131072 tokens. Please reduce the length of the messages.",
                Some((131_072, Some(128_000))),
            ),
            (
                "HTTP 400: prompt is too long: 213462 tokens > 200000 maximum",
                Some((213_462, Some(200_000))),
            ),
            (
                "HTTP 400: The input token count (1091639) exceeds the maximum number of tokens \
                 allowed (1048576).",
                Some((1_091_639, Some(1_048_576))),
            ),
            (
                "your messages resulted in 9,000 tokens",
                Some((9_000, None)),
            ),
            (
                "Your input exceeds the context window of this model. Please adjust your input \
                 and try again.",
                None,
            ),
            ("prompt is too long:  tokens > 5 maximum", None),
            ("resulted in 0 tokens", None),
        ];
        for (message, counts) in cases {
            assert_eq!(overflow_counts(message), counts, "{message}");
        }
    }
}
