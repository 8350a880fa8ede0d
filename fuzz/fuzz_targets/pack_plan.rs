//! The sequence packer on arbitrary lengths, shapes and strategies: every plan fills
//! its rows within `seq_len`, concat places every token of the stream exactly once
//! and in order, first fit never splits and places each sequence at most once, and
//! a packer resumed from any state plans the same batches.
#![no_main]

use std::convert::Infallible;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use zring_loader::{PackStrategy, Packer};

#[derive(Debug)]
struct Input {
    seq_len: u8,
    rows: u8,
    first_fit: bool,
    window: u8,
    /// Sequence lengths, repeated as the stream (at least one non-empty).
    lengths: Vec<u16>,
    batches: u8,
    resume_at: u8,
}

impl Input {
    fn read(data: &[u8]) -> Result<Self> {
        let mut u = Unstructured::new(data);
        Ok(Self {
            seq_len: u.arbitrary()?,
            rows: u.arbitrary()?,
            first_fit: u.arbitrary()?,
            window: u.arbitrary()?,
            batches: u.arbitrary()?,
            resume_at: u.arbitrary()?,
            lengths: u.arbitrary()?,
        })
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = Input::read(data) else {
        return;
    };
    if input.lengths.iter().all(|&n| n == 0) {
        return;
    }
    let lens = &input.lengths;
    let len_of = |p: u64| Ok::<_, Infallible>(u64::from(lens[(p % lens.len() as u64) as usize]));
    let strategy = if input.first_fit {
        PackStrategy::FirstFit
    } else {
        PackStrategy::Concat
    };
    let (seq_len, rows) = (
        usize::from(input.seq_len).max(1),
        usize::from(input.rows % 8).max(1),
    );
    let Ok(packer) = Packer::new(seq_len, rows, strategy)
        .and_then(|p| p.with_window(usize::from(input.window).max(1)))
    else {
        return;
    };
    let batches = usize::from(input.batches % 16);
    let mut straight = packer.clone();
    let mut plans = Vec::new();
    let (mut position, mut offset) = (0u64, 0u64);
    let mut placed = std::collections::HashSet::new();
    for _ in 0..batches {
        let plan = straight.next_plan(len_of).expect("lengths never fail");
        assert_eq!(plan.rows(), rows);
        for r in 0..rows {
            let used: u64 = plan.row(r).iter().map(|p| p.len).sum();
            assert!(used <= seq_len as u64);
            if !input.first_fit {
                assert_eq!(used, seq_len as u64, "a concat row is always full");
            }
            for piece in plan.row(r) {
                assert!(piece.len > 0);
                let n = len_of(piece.position).expect("infallible");
                if input.first_fit {
                    assert_eq!(piece.start, 0);
                    assert_eq!(piece.len, n.min(seq_len as u64));
                    assert!(placed.insert(piece.position), "placed twice");
                } else {
                    while offset == 0 && len_of(position).expect("infallible") == 0 {
                        position += 1;
                    }
                    assert_eq!((piece.position, piece.start), (position, offset));
                    offset += piece.len;
                    if offset == n {
                        position += 1;
                        offset = 0;
                    }
                }
            }
        }
        plans.push(plan);
    }
    // Resume from the state after `k` batches: the same plans follow.
    let k = usize::from(input.resume_at) % (batches + 1);
    let mut first = packer.clone();
    for _ in 0..k {
        first.next_plan(len_of).expect("lengths never fail");
    }
    let mut resumed = packer.resume(first.state().clone()).expect("its own state");
    for expected in &plans[k..] {
        assert_eq!(
            &resumed.next_plan(len_of).expect("lengths never fail"),
            expected
        );
    }
});
