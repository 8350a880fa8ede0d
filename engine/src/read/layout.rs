//! The layout checks every open does, local or remote: the superblock and footer
//! decoded into errors that name the file, and the schema section checked against
//! what the footer's sections must be for it.

use std::path::Path;

use crate::error::{Error, RecordProblem, Result, StoreProblem};
use crate::format::{
    self, BlockError, BlockKind, Footer, Section, SectionKind, Superblock, ENTRY_BYTES,
};
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

/// The table rule on one entry's position (docs/format.md, Table section): its
/// stored bytes `offset .. offset + stored_len` lie inside the data region `data`.
/// Checked for every entry at open ([`TableScan`]) and again on every lookup.
pub(crate) fn outside_data_region(
    offset: u64,
    stored_len: u32,
    data: Section,
) -> Option<RecordProblem> {
    let data_end = data.offset.saturating_add(data.len);
    let end = offset.checked_add(u64::from(stored_len));
    match offset < data.offset || end.is_none_or(|end| end > data_end) {
        true => Some(RecordProblem::OutsideDataRegion {
            offset,
            stored_len,
            data_start: data.offset,
            data_end,
        }),
        false => None,
    }
}

/// One pass over a table, fed in pieces of whole entries as open reads and
/// checksums it, checking what no later lookup can see from one entry alone: that
/// records lie where a writer puts them. Each entry's stored bytes must lie inside
/// the data region, and each non-empty record's must start at or after the end of
/// the previous non-empty record's: in table order, never overlapping. Without
/// this, an entry copied from another one (checksum included) reads that record's
/// bytes, and every check on its own entry and bytes passes.
///
/// Empty records (`stored_len` 0) are exempt from the order: they hold no bytes,
/// so they can alias nothing, and the format lets their offset be any offset in the
/// data region (the writer puts them where the next record starts, so several may
/// share one). Gaps (alignment padding) are allowed. Only the position fields
/// (offset, stored length) are read: the other fields are checked on every lookup.
///
/// The first bad entry is kept, with its index; later pieces are then skipped.
pub(crate) struct TableScan {
    data_start: u64,
    data_end: u64,
    /// Index of the next entry fed.
    next: u64,
    /// The last non-empty record so far: its index and where its stored bytes
    /// start and end (`previous_end` is the data region's start before the first).
    previous: u64,
    previous_start: u64,
    previous_end: u64,
    problem: Option<(u64, RecordProblem)>,
}

impl TableScan {
    /// A scan of the table of a store whose data region is `data`.
    pub(crate) fn new(data: Section) -> Self {
        Self {
            data_start: data.offset,
            data_end: data.offset.saturating_add(data.len),
            next: 0,
            previous: 0,
            previous_start: data.offset,
            previous_end: data.offset,
            problem: None,
        }
    }

