//! Container format v1: the byte layout of superblock, table entries and footer.
//!
//! docs/format.md is the specification; this module is its only implementation.
//! Every integer is little-endian and written field by field, never as a host struct.
//!
//! ```text
//! superblock  4096 B at 0
//! data        records, each at a multiple of `align`
//! dictionary  zstd dictionary (zstd-dict stores), else empty
//! shapes      N x ndim u32 (ragged stores), else empty
//! table       N x 32 B entries
//! schema      JSON
//! footer      4096 B at the end
//! ```

/// Format major version: a reader refuses a store with a larger major version.
pub const FORMAT_MAJOR: u16 = 1;
/// Format minor version: additions an older v1 reader may ignore.
pub const FORMAT_MINOR: u16 = 0;
/// Size of the superblock and of the footer.
pub const BLOCK: usize = 4096;
/// Size of one table entry.
pub const ENTRY_BYTES: usize = 32;
/// The largest record, logical or stored: lengths are u32.
pub const MAX_RECORD_BYTES: u64 = u32::MAX as u64;
/// The largest alignment a store may ask for (1 MiB).
pub const MAX_ALIGN: u32 = 1 << 20;

const SUPER_MAGIC: &[u8; 8] = b"ZRING\0SB";
const FOOTER_MAGIC: &[u8; 8] = b"ZRING\0FT";
const WRITER_FIELD: usize = 32;

/// The checksum used everywhere in the format: XXH3-64 (seed 0). Chosen over crc32c
/// for speed: it runs at memory bandwidth on one core, so checking costs ~nothing.
pub fn checksum(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Rounds `x` up to a multiple of `align` (a power of two), or `None` on overflow.
pub fn align_up(x: u64, align: u64) -> Option<u64> {
    Some(x.checked_add(align - 1)? & !(align - 1))
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_le_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Why a superblock or footer was refused (turned into `Error::Corrupt` or
/// `Error::UnsupportedVersion` by the caller, who knows the path).
#[derive(Debug, PartialEq, Eq)]
pub enum BlockError {
    Magic,
    Checksum,
    Version { major: u16, minor: u16 },
    Field(String),
}

/// Fields of the superblock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub major: u16,
    pub minor: u16,
    pub align: u32,
    /// The zring version that wrote the store, for diagnostics.
    pub writer: String,
}

impl Superblock {
    /// Superblock for a store written by this zring.
    pub fn current(align: u32) -> Self {
        Self {
            major: FORMAT_MAJOR,
            minor: FORMAT_MINOR,
            align,
            writer: format!("zring {}", env!("CARGO_PKG_VERSION")),
        }
    }

    /// The 4096 bytes on disk.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; BLOCK];
        b[0..8].copy_from_slice(SUPER_MAGIC);
        b[8..10].copy_from_slice(&self.major.to_le_bytes());
        b[10..12].copy_from_slice(&self.minor.to_le_bytes());
        // 12..16 flags, 0 in v1.0
        b[16..20].copy_from_slice(&self.align.to_le_bytes());
        let w = self.writer.as_bytes();
        let n = w.len().min(WRITER_FIELD);
        b[24..24 + n].copy_from_slice(&w[..n]);
        let sum = checksum(&b[0..56]);
        b[56..64].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Parses and checks the first 4096 bytes of a store.
    pub fn decode(b: &[u8]) -> Result<Self, BlockError> {
        if b.len() < BLOCK || &b[0..8] != SUPER_MAGIC {
            return Err(BlockError::Magic);
        }
        let (major, minor) = (u16_at(b, 8), u16_at(b, 10));
        // A newer version is reported before the checksum: a future format may
        // checksum differently, and "too new" is the message that helps. An older
        // major (there is none before v1) is damage, caught by the checksum first.
        if major > FORMAT_MAJOR {
            return Err(BlockError::Version { major, minor });
        }
        if checksum(&b[0..56]) != u64_at(b, 56) {
            return Err(BlockError::Checksum);
        }
        if major != FORMAT_MAJOR {
            return Err(BlockError::Field(format!(
                "format major version {major} does not exist (v{FORMAT_MAJOR} is the first)"
            )));
        }
        let align = u32_at(b, 16);
        if !align.is_power_of_two() || align > MAX_ALIGN {
            return Err(BlockError::Field(format!(
                "superblock alignment {align} is not a power of two up to {MAX_ALIGN}"
            )));
        }
        let writer = String::from_utf8_lossy(&b[24..24 + WRITER_FIELD])
            .trim_end_matches('\0')
            .to_string();
        Ok(Self {
            major,
            minor,
            align,
            writer,
        })
    }
}

/// Where one section lives and its checksum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Section {
    pub offset: u64,
    pub len: u64,
    pub checksum: u64,
}

impl Section {
    /// The end offset, or `None` on overflow.
    pub fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.len)
    }
}

/// Fields of the footer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Footer {
    pub major: u16,
    pub minor: u16,
    pub record_count: u64,
    pub align: u32,
    /// The data region; its checksum field is 0 (records carry their own checksums).
    pub data: Section,
    pub dict: Section,
    pub shapes: Section,
    pub table: Section,
    pub schema: Section,
    pub file_len: u64,
}

