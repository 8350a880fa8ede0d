//! A plan and the ragged gather of its positions, made into one packed batch.

use super::{PackError, PackPlan, Piece};

/// One packed batch, ready for variable-length attention.
///
/// The batch is `rows` rows of `seq_len` tokens, also read as one flat sequence of
/// `rows * seq_len` tokens, which is how `cu_seqlens` counts:
///
/// - `tokens`: row-major `[rows, seq_len]`.
/// - `position_ids`: row-major `[rows, seq_len]`, counting from 0 at the start of
///   each piece (a split sequence's rest starts again at 0, as the attention
///   sees it) and of each row's padding.
/// - `cu_seqlens`: the segment boundaries over the flat batch: 0, then the end of
///   every piece and of every row's padding, ending at `rows * seq_len`. Padding
///   is its own segment, so no real token attends to it.
/// - `max_seqlen`: the longest segment, padding included.
/// - `pieces` and `piece_rows`: which tokens of which stream position each
///   segment that is not padding holds, and its row, to carry other fields along
///   per sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct PackedBatch<T> {
    /// Row-major `[rows, seq_len]` tokens, padded with the pad value.
    pub tokens: Vec<T>,
    /// Row-major `[rows, seq_len]` positions within each segment.
    pub position_ids: Vec<i32>,
    /// Segment boundaries over the flattened batch.
    pub cu_seqlens: Vec<i32>,
    /// The longest segment.
    pub max_seqlen: i32,
    /// Rows in the batch.
    pub rows: usize,
    /// Tokens per row.
    pub seq_len: usize,
    /// The pieces, row by row (the plan's).
    pub pieces: Vec<Piece>,
    /// The row of each piece.
    pub piece_rows: Vec<u32>,
}

/// Builds the batch of `plan` from the ragged gather of
/// [`plan.positions()`](PackPlan::positions): sequence `k` of it is
/// `values[cu_seqlens[k]..cu_seqlens[k + 1]]`. Padding is `pad`.
///
/// Fails when the gather does not fit the plan: a different number of
/// sequences, offsets out of order or past the values, or a sequence shorter than
/// the tokens the plan takes of it.
pub fn assemble<T: Copy>(
    plan: &PackPlan,
    values: &[T],
    cu_seqlens: &[u64],
    pad: T,
) -> Result<PackedBatch<T>, PackError> {
    let positions = plan.len_of_positions();
    if cu_seqlens.len() != positions + 1 {
        return Err(PackError::GatherMismatch {
            position: plan.pieces().first().map_or(0, |p| p.position),
            needed: positions as u64 + 1,
            gathered: cu_seqlens.len() as u64,
        });
    }
    assemble_with(plan, pad, |k, piece, tokens| {
        let (start, end) = (cu_seqlens[k], cu_seqlens[k + 1]);
        let needed = piece.start + piece.len;
        if end < start || end > values.len() as u64 || end - start < needed {
            return Err(PackError::GatherMismatch {
                position: piece.position,
                needed,
                gathered: end.saturating_sub(start),
            });
        }
        let from = (start + piece.start) as usize;
        tokens.extend_from_slice(&values[from..from + piece.len as usize]);
        Ok(())
    })
}

/// [`assemble`] with the tokens of each piece appended by `put(k, piece, tokens)`,
/// where `k` is the piece's sequence's index in
/// [`plan.positions()`](PackPlan::positions): for a caller whose tokens are not
/// one slice of `T` (bytes of several sources), so they are copied once.
pub(crate) fn assemble_with<T: Copy>(
    plan: &PackPlan,
    pad: T,
    mut put: impl FnMut(usize, &Piece, &mut Vec<T>) -> Result<(), PackError>,
) -> Result<PackedBatch<T>, PackError> {
    let (rows, seq_len) = (plan.rows(), plan.seq_len());
    // Both are i32 by the packer's construction (rows * seq_len <= i32::MAX).
    let mut tokens = Vec::with_capacity(rows * seq_len);
    let mut position_ids = Vec::with_capacity(rows * seq_len);
    let mut cu = vec![0i32];
    let mut max_seqlen = 0i32;
    let mut pieces = Vec::with_capacity(plan.pieces().len());
    let mut piece_rows = Vec::with_capacity(plan.pieces().len());
    // The index of the current piece's sequence in `plan.positions()`.
    let mut k = 0usize;
    let mut last = None;
    for r in 0..rows {
        for piece in plan.row(r) {
            if last.is_some_and(|p| p != piece.position) {
                k += 1;
            }
            last = Some(piece.position);
            let before = tokens.len();
            put(k, piece, &mut tokens)?;
            debug_assert_eq!(tokens.len() - before, piece.len as usize);
            segment(
                &mut position_ids,
                &mut cu,
                &mut max_seqlen,
                piece.len as i32,
            );
            pieces.push(*piece);
            piece_rows.push(r as u32);
        }
        let used = tokens.len() - r * seq_len;
        if used < seq_len {
            let padding = seq_len - used;
            tokens.resize(tokens.len() + padding, pad);
            segment(&mut position_ids, &mut cu, &mut max_seqlen, padding as i32);
        }
    }
    Ok(PackedBatch {
        tokens,
        position_ids,
        cu_seqlens: cu,
        max_seqlen,
        rows,
        seq_len,
        pieces,
        piece_rows,
    })
}

/// Appends one segment of `len` tokens: its positions and its boundary.
fn segment(position_ids: &mut Vec<i32>, cu: &mut Vec<i32>, max_seqlen: &mut i32, len: i32) {
    position_ids.extend(0..len);
    let end = cu[cu.len() - 1] + len;
    cu.push(end);
    *max_seqlen = (*max_seqlen).max(len);
}
