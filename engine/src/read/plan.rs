//! Planning reads: which byte ranges of the file a batch of records needs.
//!
//! Pure functions of table entries, with no file, no buffer and no backend, so they
//! are tested on their own and serve every source alike: the io_uring executor, and
//! anything that wants to know a batch's reads before (or instead of) doing them,
//! such as a look-ahead loader or a remote object-store reader (see
//! [`Store::plan`](crate::Store::plan)).
//!
//! A plan keeps the batch order. Neighbours merge into one read when the next
//! record starts at or after the previous one's end, within `max_gap` bytes of it,
//! and the merged read stays within `max_read` bytes (the model is glommio's
//! `IOVecMerger`: merging is decided in submission order, never by sorting). With an
//! alignment (O_DIRECT), every read is widened to whole aligned blocks first, so two
//! records in one block become one read of that block.

use std::ops::Range;

use crate::entry::Entry;

/// How reads are widened and merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coalesce {
    /// The largest hole between two records that one read may span (its bytes are
    /// read and ignored). `None` never merges.
    pub max_gap: Option<u64>,
    /// The longest merged read in bytes (a single record longer than this is still
    /// one read).
    pub max_read: u64,
    /// Reads start and end on multiples of this (a power of two; 1 for buffered I/O,
    /// 4096 for O_DIRECT).
    pub align: u64,
}

impl Coalesce {
    /// One read per record, unaligned.
    pub const NONE: Coalesce = Coalesce {
        max_gap: None,
        max_read: 0,
        align: 1,
    };

    /// Buffered reads: merge records that touch (the common case of consecutive
    /// records of a dense store), up to 256 KiB a read.
    pub const BUFFERED: Coalesce = Coalesce {
        max_gap: Some(0),
        max_read: 256 << 10,
        align: 1,
    };

    /// Buffered reads of compressed records: also across holes of up to a page
    /// (records are padded to the store's alignment, so compressed neighbours
    /// rarely touch; reading a few padding bytes costs less than a system call or
    /// a queue entry), up to 256 KiB a read. Merged records land in scratch and are
    /// decoded from it, where they would have landed anyway.
    pub const COMPRESSED: Coalesce = Coalesce {
        max_gap: Some(4096),
        max_read: 256 << 10,
        align: 1,
    };

    /// O_DIRECT reads: whole 4 KiB blocks; records sharing a block, or separated by
    /// less than a block, are read once, up to 1 MiB a read.
    pub const DIRECT: Coalesce = Coalesce {
        max_gap: Some(4096),
        max_read: 1 << 20,
        align: 4096,
    };
}

impl Coalesce {
    /// Whether record `e` joins the read covering `read` under this rule, the
    /// batch's previous record having ended at `prev_end`: it lies forward in the
    /// file, within `max_gap` of the read, and the read stays within `max_read`.
    pub fn joins(&self, read: Range<u64>, prev_end: u64, e: &Entry) -> bool {
        let (start, end) = span(e, self.align);
        self.max_gap.is_some_and(|gap| {
            e.offset >= prev_end
                && start.saturating_sub(read.end) <= gap
                && end.max(read.end) - read.start <= self.max_read
        })
    }
}

/// One read of a plan: `len` bytes at `offset`, holding the records at batch
/// positions `records` (consecutive in the batch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read {
    pub offset: u64,
    pub len: u64,
    pub records: Range<usize>,
}

impl Read {
    /// Where record `e` starts inside this read's bytes.
    pub fn skip(&self, e: &Entry) -> usize {
        (e.offset - self.offset) as usize
    }
}

/// The span `[start, end)` a read of record `e` covers under `align`.
pub fn span(e: &Entry, align: u64) -> (u64, u64) {
    let start = e.offset / align * align;
    let end = (e.offset + u64::from(e.stored_len)).div_ceil(align) * align;
    (start, end)
}

