//! Sizes written with units, read by one rule on every surface: the CLI's flags
//! (`--record-bytes 4k`), read settings (`remote.cache_bytes=500G`), environment
//! variables (`ZRING_CACHE_BYTES`) and Python's `*_bytes` arguments.
//!
//! Units are binary whatever their spelling, as fio reads them: `4k`, `4K`, `4KB`
//! and `4KiB` are all 4096 bytes. A plain number is bytes; a fraction of a unit
//! (`1.5M`) rounds down to whole bytes.

/// Text that is not a size, and what the parser found wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a size ({reason}); write bytes, optionally with a binary unit: 4096, 4k, 64MiB, 2G")]
pub struct SizeError {
    /// The text as given.
    pub text: String,
    /// The parser's own explanation (an invalid digit, an overflow, ...).
    pub reason: String,
}

/// Reads `text` as a count of bytes: `123`, `4k`, `64 MiB`, `2G`, `1T` (powers of
/// 1024), surrounding spaces allowed.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    ::parse_size::Config::new()
        .with_binary()
        .parse_size(text.trim())
        .map_err(|e| SizeError {
            text: text.to_string(),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_units_in_any_spelling() {
        assert_eq!(parse_size("123"), Ok(123));
        for k in ["4k", "4K", "4KB", "4KiB", "4 kib", " 4k "] {
            assert_eq!(parse_size(k), Ok(4096), "{k}");
        }
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1TB"), Ok(1 << 40));
        assert_eq!(parse_size("1.5M"), Ok(3 << 19));
        assert_eq!(parse_size("0"), Ok(0));
    }

    #[test]
    fn what_is_not_a_size_says_so() {
        for bad in ["", "x", "-1", "4q", "99999999999T"] {
            let err = parse_size(bad).expect_err(bad);
            assert_eq!(err.text, bad);
            let shown = err.to_string();
            assert!(shown.contains("is not a size"), "{shown}");
        }
    }
}
