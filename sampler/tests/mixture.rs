//! Mixtures: proportions in every window, each source's own positions reached
//! once and in order, determinism, resume with new weights, and bad input.

use zring_sampler::{BadValue, Mixture, Mode, SamplerError};

/// Counts per source over positions `[start, start + n)`.
fn counts(m: &Mixture, start: u64, n: u64) -> Vec<u64> {
    let mut out = vec![0; m.len()];
    for p in start..start + n {
        out[m.pick(p).expect("valid mixture").source] += 1;
    }
    out
}

#[test]
fn every_window_of_10000_holds_each_source_within_one_percent_of_its_weight() {
    for weights in [
        vec![0.5, 0.3, 0.2],
        vec![0.7, 0.2, 0.07, 0.03],
        vec![1.0, 1.0, 1.0],
        vec![97.0, 2.0, 1.0],
        vec![std::f64::consts::PI, std::f64::consts::E, 1.0],
    ] {
        let m = Mixture::new(
            &[1000, 50, 7, 3][..weights.len()],
            &weights,
            Mode::Cyclic,
            3,
        )
        .expect("valid mixture");
        let total: f64 = weights.iter().sum();
        // Windows that start anywhere, across period boundaries too.
        for start in [0, 1, 4_999, 65_535, 65_536 - 5_000, 1_000_003, u64::MAX / 3] {
            let c = counts(&m, start, 10_000);
            for (s, &w) in weights.iter().enumerate() {
                let share = c[s] as f64 / 10_000.0;
                assert!(
                    (share - w / total).abs() <= 0.01,
                    "weights {weights:?}, window at {start}: source {s} has share {share}"
                );
            }
        }
    }
}

#[test]
fn windows_stay_within_two_positions_of_the_quota() {
    let m = Mixture::new(
        &[10, 10, 10, 10],
        &[0.61, 0.23, 0.11, 0.05],
        Mode::Cyclic,
        1,
    )
    .expect("valid mixture");
    let period = m.period() as f64;
    for start in (0..200_000).step_by(9_973) {
        for n in [1u64, 7, 100, 1_234, 10_000] {
            let c = counts(&m, start, n);
            for (s, &q) in m.quotas().iter().enumerate() {
                let expected = n as f64 * f64::from(q) / period;
                assert!(
                    (c[s] as f64 - expected).abs() <= 2.0,
                    "window [{start}, +{n}): source {s} read {} times, expected {expected}",
                    c[s]
                );
            }
        }
    }
}

#[test]
fn each_source_reads_its_own_permutation_pass_by_pass() {
    let lens = [13u64, 5, 2];
    let m = Mixture::new(&lens, &[2.0, 1.0, 1.0], Mode::Cyclic, 42).expect("valid mixture");
    let mut seen: Vec<Vec<u64>> = vec![Vec::new(); 3];
    for p in 0..4_000 {
        let pick = m.pick(p).expect("valid mixture");
        assert_eq!(pick.source_position, seen[pick.source].len() as u64);
        seen[pick.source].push(pick.record);
    }
    for (s, records) in seen.iter().enumerate() {
        let len = lens[s] as usize;
        // Every whole pass over a source is a permutation of its records, and
        // the small sources wrapped many times while the large one did not.
        for pass in records.chunks_exact(len) {
            let mut sorted = pass.to_vec();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..lens[s]).collect::<Vec<_>>(), "source {s}");
        }
        assert!(records.len() / len >= 2);
    }
}

#[test]
fn picks_are_a_pure_function_of_the_configuration() {
    let a = Mixture::new(&[100, 100], &[1.0, 3.0], Mode::Cyclic, 7).expect("valid mixture");
    let b = Mixture::new(&[100, 100], &[1.0, 3.0], Mode::Cyclic, 7).expect("valid mixture");
    let c = Mixture::new(&[100, 100], &[1.0, 3.0], Mode::Cyclic, 8).expect("valid mixture");
    let picks = |m: &Mixture| {
        (0..400)
            .map(|p| m.pick(p).expect("valid mixture"))
            .collect::<Vec<_>>()
    };
    assert_eq!(picks(&a), picks(&b));
    assert_ne!(picks(&a), picks(&c));
    // fill is pick, position by position, from any start.
    let (mut sources, mut records) = (vec![0u32; 300], vec![0u64; 300]);
    a.fill(1_000_000, &mut sources, &mut records)
        .expect("valid mixture");
    for i in 0..300 {
        let pick = a.pick(1_000_000 + i as u64).expect("valid mixture");
        assert_eq!(
            (sources[i] as usize, records[i]),
            (pick.source, pick.record)
        );
    }
    // Two sources of equal length never share a permutation.
    let firsts = |s: usize| {
        (0..400)
            .map(|p| a.pick(p).expect("valid mixture"))
            .filter(|pick| pick.source == s)
            .map(|pick| pick.record)
            .take(100)
            .collect::<Vec<_>>()
    };
    assert_ne!(firsts(0), firsts(1));
}

