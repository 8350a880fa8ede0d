//! The three sampling modes and their string names.

use std::fmt;
use std::str::FromStr;

use crate::SamplerError;

/// How stream positions are turned into record indices.
///
/// See the [crate docs](crate) for what each mode guarantees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Position `p` reads record `p mod N`; the seed is ignored.
    Sequential,
    /// Independent uniform draws with replacement.
    Iid,
    /// Draws without replacement: a fresh keyed permutation per cycle of `N` positions.
    Cyclic,
}

impl Mode {
    /// All modes, in declaration order.
    pub const ALL: [Mode; 3] = [Mode::Sequential, Mode::Iid, Mode::Cyclic];

    /// The lowercase name accepted by [`FromStr`].
    pub const fn as_str(self) -> &'static str {
        match self {
            Mode::Sequential => "sequential",
            Mode::Iid => "iid",
            Mode::Cyclic => "cyclic",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = SamplerError;

    /// Parses `sequential`, `iid` or `cyclic`, ignoring ASCII case and
    /// surrounding whitespace, since the names come from CLIs and Python.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim();
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| SamplerError::UnknownMode(s.to_owned()))
    }
}
