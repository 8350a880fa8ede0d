//! Planning a batch's ranged GETs: pure functions of table entries (no object store,
//! no buffer), unit-tested here and executed by `fetch`. Inputs are byte ranges (a record's
//! stored bytes, or a metadata section), outputs GETs.
//!
//! Unlike the local planner (`read/plan.rs`), which merges in batch order
//! (a device's queue reorders for free), a remote plan sorts the batch's records by
//! offset first: a request costs a round trip, so records `[9, 3, 4]` that lie side
//! by side in the object are worth one GET whatever their batch order. Each record
//! still lands in its own batch slot (the plan keeps the sorted order's positions).
//!
//! Two kinds of pieces:
//! - without a cache, [`coalesced`]: records within `max_gap` bytes of each other
//!   share one GET of at most `max_request` bytes; every record lies inside exactly
//!   one piece;
//! - with a cache, [`chunked`]: the records' parts inside each fixed-size chunk of
//!   the object (neighbours in one chunk merged); the cache fetches and keeps whole
//!   chunks but reads back only these parts. A record may span several chunks.

#![cfg_attr(not(feature = "remote"), allow(dead_code))]

use std::ops::Range;

/// A batch's GETs and which records each holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Batch positions sorted by the record's offset in the object.
    pub order: Vec<usize>,
    /// The byte ranges to fetch, by start offset.
    pub pieces: Vec<Range<u64>>,
    /// For each record in `order`: the pieces holding its bytes (empty for a record
    /// of zero stored bytes).
    pub spans: Vec<Range<usize>>,
}

impl Plan {
    /// For each piece: the positions in `order` of the records it (partly) holds.
    pub fn records_of_pieces(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); self.pieces.len()];
        for (s, span) in self.spans.iter().enumerate() {
            for p in span.clone() {
                out[p].push(s);
            }
        }
        out
    }

    /// The bytes all pieces fetch.
    #[cfg(test)]
    pub(crate) fn fetched_bytes(&self) -> u64 {
        self.pieces.iter().map(|r| r.end - r.start).sum()
    }
}

