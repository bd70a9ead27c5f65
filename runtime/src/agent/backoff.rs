//! How long to wait before another attempt: exponential, with jitter, never less than the
//! provider asked for, and never past a bound.

/// The wait before attempt `attempt + 1`, after attempt `attempt` (from 1) failed, in ms:
/// `base_ms * 2^(attempt-1)`, capped at `max_ms`, scaled by `jitter` (in `[0.5, 1.0]`: "equal
/// jitter", so a crowd of clients spreads out and none retries at once); at least
/// `retry_after_ms` when the provider named one. `None` when the provider asks for longer
/// than `max_ms`: waiting that long in a person's session is not a retry, it is a failure to
/// report.
pub(crate) fn delay_ms(
    attempt: u32,
    retry_after_ms: Option<u64>,
    base_ms: u64,
    max_ms: u64,
    jitter: f64,
) -> Option<u64> {
    debug_assert!(
        (0.5..=1.0).contains(&jitter),
        "jitter {jitter} outside [0.5, 1]"
    );
    if retry_after_ms.is_some_and(|ms| ms > max_ms) {
        return None;
    }
    let exponent = attempt.saturating_sub(1).min(30);
    let raw = base_ms.saturating_mul(1u64 << exponent).min(max_ms);
    let jittered = (raw as f64 * jitter) as u64;
    Some(jittered.max(retry_after_ms.unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::delay_ms;
    use proptest::prelude::*;

    #[test]
    fn doubles_then_caps() {
        assert_eq!(delay_ms(1, None, 500, 30_000, 1.0), Some(500));
        assert_eq!(delay_ms(2, None, 500, 30_000, 1.0), Some(1_000));
        assert_eq!(delay_ms(3, None, 500, 30_000, 0.5), Some(1_000));
        assert_eq!(delay_ms(40, None, 500, 30_000, 1.0), Some(30_000));
    }

    #[test]
    fn the_provider_s_wait_is_honoured_or_refused() {
        assert_eq!(delay_ms(1, Some(2_000), 500, 30_000, 1.0), Some(2_000));
        assert_eq!(delay_ms(1, Some(60_000), 500, 30_000, 1.0), None);
    }

    proptest! {
        #[test]
        fn never_below_the_provider_s_wait_nor_above_the_bound(
            attempt in 1u32..100,
            retry_after in proptest::option::of(0u64..40_000),
            base in 1u64..5_000,
            jitter in 0.5f64..=1.0,
        ) {
            let max = 30_000;
            match delay_ms(attempt, retry_after, base, max, jitter) {
                Some(d) => {
                    prop_assert!(d <= max);
                    prop_assert!(d >= retry_after.unwrap_or(0));
                }
                None => prop_assert!(retry_after.unwrap() > max),
            }
        }
    }
}