/// Builds a plan one record at a time (so an executor can bound a window's scratch
/// as it goes).
#[derive(Clone, Debug)]
pub struct Planner {
    rule: Coalesce,
    /// The previous record's end, for the "forward in the file" test.
    prev_end: u64,
    records: usize,
    reads: Vec<Read>,
}

impl Planner {
    /// An empty plan under `rule`.
    pub fn new(rule: Coalesce) -> Self {
        Self::with_capacity(rule, 0)
    }

    /// An empty plan with room for `reads` reads.
    pub fn with_capacity(rule: Coalesce, reads: usize) -> Self {
        Self {
            rule,
            prev_end: 0,
            records: 0,
            reads: Vec::with_capacity(reads),
        }
    }

    /// Empties the plan, keeping its memory.
    pub fn clear(&mut self) {
        self.prev_end = 0;
        self.records = 0;
        self.reads.clear();
    }

    /// Adds the next record of the batch; true when it merged into the last read.
    pub fn push(&mut self, e: &Entry) -> bool {
        let rule = self.rule;
        let k = self.records;
        self.records += 1;
        let (start, end) = span(e, rule.align);
        let prev_end = std::mem::replace(&mut self.prev_end, e.offset + u64::from(e.stored_len));
        if let Some(last) = self.reads.last_mut() {
            let last_end = last.offset + last.len;
            if rule.joins(last.offset..last_end, prev_end, e) {
                last.len = end.max(last_end) - last.offset;
                last.records.end = k + 1;
                return true;
            }
        }
        self.reads.push(Read {
            offset: start,
            len: end - start,
            records: k..k + 1,
        });
        false
    }

    /// The reads so far, in batch order.
    pub fn reads(&self) -> &[Read] {
        &self.reads
    }

    /// The reads, consuming the plan.
    pub fn into_reads(self) -> Vec<Read> {
        self.reads
    }
}

/// The reads of `entries` (in batch order) under `rule`.
pub fn coalesce<'e>(entries: impl IntoIterator<Item = &'e Entry>, rule: Coalesce) -> Vec<Read> {
    let mut p = Planner::new(rule);
    for e in entries {
        p.push(e);
    }
    p.into_reads()
}

/// The most scratch one window holds (compressed, merged and unaligned direct reads
/// land in scratch): bounds per-thread memory whatever the batch size.
pub(crate) const SCRATCH_WINDOW: usize = 8 << 20;
/// The most records one window plans at once.
pub(crate) const WINDOW_RECORDS: usize = 4096;

/// Cuts a task's records into windows: runs of at most [`WINDOW_RECORDS`] records
/// whose reads need at most about [`SCRATCH_WINDOW`] bytes of scratch, planned as
/// they are added. A window always takes its first record, so a record larger than
/// the scratch budget is a window of its own; it stops taking records once its
/// scratch reaches the budget. A read lands in scratch unless it is one record that
/// may go straight into its destination slot (the caller says which, from the
/// record and its slot); a record merged into a read moves that read to scratch.
#[derive(Clone, Debug)]
pub(crate) struct Window {
    plan: Planner,
    scratch_len: usize,
    /// Whether the last read goes into its record's slot (so far).
    last_in_slot: bool,
}

impl Window {
    /// An empty window under `rule` with room for `records` records.
    pub(crate) fn with_capacity(rule: Coalesce, records: usize) -> Self {
        Self {
            plan: Planner::with_capacity(rule, records.min(WINDOW_RECORDS)),
            scratch_len: 0,
            last_in_slot: false,
        }
    }

    /// Starts the next window, keeping the memory.
    pub(crate) fn clear(&mut self) {
        self.plan.clear();
        self.scratch_len = 0;
        self.last_in_slot = false;
    }

    /// Whether the window takes another record.
    pub(crate) fn has_room(&self) -> bool {
        let records = self.plan.records;
        records < WINDOW_RECORDS && (records == 0 || self.scratch_len < SCRATCH_WINDOW)
    }