#[test]
fn new_weights_on_resume_keep_each_source_where_it_was() {
    let old = Mixture::new(&[50, 20, 9], &[0.5, 0.3, 0.2], Mode::Cyclic, 5).expect("valid mixture");
    let at = 123_457;
    let consumed = old.consumed(at).expect("valid mixture");
    assert_eq!(consumed.iter().sum::<u64>(), at);
    let new = old.reweighted(at, &[0.1, 0.1, 0.8]).expect("valid mixture");
    assert_eq!(new.start(), at);
    assert_eq!(new.consumed(at).expect("valid mixture"), consumed);
    // Each source continues at exactly the position it had reached, and a
    // source position reads the same record under both weights.
    let old_records: std::collections::HashMap<(usize, u64), u64> = (0..at + 60_000)
        .map(|q| old.pick(q).expect("valid mixture"))
        .map(|o| ((o.source, o.source_position), o.record))
        .collect();
    let mut next = consumed.clone();
    for p in at..at + 10_000 {
        let pick = new.pick(p).expect("valid mixture");
        assert_eq!(pick.source_position, next[pick.source]);
        assert_eq!(
            old_records[&(pick.source, pick.source_position)],
            pick.record
        );
        next[pick.source] += 1;
    }
    let shares = counts(&new, at, 10_000);
    assert!(
        (shares[2] as f64 / 10_000.0 - 0.8).abs() <= 0.01,
        "{shares:?}"
    );
    assert_eq!(
        new.pick(at - 1),
        Err(SamplerError::BeforeStart {
            position: at - 1,
            start: at
        })
    );
}

#[test]
fn a_zero_weight_source_is_never_read() {
    let m = Mixture::new(&[10, 10, 10], &[1.0, 0.0, 2.0], Mode::Cyclic, 1).expect("valid mixture");
    assert_eq!(counts(&m, 0, 3_000)[1], 0);
}

#[test]
fn bad_weights_and_sources_are_refused_by_name() {
    let new = |lens: &[u64], weights: &[f64]| Mixture::new(lens, weights, Mode::Cyclic, 0);
    assert_eq!(new(&[], &[]), Err(SamplerError::NoSources));
    assert_eq!(
        new(&[5, 5], &[1.0]),
        Err(SamplerError::WeightCount {
            sources: 2,
            weights: 1
        })
    );
    assert_eq!(
        new(&[5, 5], &[1.0, -0.5]),
        Err(SamplerError::BadWeight {
            index: 1,
            value: BadValue(-0.5)
        })
    );
    assert!(matches!(
        new(&[5, 5], &[f64::NAN, 1.0]),
        Err(SamplerError::BadWeight { index: 0, .. })
    ));
    assert!(matches!(
        new(&[5, 5], &[1.0, f64::INFINITY]),
        Err(SamplerError::BadWeight { index: 1, .. })
    ));
    assert_eq!(new(&[5, 5], &[0.0, 0.0]), Err(SamplerError::ZeroWeights));
    assert_eq!(new(&[5, 0], &[1.0, 1.0]), Err(SamplerError::EmptyDataset));
    assert_eq!(
        new(&[5, 5], &[0.0, -0.0])
            .expect_err("all zero")
            .to_string(),
        "every mixture weight is 0; at least one must be positive"
    );
    assert_eq!(
        new(&[5, 5], &[1.0, -2.0])
            .expect_err("negative")
            .to_string(),
        "mixture weight 1 is -2; weights must be finite and >= 0"
    );
}
