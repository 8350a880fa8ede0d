//! The public surface: construction, errors, stepping, seeking, iteration
//! and sharding, for every mode.

mod common;

use common::positions;
use zring_sampler::{Mode, Sampler, SamplerError};

const N: u64 = 1_000;

fn sampler(mode: Mode, batch: usize) -> Sampler {
    Sampler::new(N, batch, mode, 0xC0FFEE).expect("valid sampler")
}

#[test]
fn accessors_report_the_configuration() {
    let s = Sampler::new(77, 12, Mode::Cyclic, 5).expect("valid sampler");
    assert_eq!(
        (
            s.len(),
            s.batch_size(),
            s.global_batch_size(),
            s.mode(),
            s.seed()
        ),
        (77, 12, 12, Mode::Cyclic, 5)
    );
    assert_eq!((s.rank(), s.world(), s.step()), (0, 1, 0));
    let r = s.shard(2, 3).expect("valid shard");
    assert_eq!(
        (r.batch_size(), r.global_batch_size(), r.rank(), r.world()),
        (4, 12, 2, 3)
    );
}

#[test]
fn bad_construction_is_a_typed_error() {
    assert_eq!(
        Sampler::new(0, 4, Mode::Iid, 0),
        Err(SamplerError::EmptyDataset)
    );
    assert_eq!(
        Sampler::new(4, 0, Mode::Iid, 0),
        Err(SamplerError::ZeroBatch)
    );
    let s = sampler(Mode::Iid, 12);
    assert_eq!(s.clone().shard(0, 0), Err(SamplerError::ZeroWorld));
    assert_eq!(
        s.clone().shard(3, 3),
        Err(SamplerError::RankOutOfRange { rank: 3, world: 3 })
    );
    assert_eq!(
        s.clone().shard(0, 5),
        Err(SamplerError::BatchNotDivisible {
            batch: 12,
            world: 5
        })
    );
    let mut out = vec![0; 11];
    assert_eq!(
        s.fill(0, &mut out),
        Err(SamplerError::OutLength {
            expected: 12,
            actual: 11
        })
    );
    // A sharded sampler wants its local length, not the global one.
    let r = s.shard(1, 4).expect("valid shard");
    let mut global = vec![0; 12];
    assert_eq!(
        r.fill(0, &mut global),
        Err(SamplerError::OutLength {
            expected: 3,
            actual: 12
        })
    );
}

#[test]
fn error_messages_name_the_values() {
    let cases: [(SamplerError, &[&str]); 7] = [
        (SamplerError::EmptyDataset, &["len = 0"]),
        (SamplerError::ZeroBatch, &["batch = 0"]),
        (SamplerError::ZeroWorld, &["world = 0"]),
        (
            SamplerError::RankOutOfRange { rank: 9, world: 4 },
            &["rank 9", "world size 4"],
        ),
        (
            SamplerError::BatchNotDivisible {
                batch: 10,
                world: 4,
            },
            &["10", "4", "remainder 2"],
        ),
        (
            SamplerError::OutLength {
                expected: 8,
                actual: 5,
            },
            &["length 5", "size is 8"],
        ),
        (
            SamplerError::UnknownMode("shuffle".into()),
            &["\"shuffle\"", "cyclic"],
        ),
    ];
    for (err, parts) in cases {
        let msg = err.to_string();
        for part in parts {
            assert!(msg.contains(part), "{msg:?} lacks {part:?}");
        }
        let _: &dyn std::error::Error = &err;
    }
}

#[test]
fn modes_parse_from_their_names() {
    for mode in Mode::ALL {
        assert_eq!(mode.to_string().parse::<Mode>(), Ok(mode));
    }
    assert_eq!("IID".parse::<Mode>(), Ok(Mode::Iid));
    assert_eq!(" Cyclic\n".parse::<Mode>(), Ok(Mode::Cyclic));
    assert_eq!("Sequential".parse::<Mode>(), Ok(Mode::Sequential));
    assert_eq!(
        "random".parse::<Mode>(),
        Err(SamplerError::UnknownMode("random".into()))
    );
    assert_eq!(
        "".parse::<Mode>(),
        Err(SamplerError::UnknownMode(String::new()))
    );
}

#[test]
fn next_steps_through_the_batches() {
    for mode in Mode::ALL {
        let mut s = sampler(mode, 16);
        let mut out = vec![0; 16];
        for t in 0..5 {
            assert_eq!(s.step(), t);
            s.next_into(&mut out).expect("right length");
            assert_eq!(out, s.batch(t), "{mode} step {t}");
        }
        assert_eq!(s.next_batch(), s.batch(5));
        assert_eq!(s.step(), 6);
        // A failed call does not move the counter.
        assert!(s.next_into(&mut [0; 3]).is_err());
        assert_eq!(s.step(), 6);
    }
}

