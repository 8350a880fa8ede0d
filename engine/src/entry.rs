//! A record's table entry: where its stored bytes are, how they are encoded, and their
//! checksum. The 32-byte encoding is specified in docs/format.md (the table); the
//! other layout rules are in `format`.

use crate::format::{u32_at, u64_at, ENTRY_BYTES};

/// How one record's stored bytes are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordCodec {
    Raw = 0,
    Zstd = 1,
    ZstdDict = 2,
}

/// One record's table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub offset: u64,
    pub stored_len: u32,
    pub logical_len: u32,
    pub checksum: u64,
    pub codec: RecordCodec,
}

impl Entry {
    /// The 32 bytes on disk.
    pub fn encode(&self) -> [u8; ENTRY_BYTES] {
        let mut b = [0u8; ENTRY_BYTES];
        b[0..8].copy_from_slice(&self.offset.to_le_bytes());
        b[8..12].copy_from_slice(&self.stored_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.logical_len.to_le_bytes());
        b[16..24].copy_from_slice(&self.checksum.to_le_bytes());
        b[24] = self.codec as u8;
        b
    }

    /// Parses 32 bytes. Bounds against the data region are checked by the store.
    pub fn decode(b: &[u8]) -> Result<Self, EntryError> {
        if b.len() != ENTRY_BYTES {
            return Err(EntryError::Length(b.len()));
        }
        let codec = match b[24] {
            0 => RecordCodec::Raw,
            1 => RecordCodec::Zstd,
            2 => RecordCodec::ZstdDict,
            t => return Err(EntryError::CodecTag(t)),
        };
        if b[25..32].iter().any(|&x| x != 0) {
            return Err(EntryError::Reserved);
        }
        let e = Self {
            offset: u64_at(b, 0),
            stored_len: u32_at(b, 8),
            logical_len: u32_at(b, 12),
            checksum: u64_at(b, 16),
            codec,
        };
        if codec == RecordCodec::Raw && e.stored_len != e.logical_len {
            return Err(EntryError::RawLengths {
                stored: e.stored_len,
                logical: e.logical_len,
            });
        }
        Ok(e)
    }

    /// The bytes `[offset, offset + stored_len)` the record occupies in the file.
    pub fn span(&self) -> std::ops::Range<u64> {
        self.offset..self.offset + u64::from(self.stored_len)
    }
}

/// Why 32 bytes are not a valid table entry.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EntryError {
    /// The slice is not [`ENTRY_BYTES`] long.
    Length(usize),
    /// The codec byte names no codec.
    CodecTag(u8),
    /// Bytes 25..32 are reserved and must be zero.
    Reserved,
    /// A raw record's stored and logical lengths differ.
    RawLengths { stored: u32, logical: u32 },
}

impl std::fmt::Display for EntryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EntryError::Length(n) => {
                write!(f, "table entry is {n} bytes, expected {ENTRY_BYTES}")
            }
            EntryError::CodecTag(t) => write!(f, "unknown codec tag {t}"),
            EntryError::Reserved => f.write_str("reserved bytes of the table entry are not zero"),
            EntryError::RawLengths { stored, logical } => write!(
                f,
                "raw record stores {stored} bytes but its logical length is {logical}"
            ),
        }
    }
}

impl std::error::Error for EntryError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_bad_tags_are_refused() {
        let e = Entry {
            offset: 1 << 33,
            stored_len: 10,
            logical_len: 20,
            checksum: 0xdead_beef,
            codec: RecordCodec::Zstd,
        };
        let mut b = e.encode();
        assert_eq!(Entry::decode(&b).expect("decode"), e);
        b[24] = 9;
        assert_eq!(Entry::decode(&b), Err(EntryError::CodecTag(9)));
        b[24] = 0;
        assert_eq!(
            Entry::decode(&b),
            Err(EntryError::RawLengths {
                stored: 10,
                logical: 20
            })
        );
        assert_eq!(Entry::decode(&b[..31]), Err(EntryError::Length(31)));
    }
}
