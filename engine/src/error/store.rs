//! What is wrong with a store's metadata ([`super::Error::Corrupt`]) or with one of its
//! records ([`super::Error::CorruptRecord`]).

use std::fmt;
use std::io;

use crate::format::{BlockKind, SectionKind, BLOCK, ENTRY_BYTES, FORMAT_MAJOR, MAX_ALIGN};
use crate::types::Codec;

use super::SchemaJsonError;

/// What is wrong with a store's metadata ([`Error::Corrupt`](super::Error::Corrupt)).
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreProblem {
    /// The file (`object`: the remote object) is too small for its two blocks.
    #[error(
        "the {} is {len} bytes, too small for a superblock and a footer",
        file(*object)
    )]
    TooSmall { len: u64, object: bool },
    /// A block does not start with its magic bytes.
    #[error("bad {block} magic")]
    BadMagic { block: BlockKind },
    /// A block's checksum does not match its bytes.
    #[error("{block} checksum mismatch")]
    BlockChecksum { block: BlockKind },
    /// A block names a format major version older than the first.
    #[error(
        "{block}: format major version {major} does not exist (v{} is the first)",
        FORMAT_MAJOR
    )]
    NoSuchMajor { block: BlockKind, major: u16 },
    /// The superblock's record alignment is not a power of two up to the maximum.
    #[error(
        "superblock alignment {align} is not a power of two up to {}",
        MAX_ALIGN
    )]
    Alignment { align: u32 },
    /// The footer's table entry size is not the format's.
    #[error("footer: table entry size {size}, expected {}", ENTRY_BYTES)]
    EntrySize { size: u32 },
    /// The footer's file length is not the file's.
    #[error(
        "the footer says the file is {footer} bytes but it is {actual} (truncated or appended to)"
    )]
    FileLength { footer: u64, actual: u64 },
    /// The footer's and the superblock's alignments differ.
    #[error("footer alignment {footer} differs from superblock alignment {superblock}")]
    AlignmentMismatch { footer: u32, superblock: u32 },
    /// The data region does not start right after the superblock.
    #[error("data region starts at {offset}, expected {}", BLOCK)]
    DataOffset { offset: u64 },
    /// A section overlaps another, is out of order or reaches past the footer.
    #[error("{section} section {offset}..+{len} is out of place (file is {file_len} bytes)")]
    SectionOutOfPlace {
        section: SectionKind,
        offset: u64,
        len: u64,
        file_len: u64,
    },
    /// The table or shapes section is not aligned for its integers.
    #[error("table or shapes section is misaligned")]
    Misaligned,
    /// A section is larger than this process can hold.
    #[error("{section} section too large")]
    SectionTooLarge { section: SectionKind },
    /// A section lies outside the file (`object`: the fetched remote object).
    #[error("{section} section outside the {}", file(*object))]
    SectionOutside { section: SectionKind, object: bool },
    /// A section's checksum does not match its bytes.
    #[error(
        "{section} section checksum mismatch (stored {expected:016x}, computed {actual:016x})"
    )]
    SectionChecksum {
        section: SectionKind,
        expected: u64,
        actual: u64,
    },
    /// The schema section does not parse.
    // Transparent: the detail's text is this one's, and its own source follows.
    #[error(transparent)]
    Schema(SchemaJsonError),
    /// The schema's record count is not the footer's.
    #[error("schema counts {schema} records but the footer {footer}")]
    RecordCount { schema: u64, footer: u64 },
    /// The table is not one entry per record.
    #[error("table is {len} bytes, expected {records} records x {}", ENTRY_BYTES)]
    TableLen { len: u64, records: u64 },
    /// The shapes section is not `ndim` u32s per record (`expected` is `None` when
    /// that overflows).
    #[error("shapes section is {len} bytes, {}", ShapesExpected(*expected))]
    ShapesLen { len: u64, expected: Option<u64> },
    /// A dictionary without codec zstd-dict, or zstd-dict without one.
    #[error("codec {codec} with a {dict_len}-byte dictionary")]
    Dictionary { codec: Codec, dict_len: u64 },
    /// The schema declares dense records of zero bytes.
    #[error("the schema declares dense records of zero bytes")]
    ZeroSizeRecords,
    /// The file ends inside a record (a read that is about no one record).
    #[error("the file ends inside a record")]
    EndsInsideRecord,
}

