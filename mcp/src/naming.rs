//! Final tool names: `mcp__<server>__<tool>`, made to fit `^[a-zA-Z0-9_-]{1,64}$`.
//!
//! Why deterministic and lossy-but-safe: the model and the journal know a tool only by its
//! final name, so the same configuration must always give the same names, and two different
//! tools must never end up with one name. Characters outside the allowed set become `_`; a name
//! longer than 64 keeps its first 55 characters and ends with `_` and 8 hex digits of the sha256
//! of the unsanitised name, so long names that share a beginning still differ. Two tools whose
//! sanitised names still collide are refused by the caller, never merged.

use sha2::{Digest, Sha256};

/// Longest final name (the providers' limit).
pub const NAME_BYTES_MAX: usize = 64;

/// `<prefix><tool>` (prefix default `mcp__<server>__`), sanitised.
pub fn final_name(prefix: Option<&str>, server: &str, tool: &str) -> String {
    let raw = match prefix {
        Some(p) => format!("{p}{tool}"),
        None => format!("mcp__{server}__{tool}"),
    };
    sanitize(&raw)
}

/// Replaces characters outside `[a-zA-Z0-9_-]` with `_` and shortens past 64 bytes.
pub fn sanitize(raw: &str) -> String {
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        return "_".to_owned();
    }
    if clean.len() <= NAME_BYTES_MAX {
        return clean;
    }
    let digest = hex::encode(Sha256::digest(raw.as_bytes()));
    // ASCII only after the map above, so byte slicing is on char boundaries.
    format!("{}_{}", &clean[..55], &digest[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        (1..=NAME_BYTES_MAX).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    #[test]
    fn names_are_prefixed_and_sanitised() {
        assert_eq!(final_name(None, "fs", "read_file"), "mcp__fs__read_file");
        assert_eq!(final_name(None, "my.srv", "a/b c"), "mcp__my_srv__a_b_c");
        assert_eq!(final_name(Some(""), "fs", "read"), "read");
        assert_eq!(final_name(Some("x_"), "fs", "é"), "x__");
    }

    #[test]
    fn long_names_are_cut_to_64_and_stay_distinct() {
        let a = final_name(None, "server", &format!("{}_one", "t".repeat(80)));
        let b = final_name(None, "server", &format!("{}_two", "t".repeat(80)));
        assert_eq!(a.len(), NAME_BYTES_MAX);
        assert!(valid(&a) && valid(&b));
        assert_ne!(a, b);
        assert_eq!(
            a,
            final_name(None, "server", &format!("{}_one", "t".repeat(80)))
        );
    }

    /// The expected names were computed outside this code: the first 55 characters by hand,
    /// the hash with `printf '%s' "$raw" | sha256sum` over the unsanitised name.
    #[test]
    fn a_long_name_ends_with_the_sha256_of_the_unsanitised_name() {
        let tool = format!("{}_one", "t".repeat(80));
        assert_eq!(
            final_name(None, "server", &tool),
            format!("mcp__server__{}_770dc611", "t".repeat(42))
        );
        // Sanitising maps every `é` to `_`; the hash still tells the raw names apart.
        assert_eq!(
            final_name(None, "my.srv", &"é".repeat(60)),
            format!("mcp__my_srv__{}_27f27418", "_".repeat(42))
        );
    }

    proptest::proptest! {
        #[test]
        fn every_final_name_is_valid(server in ".{0,40}", tool in ".{0,100}") {
            proptest::prop_assert!(valid(&final_name(None, &server, &tool)));
        }
    }
}
