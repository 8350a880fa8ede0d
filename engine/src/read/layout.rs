//! The layout checks every open does, local or remote: the superblock and footer
//! decoded into errors that name the file, and the schema section checked against
//! what the footer's sections must be for it.

use std::path::Path;

use crate::error::{Error, Result, StoreProblem};
use crate::format::{self, BlockError, BlockKind, Footer, SectionKind, Superblock};
use crate::schema::{Codec, Layout, StoreSchema};

fn block_err(path: &Path, e: BlockError, block: BlockKind) -> Error {
    let problem = match e {
        BlockError::Magic => StoreProblem::BadMagic { block },
        BlockError::Checksum => StoreProblem::BlockChecksum { block },
        BlockError::Version { major, minor } => {
            return Error::UnsupportedVersion {
                path: path.to_path_buf(),
                found_major: major,
                found_minor: minor,
            }
        }
        BlockError::NoSuchMajor { major } => StoreProblem::NoSuchMajor { block, major },
        BlockError::Alignment { align } => StoreProblem::Alignment { align },
        BlockError::EntrySize { size } => StoreProblem::EntrySize { size },
    };
    Error::corrupt(path, problem)
}

/// Decodes a store's first block (also for remote stores).
pub(crate) fn decode_superblock(path: &Path, block: &[u8]) -> Result<Superblock> {
    Superblock::decode(block).map_err(|e| block_err(path, e, BlockKind::Superblock))
}

/// Decodes a store's last block (also for remote stores).
pub(crate) fn decode_footer(path: &Path, block: &[u8]) -> Result<Footer> {
    Footer::decode(block).map_err(|e| block_err(path, e, BlockKind::Footer))
}

/// Parses the schema section and checks what the footer's sections must be for it.
pub(crate) fn check_schema(path: &Path, json: &[u8], f: &Footer) -> Result<StoreSchema> {
    let bad = |problem: StoreProblem| Error::corrupt(path, problem);
    let stored = StoreSchema::from_json(json).map_err(|e| bad(StoreProblem::Schema(e)))?;
    if stored.record_count != f.record_count {
        return Err(bad(StoreProblem::RecordCount {
            schema: stored.record_count,
            footer: f.record_count,
        }));
    }
    if format::table_len(f.record_count) != Some(f.table.len) {
        return Err(bad(StoreProblem::TableLen {
            len: f.table.len,
            records: f.record_count,
        }));
    }
    let ndim = match stored.schema.layout {
        Layout::Dense { .. } => 0,
        Layout::Ragged { ndim } => ndim,
    };
    let shapes_len = format::shapes_len(f.record_count, ndim);
    if shapes_len != Some(f.shapes.len) {
        return Err(bad(StoreProblem::ShapesLen {
            len: f.shapes.len,
            expected: shapes_len,
        }));
    }
    if (stored.codec == Codec::ZstdDict) != (f.dict.len > 0) {
        return Err(bad(StoreProblem::Dictionary {
            codec: stored.codec,
            dict_len: f.dict.len,
        }));
    }
    // The writer refuses zero-byte dense records; a schema claiming them is hostile
    // (and a zero record width would break the gather's slot arithmetic).
    if stored.schema.item_bytes() == Some(0) {
        return Err(bad(StoreProblem::ZeroSizeRecords));
    }
    Ok(stored)
}

/// The layout rules a footer must satisfy in a file of `file_len` bytes with
/// superblock `sb`: its length, alignment, and sections in order, inside the file,
/// not overlapping, with aligned table and shapes. Checks nothing that needs the
/// section bytes (checksums, schema) or the record count (section sizes per record:
/// see `format::table_len` and `format::shapes_len`).
pub(crate) fn check_footer(f: &Footer, sb: &Superblock, file_len: u64) -> Result<(), StoreProblem> {
    if f.file_len != file_len {
        return Err(StoreProblem::FileLength {
            footer: f.file_len,
            actual: file_len,
        });
    }
    if f.align != sb.align {
        return Err(StoreProblem::AlignmentMismatch {
            footer: f.align,
            superblock: sb.align,
        });
    }
    if f.data.offset != format::BLOCK as u64 {
        return Err(StoreProblem::DataOffset {
            offset: f.data.offset,
        });
    }
    let mut prev_end = format::BLOCK as u64;
    for (s, section) in f.sections().iter().zip(SectionKind::ALL) {
        let end = s
            .end()
            .filter(|&e| e <= file_len.saturating_sub(format::BLOCK as u64));
        match end {
            Some(end) if s.offset >= prev_end => prev_end = end,
            _ => {
                return Err(StoreProblem::SectionOutOfPlace {
                    section,
                    offset: s.offset,
                    len: s.len,
                    file_len,
                })
            }
        }
    }
    if f.table.offset % 8 != 0 || f.shapes.offset % 4 != 0 {
        return Err(StoreProblem::Misaligned);
    }
    Ok(())
}