impl Footer {
    /// The 4096 bytes on disk.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; BLOCK];
        b[0..8].copy_from_slice(FOOTER_MAGIC);
        b[8..10].copy_from_slice(&self.major.to_le_bytes());
        b[10..12].copy_from_slice(&self.minor.to_le_bytes());
        b[16..24].copy_from_slice(&self.record_count.to_le_bytes());
        b[24..28].copy_from_slice(&self.align.to_le_bytes());
        b[28..32].copy_from_slice(&(ENTRY_BYTES as u32).to_le_bytes());
        for (k, s) in self.sections().iter().enumerate() {
            let at = 32 + 24 * k;
            b[at..at + 8].copy_from_slice(&s.offset.to_le_bytes());
            b[at + 8..at + 16].copy_from_slice(&s.len.to_le_bytes());
            b[at + 16..at + 24].copy_from_slice(&s.checksum.to_le_bytes());
        }
        b[152..160].copy_from_slice(&self.file_len.to_le_bytes());
        let sum = checksum(&b[0..BLOCK - 8]);
        b[BLOCK - 8..].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Parses and checks the last 4096 bytes of a store (field values are checked
    /// against the file by the store, which knows its length).
    pub fn decode(b: &[u8]) -> Result<Self, BlockError> {
        if b.len() < BLOCK || &b[0..8] != FOOTER_MAGIC {
            return Err(BlockError::Magic);
        }
        let (major, minor) = (u16_at(b, 8), u16_at(b, 10));
        if major > FORMAT_MAJOR {
            return Err(BlockError::Version { major, minor });
        }
        if checksum(&b[0..BLOCK - 8]) != u64_at(b, BLOCK - 8) {
            return Err(BlockError::Checksum);
        }
        if major != FORMAT_MAJOR {
            return Err(BlockError::Field(format!(
                "format major version {major} does not exist (v{FORMAT_MAJOR} is the first)"
            )));
        }
        let entry = u32_at(b, 28);
        if entry as usize != ENTRY_BYTES {
            return Err(BlockError::Field(format!(
                "table entry size {entry}, expected {ENTRY_BYTES}"
            )));
        }
        let section = |k: usize| {
            let at = 32 + 24 * k;
            Section {
                offset: u64_at(b, at),
                len: u64_at(b, at + 8),
                checksum: u64_at(b, at + 16),
            }
        };
        Ok(Self {
            major,
            minor,
            record_count: u64_at(b, 16),
            align: u32_at(b, 24),
            data: section(0),
            dict: section(1),
            shapes: section(2),
            table: section(3),
            schema: section(4),
            file_len: u64_at(b, 152),
        })
    }

    /// The sections in file order.
    pub fn sections(&self) -> [Section; 5] {
        [self.data, self.dict, self.shapes, self.table, self.schema]
    }
}

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

    /// Parses 32 bytes; the text of the error says which field is invalid.
    /// Bounds against the data region are checked by the store.
    pub fn decode(b: &[u8]) -> Result<Self, String> {
        if b.len() != ENTRY_BYTES {
            return Err(format!(
                "table entry is {} bytes, expected {ENTRY_BYTES}",
                b.len()
            ));
        }
        let codec = match b[24] {
            0 => RecordCodec::Raw,
            1 => RecordCodec::Zstd,
            2 => RecordCodec::ZstdDict,
            t => return Err(format!("unknown codec tag {t}")),
        };
        if b[25..32].iter().any(|&x| x != 0) {
            return Err("reserved bytes of the table entry are not zero".into());
        }
        let e = Self {
            offset: u64_at(b, 0),
            stored_len: u32_at(b, 8),
            logical_len: u32_at(b, 12),
            checksum: u64_at(b, 16),
            codec,
        };
        if codec == RecordCodec::Raw && e.stored_len != e.logical_len {
            return Err(format!(
                "raw record stores {} bytes but its logical length is {}",
                e.stored_len, e.logical_len
            ));
        }
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn superblock_round_trips_and_rejects_damage() {
        let sb = Superblock::current(4096);
        let mut b = sb.encode();
        assert_eq!(Superblock::decode(&b).expect("decode"), sb);
        b[20] ^= 1;
        assert_eq!(Superblock::decode(&b), Err(BlockError::Checksum));
        b[0] = b'X';
        assert_eq!(Superblock::decode(&b), Err(BlockError::Magic));
    }

    #[test]
    fn a_newer_major_version_is_reported_as_such() {
        let mut b = Superblock::current(8).encode();
        b[8..10].copy_from_slice(&2u16.to_le_bytes());
        assert_eq!(
            Superblock::decode(&b),
            Err(BlockError::Version { major: 2, minor: 0 })
        );
    }

    #[test]
    fn footer_round_trips() {
        let f = Footer {
            major: 1,
            minor: 0,
            record_count: 1 << 40,
            align: 8,
            data: Section {
                offset: 4096,
                len: 100,
                checksum: 0,
            },
            dict: Section {
                offset: 4200,
                len: 0,
                checksum: 1,
            },
            shapes: Section {
                offset: 4200,
                len: 8,
                checksum: 2,
            },
            table: Section {
                offset: 4208,
                len: 32,
                checksum: 3,
            },
            schema: Section {
                offset: 4240,
                len: 10,
                checksum: 4,
            },
            file_len: 8346,
        };
        let b = f.encode();
        assert_eq!(Footer::decode(&b).expect("decode"), f);
        let mut bad = b.clone();
        bad[100] ^= 0x40;
        assert_eq!(Footer::decode(&bad), Err(BlockError::Checksum));
    }

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
        assert!(Entry::decode(&b).expect_err("tag").contains("codec tag 9"));
        b[24] = 0;
        assert!(Entry::decode(&b).expect_err("raw").contains("raw record"));
    }

    #[test]
    fn align_up_rounds_and_detects_overflow() {
        assert_eq!(align_up(0, 8), Some(0));
        assert_eq!(align_up(1, 8), Some(8));
        assert_eq!(align_up(4096, 4096), Some(4096));
        assert_eq!(align_up(u64::MAX, 8), None);
    }
}
