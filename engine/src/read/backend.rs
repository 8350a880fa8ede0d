//! Which system interface a store's reads use to move record bytes.

use std::fmt;
use std::str::FromStr;

/// The read backend a store uses for record payloads.
///
/// - `Pread`: one positional read per record (`pread(2)` on unix, `seek_read` on
///   Windows) into the destination or, for compressed records, into per-thread
///   scratch. Portable, works for any file size, never faults.
/// - `Mmap`: copy (or decompress) straight out of a read-only mapping of the store.
///   No syscall per record, so it wins for small records resident in the page cache.
///   A page that is not resident is faulted in synchronously.
/// - `Uring`: batched reads through a per-thread io_uring (Linux), many in flight at
///   once; the fastest way to read data that is not in the page cache, and the one
///   that makes O_DIRECT reads reach the device's IOPS. Falls back to `Pread` where
///   io_uring is unavailable.
/// - `Auto`: the engine's choice per store at open: `Mmap` when the store's data is
///   resident in the page cache (sampled with `mincore`) and the file is not on a
///   network file system, `Uring` otherwise or when O_DIRECT is asked (see
///   docs/benchmarks.md for the measurements behind it). A cold store (not
///   resident, or larger than the machine's memory) is read with O_DIRECT through
///   io_uring where the file system allows it
///   ([`Store::is_direct`](crate::Store::is_direct) says so), so a pass over it
///   does not fill the page cache.
///
/// Only `Mmap` maps the store file. A file truncated under an open store raises
/// SIGBUS on the next read of a lost page with `Mmap` (as with NumPy's memmap); the
/// others return [`Error::FileChanged`](crate::Error::FileChanged).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    #[default]
    Auto,
    Pread,
    Mmap,
    Uring,
}

impl Backend {
    /// All concrete backends, for tests that check they agree byte for byte.
    pub const CONCRETE: [Backend; 3] = [Backend::Pread, Backend::Mmap, Backend::Uring];

    /// The name used on the command line and in Python.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Pread => "pread",
            Backend::Mmap => "mmap",
            Backend::Uring => "uring",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = ParseBackendError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Backend::Auto),
            "pread" => Ok(Backend::Pread),
            "mmap" => Ok(Backend::Mmap),
            "uring" | "io_uring" | "io-uring" => Ok(Backend::Uring),
            _ => Err(ParseBackendError {
                name: s.to_string(),
            }),
        }
    }
}

/// A backend name that names no backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseBackendError {
    /// The name as given.
    pub name: String,
}

impl fmt::Display for ParseBackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown backend {:?} (expected auto, pread, mmap or uring)",
            self.name.to_ascii_lowercase()
        )
    }
}

impl std::error::Error for ParseBackendError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_unknown_names_are_a_typed_error() {
        for b in [Backend::Auto, Backend::Pread, Backend::Mmap, Backend::Uring] {
            assert_eq!(b.name().parse::<Backend>(), Ok(b));
        }
        assert_eq!("IO_URING".parse::<Backend>(), Ok(Backend::Uring));
        let err = "disk".parse::<Backend>().expect_err("unknown");
        assert_eq!(err.name, "disk");
        assert!(err
            .to_string()
            .contains("expected auto, pread, mmap or uring"));
    }
}
