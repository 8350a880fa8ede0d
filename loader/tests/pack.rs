//! Sequence packing: every token once and in order (concat), nothing split and
//! every sequence once (first fit), consistent `cu_seqlens` and `position_ids`,
//! exact resume mid-row, first fit's efficiency on W3 lengths, and bad input.

use std::convert::Infallible;

use zring_loader::{assemble, PackError, PackPlan, PackState, PackStrategy, Packer, Piece};

/// Deterministic lengths for stream positions, with some empty sequences and some
/// longer than a row.
fn length(position: u64) -> u64 {
    let h = zring_workloads::rng::mix(position ^ 0xA5A5);
    match h % 23 {
        0 => 0,
        1 => 700 + h % 300,
        _ => 1 + (h >> 8) % 180,
    }
}

fn ok_len(position: u64) -> Result<u64, Infallible> {
    Ok(length(position))
}

/// Token `j` of the sequence at `position`: unique, so misplacements show.
fn token(position: u64, j: u64) -> i64 {
    (position as i64) * 1_000_000 + j as i64
}

/// The ragged gather of a plan's positions, as the engine would return it.
fn gather(plan: &PackPlan) -> (Vec<i64>, Vec<u64>) {
    let mut values = Vec::new();
    let mut cu = vec![0u64];
    for position in plan.positions() {
        values.extend((0..length(position)).map(|j| token(position, j)));
        cu.push(values.len() as u64);
    }
    (values, cu)
}

fn plans(packer: &mut Packer, n: usize) -> Vec<PackPlan> {
    (0..n)
        .map(|_| packer.next_plan(ok_len).expect("plan"))
        .collect()
}

/// Checks one assembled batch against its plan: tokens, positions, boundaries.
fn check_batch(plan: &PackPlan) {
    let (values, cu) = gather(plan);
    let batch = assemble(plan, &values, &cu, -1i64).expect("assemble");
    let (rows, seq_len) = (plan.rows(), plan.seq_len());
    assert_eq!(batch.tokens.len(), rows * seq_len);
    assert_eq!(batch.position_ids.len(), rows * seq_len);
    assert_eq!(batch.cu_seqlens[0], 0);
    assert_eq!(
        *batch.cu_seqlens.last().expect("end"),
        (rows * seq_len) as i32
    );
    // Every segment: position ids count 0.. within it, none crosses a row end,
    // and max_seqlen is the longest.
    let mut longest = 0;
    for w in batch.cu_seqlens.windows(2) {
        let (a, b) = (w[0] as usize, w[1] as usize);
        assert!(b > a, "empty segment");
        assert_eq!(a / seq_len, (b - 1) / seq_len, "segment crosses a row end");
        assert!(batch.position_ids[a..b]
            .iter()
            .copied()
            .eq(0..(b - a) as i32));
        longest = longest.max(b - a);
    }
    assert_eq!(batch.max_seqlen as usize, longest);
    // Each piece's tokens are where the plan says, and the rest is padding.
    let mut real = vec![false; rows * seq_len];
    let mut at = vec![0usize; rows];
    for (piece, &row) in batch.pieces.iter().zip(&batch.piece_rows) {
        let row = row as usize;
        let base = row * seq_len + at[row];
        for j in 0..piece.len {
            assert_eq!(
                batch.tokens[base + j as usize],
                token(piece.position, piece.start + j)
            );
            real[base + j as usize] = true;
        }
        at[row] += piece.len as usize;
    }
    for (i, &t) in batch.tokens.iter().enumerate() {
        if !real[i] {
            assert_eq!(t, -1, "token {i} is neither a piece's nor padding");
        }
    }
}

#[test]
fn concat_places_every_token_once_in_stream_order_and_fills_every_row() {
    let mut packer = Packer::new(256, 4, PackStrategy::Concat).expect("packer");
    let plans = plans(&mut packer, 50);
    let (mut position, mut offset) = (0u64, 0u64);
    for plan in &plans {
        check_batch(plan);
        for r in 0..plan.rows() {
            let row = plan.row(r);
            assert_eq!(row.iter().map(|p| p.len).sum::<u64>(), 256, "row not full");
            for piece in row {
                // Skip the empty sequences the stream holds.
                while offset == 0 && length(position) == 0 {
                    position += 1;
                }
                assert_eq!((piece.position, piece.start), (position, offset));
                offset += piece.len;
                if offset == length(position) {
                    position += 1;
                    offset = 0;
                }
            }
        }
    }
    assert_eq!(packer.state().next, position);
    assert_eq!(packer.state().offset, offset);
    assert_eq!(packer.state().batches, 50);
}

#[test]
fn first_fit_never_splits_places_each_sequence_once_and_bounds_what_waits() {
    let window = 16;
    let mut packer = Packer::new(512, 4, PackStrategy::FirstFit)
        .and_then(|p| p.with_window(window))
        .expect("packer");
    let mut placed = std::collections::BTreeSet::new();
    let mut truncated = 0;
    for plan in plans(&mut packer, 200) {
        check_batch(&plan);
        for piece in plan.pieces() {
            assert_eq!(piece.start, 0, "a sequence was split");
            assert_eq!(piece.len, length(piece.position).min(512));
            assert!(placed.insert(piece.position), "placed twice");
            truncated += u64::from(length(piece.position) > 512);
        }
        assert!(packer.state().pending.len() <= window);
    }
    // Every non-empty position before `next` is placed or still waiting.
    let state = packer.state();
    for position in 0..state.next {
        let waiting = state.pending.contains(&position);
        assert_eq!(
            placed.contains(&position) || waiting,
            length(position) > 0,
            "position {position}"
        );
    }
    let waiting_long = state.pending.iter().filter(|&&p| length(p) > 512).count() as u64;
    assert_eq!(state.truncated, truncated + waiting_long);
}

