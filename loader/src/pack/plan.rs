//! The packer: which tokens of which stream positions fill each row.

use super::{PackError, PackState, PackStrategy};

/// Consecutive empty sequences after which packing gives up (else a stream of
/// empty sequences would spin forever).
const MAX_EMPTY_RUN: u64 = 1 << 20;

/// Tokens `[start, start + len)` of the sequence at stream `position`, placed
/// consecutively in one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// The stream position of the sequence.
    pub position: u64,
    /// The first token of the sequence this piece takes.
    pub start: u64,
    /// How many tokens it takes.
    pub len: u64,
}

/// One batch's placement: the pieces of each row, in row order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackPlan {
    pieces: Vec<Piece>,
    /// `pieces[row_ends[r - 1]..row_ends[r]]` is row `r`.
    row_ends: Vec<usize>,
    seq_len: usize,
}

impl PackPlan {
    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.row_ends.len()
    }

    /// Tokens per row.
    pub fn seq_len(&self) -> usize {
        self.seq_len
    }

    /// Row `r`'s pieces, in the order they sit in the row.
    pub fn row(&self, r: usize) -> &[Piece] {
        let start = if r == 0 { 0 } else { self.row_ends[r - 1] };
        &self.pieces[start..self.row_ends[r]]
    }

    /// Every piece, row by row.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// The stream positions to gather for this plan, each once, in the order they
    /// first appear: [`assemble`](super::assemble) takes their ragged gather in this
    /// order.
    pub fn positions(&self) -> Vec<u64> {
        let mut out: Vec<u64> = Vec::with_capacity(self.pieces.len());
        for piece in &self.pieces {
            // A position appears in at most two consecutive pieces (concat splits
            // a sequence only at a row end), and first fit never repeats one.
            if out.last() != Some(&piece.position) {
                out.push(piece.position);
            }
        }
        out
    }

    /// How many entries [`positions`](Self::positions) has, without building it.
    pub(crate) fn len_of_positions(&self) -> usize {
        let mut n = 0;
        let mut last = None;
        for piece in &self.pieces {
            if last != Some(piece.position) {
                n += 1;
                last = Some(piece.position);
            }
        }
        n
    }

    /// The plan of rows `rows` alone (a rank's share of a global batch): their
    /// pieces, in the same places. `rows` must lie within the plan.
    pub fn select_rows(&self, rows: std::ops::Range<usize>) -> PackPlan {
        let mut pieces = Vec::new();
        let mut row_ends = Vec::with_capacity(rows.len());
        for r in rows {
            pieces.extend_from_slice(self.row(r));
            row_ends.push(pieces.len());
        }
        PackPlan {
            pieces,
            row_ends,
            seq_len: self.seq_len,
        }
    }

    /// The tokens that are not padding.
    pub fn tokens(&self) -> u64 {
        self.pieces.iter().map(|p| p.len).sum()
    }
}

/// Plans batches of `rows` rows of `seq_len` tokens; see the
/// notes of the packing module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packer {
    seq_len: usize,
    rows: usize,
    strategy: PackStrategy,
    window: usize,
    state: PackState,
}

impl Packer {
    /// A packer at stream position 0. First fit holds over at most
    /// `max(4 * rows, 64)` sequences unless [`with_window`](Self::with_window)
    /// says otherwise.
    pub fn new(seq_len: usize, rows: usize, strategy: PackStrategy) -> Result<Self, PackError> {
        if seq_len == 0 {
            return Err(PackError::ZeroSeqLen);
        }
        if rows == 0 {
            return Err(PackError::ZeroRows);
        }
        if rows
            .checked_mul(seq_len)
            .is_none_or(|n| n > i32::MAX as usize)
        {
            return Err(PackError::BatchTooLarge { rows, seq_len });
        }
        Ok(Self {
            seq_len,
            rows,
            strategy,
            window: (4 * rows).max(64),
            state: PackState::default(),
        })
    }

    /// First fit's bound on held-over sequences.
    pub fn with_window(self, window: usize) -> Result<Self, PackError> {
        if window == 0 {
            return Err(PackError::ZeroWindow);
        }
        Ok(Self { window, ..self })
    }

    /// The same packer continuing from a state taken with [`state`](Self::state).
    pub fn resume(self, state: PackState) -> Result<Self, PackError> {
        match self.strategy {
            PackStrategy::Concat if !state.pending.is_empty() || state.truncated != 0 => {
                Err(PackError::ForeignState {
                    reason: "it holds first-fit sequences, and this packer concatenates",
                })
            }
            PackStrategy::FirstFit if state.offset != 0 => Err(PackError::ForeignState {
                reason: "it is in the middle of a split sequence, and first fit never splits",
            }),
            PackStrategy::FirstFit if state.pending.len() > self.window => {
                Err(PackError::ForeignState {
                    reason: "it holds more sequences over than this packer's window",
                })
            }
            _ => Ok(Self { state, ..self }),
        }
    }

