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
//!
//! This module imports nothing from the crate: `error` names its constants and
//! kinds ([`BlockKind`], [`SectionKind`]) in its messages, and the checks that
//! report a `StoreProblem` (such as `check_footer`) live with the reader's other
//! layout checks in `read/layout.rs`.

use std::fmt;

/// Format major version: a reader refuses a store with a larger major version.
pub const FORMAT_MAJOR: u16 = 1;
/// Format minor version: additions that never make an older v1 reader misread a
/// store (docs/format.md, Versioning). 1.1 added three float8 dtype names; 1.2
/// allows empty ragged records (a 0 dim, `logical_len` 0).
pub const FORMAT_MINOR: u16 = 2;
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
/// Computed by the platform's runtime-dispatched XXH3 (AVX2 where the CPU has it),
/// bit-identical to the reference.
pub fn checksum(bytes: &[u8]) -> u64 {
    zring_platform::xxh3_64(bytes)
}

/// Rounds `x` up to a multiple of `align` (a power of two), or `None` on overflow.
pub fn align_up(x: u64, align: u64) -> Option<u64> {
    Some(x.checked_add(align - 1)? & !(align - 1))
}

/// Where the metadata goes after a data region that ends at `data_end`: the offsets of
/// the dictionary, shapes, table and schema sections (each at a multiple of 8, in that
/// order, `lens` bytes long) and of the footer, which follows the schema directly.
/// `None` if the file would pass 2^64 bytes.
pub fn place_metadata(data_end: u64, lens: [u64; 4]) -> Option<([u64; 4], u64)> {
    let mut at = data_end;
    let mut offsets = [0u64; 4];
    for (offset, len) in offsets.iter_mut().zip(lens) {
        at = align_up(at, 8)?;
        *offset = at;
        at = at.checked_add(len)?;
    }
    Some((offsets, at))
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_le_bytes(a)
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
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
    Version {
        major: u16,
        minor: u16,
    },
    /// A major version older than the first.
    NoSuchMajor {
        major: u16,
    },
    /// A superblock alignment that is not a power of two up to [`MAX_ALIGN`].
    Alignment {
        align: u32,
    },
    /// A footer table entry size that is not [`ENTRY_BYTES`].
    EntrySize {
        size: u32,
    },
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
            return Err(BlockError::NoSuchMajor { major });
        }
        let align = u32_at(b, 16);
        if !align.is_power_of_two() || align > MAX_ALIGN {
            return Err(BlockError::Alignment { align });
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
            return Err(BlockError::NoSuchMajor { major });
        }
        let entry = u32_at(b, 28);
        if entry as usize != ENTRY_BYTES {
            return Err(BlockError::EntrySize { size: entry });
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

/// Alignment of every metadata section (dictionary, shapes, table, schema): the
/// writer pads to it and the reader requires it of the table (8) and shapes (4).
pub const META_ALIGN: u64 = 8;

/// Where record `index`'s table entry lies in the file (not checked against the
/// record count: the caller has).
pub fn entry_range(table: Section, index: u64) -> std::ops::Range<u64> {
    let at = table.offset + index * ENTRY_BYTES as u64;
    at..at + ENTRY_BYTES as u64
}

/// Where record `index`'s shape (`ndim` little-endian u32) lies in the file.
pub fn shape_range(shapes: Section, ndim: usize, index: u64) -> std::ops::Range<u64> {
    let bytes = ndim as u64 * 4;
    let at = shapes.offset + index * bytes;
    at..at + bytes
}

/// Bytes of the shapes section for `records` records of `ndim` dims (`None` on
/// overflow); 0 for dense stores (`ndim` 0).
pub fn shapes_len(records: u64, ndim: usize) -> Option<u64> {
    records.checked_mul(ndim as u64 * 4)
}

/// Bytes of the table for `records` records (`None` on overflow).
pub fn table_len(records: u64) -> Option<u64> {
    records.checked_mul(ENTRY_BYTES as u64)
}

/// Which of a store's two 4096-byte blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlockKind {
    /// The first block.
    Superblock,
    /// The last block.
    Footer,
}

impl fmt::Display for BlockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BlockKind::Superblock => "superblock",
            BlockKind::Footer => "footer",
        })
    }
}

/// One of a store's sections, in file order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SectionKind {
    Data,
    Dictionary,
    Shapes,
    Table,
    Schema,
}

impl SectionKind {
    /// The sections in file order (that of [`crate::format::Footer::sections`]).
    pub const ALL: [SectionKind; 5] = [
        SectionKind::Data,
        SectionKind::Dictionary,
        SectionKind::Shapes,
        SectionKind::Table,
        SectionKind::Schema,
    ];
}

impl fmt::Display for SectionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SectionKind::Data => "data",
            SectionKind::Dictionary => "dictionary",
            SectionKind::Shapes => "shapes",
            SectionKind::Table => "table",
            SectionKind::Schema => "schema",
        })
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
            Err(BlockError::Version {
                major: 2,
                minor: FORMAT_MINOR
            })
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
    fn align_up_rounds_and_detects_overflow() {
        assert_eq!(align_up(0, 8), Some(0));
        assert_eq!(align_up(1, 8), Some(8));
        assert_eq!(align_up(4096, 4096), Some(4096));
        assert_eq!(align_up(u64::MAX, 8), None);
    }
}