    /// Adds the next record; `in_slot`: whether a read of it alone may land in its
    /// destination slot.
    pub(crate) fn push(&mut self, e: &Entry, in_slot: bool) {
        let before = self.plan.reads().last().map_or(0, |r| r.len as usize);
        let merged = self.plan.push(e);
        let after = self.plan.reads().last().map_or(0, |r| r.len as usize);
        if merged {
            // The read grew; all of it lands in scratch now.
            self.scratch_len += if self.last_in_slot {
                after
            } else {
                after - before
            };
            self.last_in_slot = false;
        } else {
            self.last_in_slot = in_slot;
            if !in_slot {
                self.scratch_len += after;
            }
        }
    }

    /// The scratch bytes the window's reads need.
    pub(crate) fn scratch_len(&self) -> usize {
        self.scratch_len
    }

    /// The window's reads.
    pub(crate) fn plan(&self) -> &Planner {
        &self.plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::RecordCodec;

    fn rec(offset: u64, len: u32) -> Entry {
        Entry {
            offset,
            stored_len: len,
            logical_len: len,
            checksum: 0,
            codec: RecordCodec::Raw,
        }
    }

    fn plan(entries: &[Entry], rule: Coalesce) -> Vec<(u64, u64, Range<usize>)> {
        coalesce(entries, rule)
            .into_iter()
            .map(|r| (r.offset, r.len, r.records))
            .collect()
    }

    #[test]
    fn no_merging_gives_one_read_per_record_in_batch_order() {
        let e = [rec(8192, 10), rec(4096, 10), rec(8202, 5)];
        assert_eq!(
            plan(&e, Coalesce::NONE),
            vec![(8192, 10, 0..1), (4096, 10, 1..2), (8202, 5, 2..3)]
        );
    }

    #[test]
    fn touching_neighbours_merge_and_gaps_or_backward_steps_split() {
        let e = [
            rec(4096, 100),
            rec(4196, 100), // touches: merges
            rec(4300, 10),  // 4-byte hole: split with max_gap 0
            rec(4096, 100), // backwards (a duplicate): split
        ];
        assert_eq!(
            plan(&e, Coalesce::BUFFERED),
            vec![(4096, 200, 0..2), (4300, 10, 2..3), (4096, 100, 3..4)]
        );
        let gap8 = Coalesce {
            max_gap: Some(8),
            ..Coalesce::BUFFERED
        };
        assert_eq!(plan(&e, gap8), vec![(4096, 214, 0..3), (4096, 100, 3..4)]);
    }

    #[test]
    fn merged_reads_stop_at_max_read_but_a_long_record_is_one_read() {
        let rule = Coalesce {
            max_gap: Some(0),
            max_read: 250,
            align: 1,
        };
        let e = [rec(0, 100), rec(100, 100), rec(200, 100), rec(300, 1000)];
        assert_eq!(
            plan(&e, rule),
            vec![(0, 200, 0..2), (200, 100, 2..3), (300, 1000, 3..4)]
        );
    }

    #[test]
    fn direct_reads_are_block_aligned_and_records_sharing_a_block_read_it_once() {
        let e = [rec(4100, 10), rec(4200, 10), rec(20_000, 5000)];
        let reads = plan(&e, Coalesce::DIRECT);
        assert_eq!(reads, vec![(4096, 4096, 0..2), (16384, 12288, 2..3)]);
        let out = coalesce(&e, Coalesce::DIRECT);
        assert_eq!(out[0].skip(&e[1]), 104);
        assert_eq!(out[1].skip(&e[2]), 20_000 - 16384);
    }

    #[test]
    fn every_record_lies_inside_its_read() {
        // A pseudo-random batch: whatever the rule, each record's bytes are inside the
        // read that names it, and the reads name every record once, in order.
        let mut x = 7u64;
        let entries: Vec<Entry> = (0..500)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                rec(4096 + (x >> 40) % 100_000, 1 + (x >> 20) as u32 % 9000)
            })
            .collect();
        for rule in [Coalesce::NONE, Coalesce::BUFFERED, Coalesce::DIRECT] {
            let out = coalesce(&entries, rule);
            let mut next = 0;
            for r in &out {
                assert_eq!(r.records.start, next);
                next = r.records.end;
                assert_eq!(r.offset % rule.align, 0);
                assert_eq!(r.len % rule.align, 0);
                for e in &entries[r.records.clone()] {
                    assert!(e.offset >= r.offset);
                    assert!(e.offset + u64::from(e.stored_len) <= r.offset + r.len);
                }
            }
            assert_eq!(next, entries.len());
        }
    }

    fn zstd(offset: u64, len: u32) -> Entry {
        Entry {
            codec: RecordCodec::Zstd,
            logical_len: len * 2,
            ..rec(offset, len)
        }
    }

    /// Cuts `entries` into windows the way the io_uring executor does: the number of
    /// records and the scratch of each.
    fn windows(entries: &[(Entry, bool)], rule: Coalesce) -> Vec<(usize, usize)> {
        let mut w = Window::with_capacity(rule, entries.len());
        let mut out = Vec::new();
        let mut it = entries.iter().peekable();
        while it.peek().is_some() {
            w.clear();
            let mut n = 0;
            while let Some((e, in_slot)) = it.next_if(|_| w.has_room()) {
                w.push(e, *in_slot);
                n += 1;
            }
            out.push((n, w.scratch_len()));
        }
        out
    }

    #[test]
    fn a_window_holds_at_most_window_records_records() {
        // Raw records read straight into their slots need no scratch: only the record
        // cap cuts them.
        let e: Vec<_> = (0..WINDOW_RECORDS as u64 * 2 + 1)
            .map(|k| (rec(k * 8192, 16), true))
            .collect();
        assert_eq!(
            windows(&e, Coalesce::NONE),
            vec![(WINDOW_RECORDS, 0), (WINDOW_RECORDS, 0), (1, 0)]
        );
    }

    #[test]
    fn a_window_stops_taking_records_once_its_scratch_reaches_the_budget() {
        let mib = 1u32 << 20;
        // Compressed records land in scratch: 8 of 1 MiB fill the 8 MiB budget.
        let e: Vec<_> = (0..20u64)
            .map(|k| (zstd(k * 2 * u64::from(mib), mib), false))
            .collect();
        let per = SCRATCH_WINDOW / mib as usize;
        assert_eq!(
            windows(&e, Coalesce::NONE),
            vec![
                (per, SCRATCH_WINDOW),
                (per, SCRATCH_WINDOW),
                (20 - 2 * per, (20 - 2 * per) * mib as usize)
            ]
        );
        // Just under the budget, the window takes one more record and goes over it.
        let e: Vec<_> = (0..3u64)
            .map(|k| (zstd(k * (8 << 20), (4 << 20) - 1), false))
            .collect();
        assert_eq!(windows(&e, Coalesce::NONE), vec![(3, 3 * ((4 << 20) - 1))]);
    }

    #[test]
    fn a_record_larger_than_the_budget_is_a_window_of_its_own() {
        let big = (SCRATCH_WINDOW * 2) as u32;
        let e = [(zstd(0, big), false), (zstd(1 << 30, 10), false)];
        assert_eq!(
            windows(&e, Coalesce::NONE),
            vec![(1, big as usize), (1, 10)]
        );
    }

    #[test]
    fn merging_moves_a_slot_read_into_scratch() {
        // Two touching raw records: alone, the first would go into its slot; merged,
        // the whole read lands in scratch.
        let e = [(rec(4096, 100), true), (rec(4196, 50), true)];
        assert_eq!(windows(&e[..1], Coalesce::BUFFERED), vec![(1, 0)]);
        assert_eq!(windows(&e, Coalesce::BUFFERED), vec![(2, 150)]);
        // A compressed first record was in scratch already: only the growth is added.
        let e = [(zstd(4096, 100), false), (rec(4196, 50), true)];
        assert_eq!(windows(&e, Coalesce::BUFFERED), vec![(2, 150)]);
    }
}
