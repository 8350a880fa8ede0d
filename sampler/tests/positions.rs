//! `fill_positions` reads the same sequence batches are cut from.

use zring_sampler::{Mode, Sampler};

#[test]
fn positions_match_every_rank_s_batches_in_every_mode() {
    for mode in [Mode::Sequential, Mode::Iid, Mode::Cyclic] {
        let whole = Sampler::new(1000, 12, mode, 7).expect("valid");
        for rank in 0..3 {
            let s = whole.clone().shard(rank, 3).expect("valid shard");
            for step in [0u64, 1, 83, 1 << 40] {
                let mut at = vec![0; 4];
                let p0 = u128::from(step) * 12 + rank as u128 * 4;
                s.fill_positions(p0, &mut at);
                assert_eq!(at, s.batch(step), "{mode:?} rank {rank} step {step}");
            }
        }
    }
}

#[test]
fn a_cyclic_epoch_of_len_positions_is_a_permutation() {
    let s = Sampler::new(997, 1, Mode::Cyclic, 3).expect("valid");
    let mut epoch = vec![0; 997];
    s.fill_positions(997 * 5, &mut epoch);
    epoch.sort_unstable();
    assert_eq!(epoch, (0..997).collect::<Vec<u64>>());
}