#[test]
fn first_fit_fills_at_least_98_percent_of_2048_token_rows_with_w3_lengths() {
    let w3 = zring_workloads::w3(20_000, 7);
    let lens: Vec<u64> = w3.shapes().into_iter().map(u64::from).collect();
    let mut packer = Packer::new(2048, 8, PackStrategy::FirstFit).expect("packer");
    let (mut real, mut all) = (0u64, 0u64);
    for _ in 0..100 {
        let plan = packer
            .next_plan(|p| Ok::<_, Infallible>(lens[p as usize % lens.len()]))
            .expect("plan");
        real += plan.tokens();
        all += (plan.rows() * plan.seq_len()) as u64;
    }
    let efficiency = real as f64 / all as f64;
    assert!(efficiency >= 0.98, "first-fit efficiency {efficiency}");
}

#[test]
fn a_resumed_packer_continues_exactly_mid_row() {
    for strategy in [PackStrategy::Concat, PackStrategy::FirstFit] {
        let fresh = Packer::new(300, 3, strategy).expect("packer");
        let mut straight = fresh.clone();
        let all = plans(&mut straight, 30);
        let mut first = fresh.clone();
        let head = plans(&mut first, 11);
        let state: PackState = first.state().clone();
        let mut resumed = fresh.resume(state).expect("resume");
        let tail = plans(&mut resumed, 19);
        assert_eq!([head, tail].concat(), all, "{strategy:?}");
        assert_eq!(resumed.state(), straight.state());
    }
}

#[test]
fn a_failed_length_lookup_names_the_position_and_leaves_the_state_alone() {
    let mut packer = Packer::new(64, 2, PackStrategy::Concat).expect("packer");
    for _ in 0..3 {
        packer.next_plan(|_| Ok::<_, Infallible>(5)).expect("plan");
    }
    let before = packer.state().clone();
    let err = packer
        .next_plan(|p| {
            if p >= before.next + 2 {
                Err(std::io::Error::other("the store went away"))
            } else {
                Ok(5)
            }
        })
        .expect_err("lookup fails");
    match &err {
        PackError::Length { position, .. } => assert!(*position >= before.next + 2),
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("the store went away"));
    assert_eq!(packer.state(), &before);
}

#[test]
fn bad_settings_states_and_gathers_are_refused() {
    assert!(matches!(
        Packer::new(0, 4, PackStrategy::Concat),
        Err(PackError::ZeroSeqLen)
    ));
    assert!(matches!(
        Packer::new(8, 0, PackStrategy::Concat),
        Err(PackError::ZeroRows)
    ));
    assert!(matches!(
        Packer::new(1 << 20, 1 << 12, PackStrategy::Concat),
        Err(PackError::BatchTooLarge { .. })
    ));
    assert!(matches!(
        Packer::new(8, 2, PackStrategy::FirstFit).and_then(|p| p.with_window(0)),
        Err(PackError::ZeroWindow)
    ));
    assert!(matches!(
        "best_fit".parse::<PackStrategy>(),
        Err(PackError::UnknownStrategy(_))
    ));
    assert_eq!(
        "first_fit".parse::<PackStrategy>().expect("name"),
        PackStrategy::FirstFit
    );
    // States of the other strategy.
    let split = PackState {
        next: 5,
        offset: 3,
        ..PackState::default()
    };
    assert!(matches!(
        Packer::new(8, 2, PackStrategy::FirstFit).and_then(|p| p.resume(split)),
        Err(PackError::ForeignState { .. })
    ));
    let held = PackState {
        next: 5,
        pending: vec![1, 2],
        ..PackState::default()
    };
    assert!(matches!(
        Packer::new(8, 2, PackStrategy::Concat).and_then(|p| p.resume(held)),
        Err(PackError::ForeignState { .. })
    ));
    // A stream of nothing but empty sequences.
    let mut packer = Packer::new(8, 1, PackStrategy::Concat).expect("packer");
    assert!(matches!(
        packer.next_plan(|_| Ok::<_, Infallible>(0)),
        Err(PackError::NoTokens { from: 0, .. })
    ));
    // A gather shorter than the plan needs.
    let mut packer = Packer::new(16, 1, PackStrategy::Concat).expect("packer");
    let plan = packer.next_plan(|_| Ok::<_, Infallible>(5)).expect("plan");
    let short: Vec<i64> = vec![0; 4 * plan.positions().len()];
    let cu: Vec<u64> = (0..=plan.positions().len() as u64).map(|k| 4 * k).collect();
    assert!(matches!(
        assemble(&plan, &short, &cu, 0),
        Err(PackError::GatherMismatch {
            needed: 5,
            gathered: 4,
            ..
        })
    ));
    assert!(matches!(
        assemble(&plan, &short, &cu[..1], 0),
        Err(PackError::GatherMismatch { .. })
    ));
    let _: &[Piece] = plan.pieces();
}
