//! The loader over a mixture: a `MixtureSampler` schedule and `Concat` views of the
//! sources deliver records of each source in proportion, each record exactly the
//! one its index names, on any number of shards.

use std::sync::Arc;

use zring_engine::{Concat, DType, ReadOptions, Records, Schema, Store, WriteOptions, Writer};
use zring_loader::{Loader, LoaderOptions, Schedule, Tensor};
use zring_sampler::{EpochPlan, Mixture, MixturePlan, MixtureSampler, Mode};

/// A store of `n` u64 labels `tag * 1_000_000 + i`.
fn labels(dir: &std::path::Path, name: &str, tag: u64, n: u64) -> Store {
    let path = dir.join(name);
    let mut w = Writer::create(
        &path,
        Schema::dense(DType::U64, &[]),
        WriteOptions::default(),
    )
    .expect("create");
    let bytes: Vec<u8> = (0..n)
        .map(|i| tag * 1_000_000 + i)
        .flat_map(u64::to_le_bytes)
        .collect();
    w.append_dense(&bytes).expect("append");
    w.close().expect("close");
    Store::open(&path, ReadOptions::default()).expect("open")
}

#[test]
fn a_loader_over_a_mixture_delivers_each_source_in_proportion() {
    let dir = tempfile::tempdir().expect("tempdir");
    let web = labels(dir.path(), "web.zr", 1, 1000);
    let code = labels(dir.path(), "code.zr", 2, 37);
    let concat = |s: &[&Store]| {
        Concat::new(
            s.iter()
                .map(|s| Arc::new((*s).clone()) as Arc<dyn Records>)
                .collect(),
        )
        .expect("concat")
    };
    let mixture = Mixture::new(&[1000, 37], &[3.0, 1.0], Mode::Cyclic, 4).expect("mixture");
    let schedule = MixtureSampler::new(mixture.clone(), 64).expect("sampler");
    let views = vec![concat(&[&web, &code]), concat(&[&web, &code])];
    let mut loader = Loader::new(
        [("label", views)],
        Schedule::Mixture(schedule.clone()),
        LoaderOptions::new(2, 2),
    )
    .expect("loader");
    let mut per_source = [0usize; 2];
    for step in 0..20u64 {
        let batch = loader.next().expect("endless").expect("step");
        let expected = schedule.clone();
        let mut indices = vec![0u64; 64];
        expected.fill(step, &mut indices).expect("fill");
        for shard in 0..2 {
            let Some(Tensor::Dense { data, .. }) = batch.get("label", shard) else {
                panic!("dense stream")
            };
            for (k, bytes) in data.chunks_exact(8).enumerate() {
                let label = u64::from_le_bytes(bytes.try_into().expect("8"));
                let pick = mixture
                    .pick(step * 64 + (shard * 32 + k) as u64)
                    .expect("pick");
                assert_eq!(label, (pick.source as u64 + 1) * 1_000_000 + pick.record);
                assert_eq!(
                    indices[shard * 32 + k],
                    [0, 1000][pick.source] + pick.record
                );
                per_source[pick.source] += 1;
            }
        }
    }
    assert_eq!(per_source, [960, 320]);
    loader.close();
}

#[test]
fn an_epoch_plan_over_a_mixture_reads_new_positions_every_epoch_and_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let web = labels(dir.path(), "web.zr", 1, 50);
    let code = labels(dir.path(), "code.zr", 2, 7);
    let parts = vec![
        Arc::new(web) as Arc<dyn Records>,
        Arc::new(code) as Arc<dyn Records>,
    ];
    let concat = Concat::new(parts).expect("concat");
    let mixture = Mixture::new(&[50, 7], &[1.0, 1.0], Mode::Cyclic, 9).expect("mixture");
    // 30 positions an epoch, shuffled, batches of 8 (the last one 6), 3 epochs.
    let plan = EpochPlan::new(30, 8, Mode::Cyclic, 5)
        .expect("plan")
        .with_epochs(Some(3));
    let schedule = MixturePlan::new(plan.clone(), mixture.clone());
    let mut loader = Loader::new(
        [("label", vec![concat])],
        Schedule::MixedEpochs(schedule),
        LoaderOptions::new(2, 2),
    )
    .expect("loader");
    let mut positions = Vec::new();
    let mut step = 0u64;
    for batch in loader.by_ref() {
        let batch = batch.expect("step");
        let Some(Tensor::Dense { data, .. }) = batch.get("label", 0) else {
            panic!("dense stream")
        };
        let ids = plan.batch(step).expect("in the plan");
        let epoch = step / plan.steps_per_epoch();
        assert_eq!(data.len(), ids.len() * 8);
        for (bytes, k) in data.chunks_exact(8).zip(&ids) {
            let label = u64::from_le_bytes(bytes.try_into().expect("8"));
            let position = epoch * 30 + k;
            let pick = mixture.pick(position).expect("pick");
            assert_eq!(label, (pick.source as u64 + 1) * 1_000_000 + pick.record);
            positions.push(position);
        }
        step += 1;
    }
    assert_eq!(step, 12, "3 epochs of 4 steps, then the end");
    // Every position of the three epochs once: the later epochs read the
    // sources' next positions, not the first epoch's again.
    positions.sort_unstable();
    assert_eq!(positions, (0..90).collect::<Vec<u64>>());
    loader.close();
}