/// Batch positions of `ranges` sorted by offset (stable: duplicates keep batch order).
fn sorted(ranges: &[Range<u64>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_by_key(|&k| ranges[k].start);
    order
}

/// One GET per group of records lying within `max_gap` bytes of each other (sorted
/// by offset), each GET at most `max_request` bytes unless one record is longer.
/// Overlapping records (duplicates in a batch) always share a GET when it fits.
pub fn coalesced(ranges: &[Range<u64>], max_gap: u64, max_request: u64) -> Plan {
    let order = sorted(ranges);
    let mut pieces: Vec<Range<u64>> = Vec::new();
    let mut spans = Vec::with_capacity(order.len());
    for &k in &order {
        let r = ranges[k].clone();
        if r.is_empty() {
            spans.push(pieces.len()..pieces.len());
            continue;
        }
        if let Some(last) = pieces.last_mut() {
            let end = last.end.max(r.end);
            if r.start <= last.end.saturating_add(max_gap) && end - last.start <= max_request {
                last.end = end;
                spans.push(pieces.len() - 1..pieces.len());
                continue;
            }
        }
        pieces.push(r);
        spans.push(pieces.len() - 1..pieces.len());
    }
    Plan {
        order,
        pieces,
        spans,
    }
}

/// The parts of the records inside each `chunk`-byte chunk of the object (a record
/// may span chunks), parts of one chunk less than `gap` bytes apart merged: what a
/// cache serves (it fetches and keeps whole chunks, and reads back only these
/// parts). Pieces are disjoint, sorted, and each lies inside one chunk.
pub fn chunked(ranges: &[Range<u64>], chunk: u64, gap: u64) -> Plan {
    let chunk = chunk.max(1);
    let order = sorted(ranges);
    let mut parts: Vec<Range<u64>> = Vec::new();
    for r in ranges {
        let mut at = r.start;
        while at < r.end {
            let end = r
                .end
                .min((at / chunk).saturating_add(1).saturating_mul(chunk));
            parts.push(at..end);
            at = end;
        }
    }
    parts.sort_unstable_by_key(|p| p.start);
    let mut pieces: Vec<Range<u64>> = Vec::new();
    for p in parts {
        if let Some(last) = pieces.last_mut() {
            if p.start / chunk == last.start / chunk && p.start <= last.end.saturating_add(gap) {
                last.end = last.end.max(p.end);
                continue;
            }
        }
        pieces.push(p);
    }
    // Pieces are disjoint and sorted, and cover every record: a record's pieces are
    // those it overlaps, side by side.
    let spans = order
        .iter()
        .map(|&k| {
            let r = &ranges[k];
            if r.is_empty() {
                return 0..0;
            }
            pieces.partition_point(|p| p.end <= r.start)
                ..pieces.partition_point(|p| p.start < r.end)
        })
        .collect();
    Plan {
        order,
        pieces,
        spans,
    }
}

/// The index of the chunk holding byte `at`.
pub(crate) fn chunk_of(at: u64, chunk: u64) -> u64 {
    at / chunk.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(offset: u64, len: u32) -> Range<u64> {
        offset..offset + u64::from(len)
    }

    /// Every record lies inside the pieces its span names, and the pieces cover it
    /// contiguously.
    fn check_covers(entries: &[Range<u64>], p: &Plan) {
        assert_eq!(p.order.len(), entries.len());
        let mut seen = p.order.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..entries.len()).collect::<Vec<_>>());
        for (s, &k) in p.order.iter().enumerate() {
            let r = entries[k].clone();
            let span = p.spans[s].clone();
            if r.is_empty() {
                assert!(span.is_empty());
                continue;
            }
            let first = &p.pieces[span.start];
            let last = &p.pieces[span.end - 1];
            assert!(
                first.start <= r.start && r.end <= last.end,
                "{r:?} in {span:?}"
            );
            for w in p.pieces[span].windows(2) {
                assert_eq!(w[0].end, w[1].start, "pieces of one record touch");
            }
        }
    }

    #[test]
    fn neighbours_in_any_batch_order_share_one_get() {
        // Records 2, 0, 1 lie side by side: one GET, whatever the batch order.
        let e = [rec(200, 100), rec(0, 100), rec(100, 100)];
        let p = coalesced(&e, 0, 1 << 20);
        assert_eq!(p.pieces, vec![0..300]);
        assert_eq!(p.order, vec![1, 2, 0]);
        check_covers(&e, &p);
    }

    #[test]
    fn the_gap_threshold_decides_between_one_get_and_two() {
        let e = [rec(0, 100), rec(1100, 100)];
        assert_eq!(coalesced(&e, 999, 1 << 20).pieces, vec![0..100, 1100..1200]);
        assert_eq!(coalesced(&e, 1000, 1 << 20).pieces, vec![0..1200]);
        assert_eq!(coalesced(&e, u64::MAX, 1 << 20).pieces, vec![0..1200]);
    }

    #[test]
    fn requests_stop_at_max_request_but_a_long_record_is_one_get() {
        let e = [rec(0, 100), rec(100, 100), rec(200, 100), rec(300, 1000)];
        let p = coalesced(&e, 0, 250);
        assert_eq!(p.pieces, vec![0..200, 200..300, 300..1300]);
        check_covers(&e, &p);
    }

    #[test]
    fn duplicates_and_zero_length_records_are_planned() {
        let e = [rec(500, 10), rec(500, 10), rec(0, 0), rec(505, 2)];
        let p = coalesced(&e, 0, 1 << 20);
        assert_eq!(p.pieces, vec![500..510]);
        check_covers(&e, &p);
        assert_eq!(p.records_of_pieces(), vec![vec![1, 2, 3]]);
    }

    #[test]
    fn chunk_parts_are_asked_once_and_records_may_span_chunks() {
        // chunk 100: record A covers chunks 0-2, B lies inside A in chunk 1, C in
        // chunk 5 (the last, short chunk of a 530-byte object).
        let e = [rec(50, 200), rec(120, 10), rec(510, 20)];
        let p = chunked(&e, 100, 0);
        assert_eq!(p.pieces, vec![50..100, 100..200, 200..250, 510..530]);
        assert_eq!(p.spans, vec![0..3, 1..2, 3..4]);
        check_covers(&e, &p);
        assert_eq!(
            p.records_of_pieces(),
            vec![vec![0], vec![0, 1], vec![0], vec![2]]
        );
        assert_eq!(p.fetched_bytes(), 220);
    }

    #[test]
    fn chunk_parts_merge_within_the_gap_but_never_across_chunks() {
        let e = [rec(10, 10), rec(40, 10), rec(95, 10), rec(300, 0)];
        assert_eq!(
            chunked(&e, 100, 19).pieces,
            vec![10..20, 40..50, 95..100, 100..105]
        );
        let p = chunked(&e, 100, 20);
        assert_eq!(p.pieces, vec![10..50, 95..100, 100..105]);
        check_covers(&e, &p);
        assert_eq!(chunked(&e, 100, 1000).pieces, vec![10..100, 100..105]);
        // Duplicates share their part.
        let d = [rec(5, 10), rec(5, 10)];
        let p = chunked(&d, 100, 0);
        assert_eq!(p.pieces, vec![5..15]);
        assert_eq!(p.spans, vec![0..1, 0..1]);
    }

    #[test]
    fn random_batches_are_covered_under_every_rule() {
        let mut x = 11u64;
        let entries: Vec<Range<u64>> = (0..400)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                rec(4096 + (x >> 40) % 200_000, (x >> 20) as u32 % 9000)
            })
            .collect();
        for (gap, max) in [(0, 1), (0, 1 << 20), (4096, 64 << 10), (u64::MAX, u64::MAX)] {
            check_covers(&entries, &coalesced(&entries, gap, max));
        }
        for chunk in [1, 4096, 1 << 20] {
            for gap in [0, 4096, u64::MAX] {
                let p = chunked(&entries, chunk, gap);
                check_covers(&entries, &p);
                for w in p.pieces.windows(2) {
                    assert!(w[0].end <= w[1].start, "disjoint, sorted");
                }
                for piece in &p.pieces {
                    assert_eq!(piece.start / chunk, (piece.end - 1) / chunk, "one chunk");
                }
            }
        }
        // With an unbounded gap and request, one GET.
        assert_eq!(coalesced(&entries, u64::MAX, u64::MAX).pieces.len(), 1);
    }
}
