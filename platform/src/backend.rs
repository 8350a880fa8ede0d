//! Which system interface a gather uses to move record bytes.

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
/// - `Auto`: the engine's choice per store; today it picks `Mmap` (warm small and large
///   records measured fastest, see docs/benchmarks.md) and the io_uring engine will
///   refine it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    #[default]
    Auto,
    Pread,
    Mmap,
}

impl Backend {
    /// All concrete backends, for tests that check they agree byte for byte.
    pub const CONCRETE: [Backend; 2] = [Backend::Pread, Backend::Mmap];

    /// The name used on the command line and in Python.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Pread => "pread",
            Backend::Mmap => "mmap",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Backend::Auto),
            "pread" => Ok(Backend::Pread),
            "mmap" => Ok(Backend::Mmap),
            other => Err(format!(
                "unknown backend {other:?} (expected auto, pread or mmap)"
            )),
        }
    }
}