    /// Rows per batch.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Where the packer stands: what a checkpoint keeps.
    pub fn state(&self) -> &PackState {
        &self.state
    }

    /// Plans the next batch, asking `len_of` the length of each stream position it
    /// looks at. On error the packer's state is unchanged.
    pub fn next_plan<E>(
        &mut self,
        mut len_of: impl FnMut(u64) -> Result<u64, E>,
    ) -> Result<PackPlan, PackError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let mut len = |position: u64| {
            len_of(position).map_err(|e| PackError::Length {
                position,
                source: e.into(),
            })
        };
        let mut state = self.state.clone();
        let plan = match self.strategy {
            PackStrategy::Concat => self.concat(&mut state, &mut len)?,
            PackStrategy::FirstFit => self.first_fit(&mut state, &mut len)?,
        };
        state.batches += 1;
        self.state = state;
        Ok(plan)
    }

    fn concat(
        &self,
        state: &mut PackState,
        len: &mut impl FnMut(u64) -> Result<u64, PackError>,
    ) -> Result<PackPlan, PackError> {
        let seq_len = self.seq_len as u64;
        let mut pieces = Vec::new();
        let mut row_ends = Vec::with_capacity(self.rows);
        let mut empty = EmptyRun::default();
        for _ in 0..self.rows {
            let mut fill = 0;
            while fill < seq_len {
                let n = len(state.next)?;
                if state.offset >= n {
                    // Empty (or, from a foreign state, already consumed).
                    empty.see(state.next)?;
                    state.next += 1;
                    state.offset = 0;
                    continue;
                }
                empty.reset();
                let take = (n - state.offset).min(seq_len - fill);
                pieces.push(Piece {
                    position: state.next,
                    start: state.offset,
                    len: take,
                });
                fill += take;
                state.offset += take;
                if state.offset == n {
                    state.next += 1;
                    state.offset = 0;
                }
            }
            row_ends.push(pieces.len());
        }
        Ok(PackPlan {
            pieces,
            row_ends,
            seq_len: self.seq_len,
        })
    }

    fn first_fit(
        &self,
        state: &mut PackState,
        len: &mut impl FnMut(u64) -> Result<u64, PackError>,
    ) -> Result<PackPlan, PackError> {
        let seq_len = self.seq_len as u64;
        let mut rows = Rows::new(self.rows, seq_len);
        let mut held = Vec::new();
        // Held-over sequences first, oldest first: the oldest always finds an empty
        // row, so nothing waits forever.
        for position in std::mem::take(&mut state.pending) {
            let n = len(position)?.min(seq_len);
            if n > 0 && !rows.place(position, n) {
                held.push(position);
            }
        }
        let mut empty = EmptyRun::default();
        while held.len() < self.window && !rows.full() {
            let position = state.next;
            let n = len(position)?;
            state.next += 1;
            if n == 0 {
                empty.see(position)?;
                continue;
            }
            empty.reset();
            if n > seq_len {
                state.truncated += 1;
            }
            if !rows.place(position, n.min(seq_len)) {
                held.push(position);
            }
        }
        state.pending = held;
        Ok(rows.into_plan(self.seq_len))
    }
}

/// First fit's rows while a batch is planned.
struct Rows {
    room: Vec<u64>,
    pieces: Vec<Vec<Piece>>,
}

impl Rows {
    fn new(rows: usize, seq_len: u64) -> Self {
        Self {
            room: vec![seq_len; rows],
            pieces: vec![Vec::new(); rows],
        }
    }

    /// Places a whole sequence in the fullest row it fits in (the lowest such
    /// row on a tie); false when it fits nowhere.
    fn place(&mut self, position: u64, len: u64) -> bool {
        let best = (0..self.room.len())
            .filter(|&r| self.room[r] >= len)
            .min_by_key(|&r| (self.room[r], r));
        let Some(r) = best else { return false };
        self.room[r] -= len;
        self.pieces[r].push(Piece {
            position,
            start: 0,
            len,
        });
        true
    }

    fn full(&self) -> bool {
        self.room.iter().all(|&r| r == 0)
    }

    fn into_plan(self, seq_len: usize) -> PackPlan {
        let mut row_ends = Vec::with_capacity(self.pieces.len());
        let mut pieces = Vec::new();
        for row in self.pieces {
            pieces.extend(row);
            row_ends.push(pieces.len());
        }
        PackPlan {
            pieces,
            row_ends,
            seq_len,
        }
    }
}

/// Counts consecutive empty sequences.
#[derive(Default)]
struct EmptyRun {
    from: u64,
    count: u64,
}

impl EmptyRun {
    fn see(&mut self, position: u64) -> Result<(), PackError> {
        if self.count == 0 {
            self.from = position;
        }
        self.count += 1;
        if self.count >= MAX_EMPTY_RUN {
            return Err(PackError::NoTokens {
                from: self.from,
                positions: self.count,
            });
        }
        Ok(())
    }

    fn reset(&mut self) {
        self.count = 0;
    }
}