/// What a store's bytes are: a local file's or a remote object's.
fn file(object: bool) -> &'static str {
    if object {
        "object"
    } else {
        "file"
    }
}

/// What the shapes section should be, or that it cannot be.
struct ShapesExpected(Option<u64>);

impl fmt::Display for ShapesExpected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(e) => write!(f, "expected {e}"),
            None => f.write_str("and the records' shapes cannot fit a file"),
        }
    }
}

/// What is wrong with one record ([`Error::CorruptRecord`](super::Error::CorruptRecord)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordProblem {
    /// The stored bytes do not hash to the entry's checksum.
    #[error("checksum mismatch (stored {expected:016x}, computed {actual:016x})")]
    ChecksumMismatch { expected: u64, actual: u64 },
    /// The file ends inside the record.
    #[error("the file ends inside the record")]
    EndsInsideRecord,
    /// The record's bytes lie outside the file.
    #[error("outside the file")]
    OutsideFile,
    /// The entry's stored bytes lie outside the data region.
    #[error(
        "stored bytes {offset}..+{stored_len} lie outside the data region {data_start}..{data_end}"
    )]
    OutsideDataRegion {
        offset: u64,
        stored_len: u32,
        data_start: u64,
        data_end: u64,
    },
    /// The entry's stored bytes start before the end of those of `previous`, the
    /// last non-empty record before it in the table (bytes `previous_start ..
    /// previous_end`): inside them (a copied or overlapping entry) or before them
    /// (an entry gone backwards). A writer stores records in table order without
    /// overlap, so such an entry would read another record's bytes.
    #[error(
        "its stored bytes {offset}..{} start {}",
        offset.saturating_add(u64::from(*stored_len)),
        OutOfOrder { offset: *offset, previous: *previous, previous_start: *previous_start, previous_end: *previous_end }
    )]
    OutOfOrder {
        offset: u64,
        stored_len: u32,
        previous: u64,
        previous_start: u64,
        previous_end: u64,
    },
    /// Compressed with a dictionary, in a store without one.
    #[error("compressed with a dictionary but the store has none")]
    NoDictionary,
    /// A dense record whose logical length is not the record size.
    #[error("logical length {logical} differs from the record size {record_bytes}")]
    LogicalLength { logical: u32, record_bytes: u64 },
    /// A ragged record whose shape implies another size than its entry's
    /// (`shape_bytes` is `None` when the product overflows).
    #[error(
        "shape implies {} but the table says {logical}",
        Bytes(*shape_bytes, "too many bytes")
    )]
    ShapeBytes {
        shape_bytes: Option<u64>,
        logical: u32,
    },
    /// The zstd frame header declares another size than the entry (`None`: no size).
    #[error(
        "decompressed to {} per its zstd frame header, the table says {logical}",
        Bytes(*declared, "an unknown number of bytes")
    )]
    FrameSize { declared: Option<u64>, logical: u32 },
    /// Decompression gave another size than the entry's.
    #[error("decompressed to {got} bytes, the table says {expected}")]
    DecompressedSize { got: usize, expected: usize },
    /// zstd refused the stored bytes (its error is the source).
    #[error("zstd: {0}")]
    Zstd(#[source] io::Error),
}

/// `N bytes`, or what stands for an unknown count.
struct Bytes(Option<u64>, &'static str);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(b) => write!(f, "{b} bytes"),
            None => f.write_str(self.1),
        }
    }
}

/// Where an out-of-order record's bytes start relative to the previous record's:
/// inside them, or before them.
struct OutOfOrder {
    offset: u64,
    previous: u64,
    previous_start: u64,
    previous_end: u64,
}

impl fmt::Display for OutOfOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let OutOfOrder {
            offset,
            previous,
            previous_start,
            previous_end,
        } = self;
        let span = format!("bytes {previous_start}..{previous_end}");
        match offset >= previous_start {
            true => write!(
                f,
                "inside record {previous} ({span}): records never overlap"
            ),
            false => write!(
                f,
                "before record {previous} ({span}), which comes earlier in the table: records \
                 are stored in table order"
            ),
        }
    }
}