    /// Checks the entries in `bytes` (whole entries, following those fed before; a
    /// partial entry at the end, which only a table of the wrong length has, is
    /// left to the table length check).
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        // 32 KiB blocks: a block laid out as the writer lays records out passes a
        // branch-free test of all its entries (the pass costs little next to the
        // checksum of the same bytes); any other block is walked entry by entry,
        // which accepts what the format allows beyond that and names the first
        // bad entry.
        const BLOCK: usize = 1024 * ENTRY_BYTES;
        for block in bytes.chunks(BLOCK) {
            if self.problem.is_some() {
                return;
            }
            match self.as_written(block) {
                true => self.passed(block),
                false => self.walk(block),
            }
        }
    }

    /// Whether every entry of `block`, empty or not, starts at or after the end of
    /// the one before it (the first: of the last non-empty record before the
    /// block), and the last ends inside the data region: the writer's layout,
    /// stricter than the rule (which lets an empty record's offset be anywhere in
    /// the region), so a block that passes keeps the rule. Each entry's test
    /// depends on no earlier result, so the loop runs at the speed of its loads.
    fn as_written(&self, block: &[u8]) -> bool {
        let mut previous_end = self.previous_end;
        let mut bad = false;
        for raw in block.chunks_exact(ENTRY_BYTES) {
            let offset = format::u64_at(raw, 0);
            let end = offset.wrapping_add(u64::from(format::u32_at(raw, 8)));
            bad |= (offset < previous_end) | (end < offset);
            previous_end = end;
        }
        // The ends only grow (no entry wrapped): the last is the largest.
        !bad && previous_end <= self.data_end
    }

    /// Moves past `block`, which passed [`TableScan::as_written`].
    fn passed(&mut self, block: &[u8]) {
        let entries = block.chunks_exact(ENTRY_BYTES);
        let count = entries.len() as u64;
        if let Some((k, raw)) = entries
            .enumerate()
            .rev()
            .find(|(_, raw)| format::u32_at(raw, 8) != 0)
        {
            let offset = format::u64_at(raw, 0);
            self.previous = self.next + k as u64;
            self.previous_start = offset;
            self.previous_end = offset + u64::from(format::u32_at(raw, 8));
        }
        self.next += count;
    }

    /// Walks `block` entry by entry by the rule itself, stopping at its first bad
    /// entry (if any).
    #[cold]
    fn walk(&mut self, block: &[u8]) {
        for raw in block.chunks_exact(ENTRY_BYTES) {
            let index = self.next;
            let offset = format::u64_at(raw, 0);
            let stored_len = format::u32_at(raw, 8);
            let end = offset.wrapping_add(u64::from(stored_len));
            let lowest = match stored_len {
                0 => self.data_start,
                _ => self.previous_end,
            };
            if offset < lowest || end > self.data_end || end < offset {
                self.problem = Some((index, self.refuse(offset, stored_len)));
                return;
            }
            if stored_len != 0 {
                (self.previous, self.previous_start, self.previous_end) = (index, offset, end);
            }
            self.next += 1;
        }
    }

    /// Why an entry at `offset .. + stored_len` failed the scan's test.
    fn refuse(&self, offset: u64, stored_len: u32) -> RecordProblem {
        let data = Section {
            offset: self.data_start,
            len: self.data_end - self.data_start,
            checksum: 0,
        };
        if let Some(p) = outside_data_region(offset, stored_len, data) {
            return p;
        }
        // Inside the region, so non-empty and starting before the previous non-empty
        // record's end (there is one: before it, that end is the region's start).
        RecordProblem::OutOfOrder {
            offset,
            stored_len,
            previous: self.previous,
            previous_start: self.previous_start,
            previous_end: self.previous_end,
        }
    }

    /// The first bad entry, as the error that names it in the store at `path`.
    pub(crate) fn finish(self, path: &Path) -> Result<()> {
        match self.problem {
            Some((index, problem)) => Err(Error::record(path, index, problem)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{Entry, RecordCodec};

    const DATA: Section = Section {
        offset: 4096,
        len: 4096,
        checksum: 0,
    };

    fn table(spans: &[(u64, u32)]) -> Vec<u8> {
        spans
            .iter()
            .flat_map(|&(offset, stored_len)| {
                Entry {
                    offset,
                    stored_len,
                    logical_len: stored_len,
                    checksum: 0,
                    codec: RecordCodec::Raw,
                }
                .encode()
            })
            .collect()
    }

    /// The scan's verdict on `spans`, fed `piece` entries at a time.
    fn scan(spans: &[(u64, u32)], piece: usize) -> Option<(u64, RecordProblem)> {
        let t = table(spans);
        let mut s = TableScan::new(DATA);
        for p in t.chunks(piece * ENTRY_BYTES) {
            s.feed(p);
        }
        s.problem
    }

    #[test]
    fn what_a_writer_produces_passes() {
        // Back to back, padded gaps, empty records sharing an offset with the next
        // record and with each other, an empty record at the very end, and an empty
        // record anywhere in the region (the format allows it).
        let spans = [
            (4096, 100),
            (4200, 8),
            (4208, 0),
            (4208, 0),
            (4208, 50),
            (4264, 0),
            (4096, 0),
            (4264, 3832),
            (8192, 0),
        ];
        for piece in [1, 2, 3, spans.len()] {
            assert!(scan(&spans, piece).is_none(), "piece {piece}");
        }
        assert!(scan(&[], 1).is_none());
    }

    #[test]
    fn copied_backwards_overlapping_and_outside_entries_are_named() {
        let out_of_order = |spans: &[(u64, u32)], want: (u64, u64, u64, u64)| {
            for piece in [1, 2, spans.len()] {
                match scan(spans, piece) {
                    Some((
                        index,
                        RecordProblem::OutOfOrder {
                            offset,
                            previous,
                            previous_start,
                            ..
                        },
                    )) => assert_eq!((index, offset, previous, previous_start), want),
                    other => panic!("{spans:?}: {other:?}"),
                }
            }
        };
        // A copy of the previous entry.
        out_of_order(&[(4096, 100), (4096, 100)], (1, 4096, 0, 4096));
        // One byte of overlap.
        out_of_order(&[(4096, 100), (4195, 8)], (1, 4195, 0, 4096));
        // Backwards, past an empty record (compared with the last non-empty one).
        out_of_order(
            &[(4096, 8), (4200, 8), (4208, 0), (4096, 8)],
            (3, 4096, 1, 4200),
        );
        // Across the scan's blocks of 1024 entries: the previous non-empty record
        // is found in an earlier block, past empty ones.
        let mut spans: Vec<(u64, u32)> = (0..1020).map(|i| (4096 + 2 * i, 2)).collect();
        spans.extend([(6136, 0); 10]);
        spans.push((6134, 2));
        for piece in [1, 1000, 1024, spans.len()] {
            match scan(&spans, piece) {
                Some((1030, RecordProblem::OutOfOrder { previous: 1019, .. })) => {}
                other => panic!("piece {piece}: {other:?}"),
            }
        }
        spans.pop();
        spans.push((6136, 2));
        assert!(scan(&spans, 1024).is_none());
        // An empty record anywhere in the region (allowed, though no writer puts
        // one there) in the middle of a long table: its block is walked, and the
        // blocks after it still see the right previous record.
        let mut spans: Vec<(u64, u32)> = (0..3000).map(|i| (4096 + i, 1)).collect();
        spans[1500] = (4096, 0);
        for piece in [1, 1024, 3000] {
            assert!(scan(&spans, piece).is_none(), "piece {piece}");
        }
        spans[2500].0 -= 1;
        for piece in [1, 1024, 3000] {
            match scan(&spans, piece) {
                Some((2500, RecordProblem::OutOfOrder { previous: 2499, .. })) => {}
                other => panic!("piece {piece}: {other:?}"),
            }
        }
        for spans in [
            &[(4096, 8), (4000, 8)][..],
            &[(4096, 8), (8190, 8)],
            &[(4096, 8), (u64::MAX - 2, 8)],
            &[(4096, 8), (8193, 0)],
        ] {
            assert!(
                matches!(
                    scan(spans, 1),
                    Some((1, RecordProblem::OutsideDataRegion { .. }))
                ),
                "{spans:?}"
            );
        }
    }
}