#[test]
fn fill_is_a_pure_function_of_the_step() {
    for mode in Mode::ALL {
        let mut s = sampler(mode, 64);
        let before = s.batch(9);
        s.next_batch();
        s.seek(1234);
        assert_eq!(s.batch(9), before);
        assert_eq!(s.clone().batch(9), before);
    }
}

#[test]
fn seek_equals_replaying() {
    for mode in Mode::ALL {
        for t in [0, 1, 2, 7, 33, 50] {
            let mut replayed = sampler(mode, 24);
            for _ in 0..t {
                replayed.next_batch();
            }
            let mut sought = sampler(mode, 24);
            sought.seek(t);
            assert_eq!(sought.next_batch(), replayed.next_batch(), "{mode} t {t}");
            assert_eq!(sought.step(), t + 1);
        }
    }
}

#[test]
fn seek_to_the_last_step_and_wrap() {
    for mode in Mode::ALL {
        let mut s = Sampler::new(u64::MAX, 8, mode, 1).expect("valid sampler");
        s.seek(u64::MAX);
        assert_eq!(s.next_batch(), s.batch(u64::MAX));
        assert_eq!(s.step(), 0, "the counter wraps instead of overflowing");
        assert_eq!(s.next_batch(), s.batch(0));
    }
}

#[test]
fn iterator_is_endless_and_matches_batches() {
    for mode in Mode::ALL {
        let s = sampler(mode, 10);
        let from_iter: Vec<Vec<u64>> = s.clone().skip(3).take(4).collect();
        let direct: Vec<Vec<u64>> = (3..7).map(|t| s.batch(t)).collect();
        assert_eq!(from_iter, direct);
        assert_eq!(s.size_hint(), (usize::MAX, None));
    }
}

/// The ranks' batches, concatenated in rank order, are the global batch.
#[test]
fn shards_concatenate_to_the_global_batch() {
    for mode in Mode::ALL {
        let global = sampler(mode, 64);
        for world in [1, 2, 4, 8] {
            let ranks: Vec<Sampler> = (0..world)
                .map(|r| global.clone().shard(r, world).expect("valid shard"))
                .collect();
            for step in [0, 1, 5, 999, u64::MAX] {
                let joined: Vec<u64> = ranks.iter().flat_map(|r| r.batch(step)).collect();
                assert_eq!(
                    joined,
                    global.batch(step),
                    "{mode} world {world} step {step}"
                );
            }
        }
    }
}

#[test]
fn resharding_replaces_the_old_shard() {
    let s = sampler(Mode::Cyclic, 24);
    let twice = s.clone().shard(1, 2).and_then(|r| r.shard(3, 4));
    assert_eq!(twice, s.shard(3, 4));
}

/// The stream depends on (N, mode, seed) only: the batch size just cuts it
/// into batches, so position p reads the same record for every B.
#[test]
fn the_stream_does_not_depend_on_the_batch_size() {
    for mode in Mode::ALL {
        let reference = positions(&sampler(mode, 1), 0, 3000);
        for batch in [2, 7, 64, 1000] {
            assert_eq!(
                positions(&sampler(mode, batch), 0, 3000),
                reference,
                "{mode} B {batch}"
            );
        }
    }
}

/// Huge global batches and the last step, in every mode: no overflow, no
/// panic, everything in range, and the same positions whatever the world.
#[test]
fn huge_positions_are_consistent_across_shardings() {
    let batch = 1usize << 40;
    for mode in Mode::ALL {
        for n in [1, 10, (1 << 32) + 1, u64::MAX] {
            let s = Sampler::new(n, batch, mode, 3).expect("valid sampler");
            let coarse = s.clone().shard(5, 1 << 37).expect("valid shard"); // 8 per rank
            let fine: Vec<Sampler> = (10..12)
                .map(|r| s.clone().shard(r, 1 << 38).expect("valid shard"))
                .collect();
            for step in [0, u64::MAX] {
                let a = coarse.batch(step);
                let b: Vec<u64> = fine.iter().flat_map(|r| r.batch(step)).collect();
                assert_eq!(a, b, "{mode} n {n} step {step}");
                assert!(a.iter().all(|&v| v < n));
            }
        }
    }
}

#[test]
fn samplers_are_plain_shareable_values() {
    fn assert_traits<T: Send + Sync + Clone + std::fmt::Debug + Eq>() {}
    assert_traits::<Sampler>();
    assert_traits::<SamplerError>();
    assert_traits::<Mode>();
}
