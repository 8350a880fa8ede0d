//! Packed batches read from real ragged stores: every piece holds exactly its
//! record's tokens, a mixture of two stores keeps its proportions, a resumed
//! reader continues exactly, and stores that are not tokens are refused.

use std::sync::Arc;

use zring_engine::{DType, ReadOptions, Records, Schema, Store, WriteOptions, Writer};
use zring_loader::{PackError, PackStrategy, PackedReader, Packer};
use zring_sampler::{Mixture, Mode};

/// A ragged int32 store of W3 sequences; returns it with its records' tokens.
fn w3_store(dir: &std::path::Path, name: &str, n: usize, seed: u64) -> (Store, Vec<Vec<i32>>) {
    let w3 = zring_workloads::w3(n, seed);
    let path = dir.join(name);
    let mut w = Writer::create(
        &path,
        Schema::ragged(DType::I32, 1),
        WriteOptions::default(),
    )
    .expect("create");
    w.append_ragged(&w3.values, &w3.cu_seqlens, &w3.shapes())
        .expect("append");
    w.close().expect("close");
    let records = (0..n)
        .map(|i| {
            w3.record(i)
                .chunks_exact(4)
                .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        })
        .collect();
    (
        Store::open(&path, ReadOptions::default()).expect("open"),
        records,
    )
}

#[test]
fn a_mixture_of_two_stores_packs_exactly_their_tokens_in_proportion() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, a_tokens) = w3_store(dir.path(), "a.zr", 300, 1);
    let (b, b_tokens) = w3_store(dir.path(), "b.zr", 40, 2);
    let tokens = [a_tokens, b_tokens];
    let mixture = Mixture::new(&[300, 40], &[3.0, 1.0], Mode::Cyclic, 11).expect("mixture");
    for strategy in [PackStrategy::Concat, PackStrategy::FirstFit] {
        let packer = Packer::new(1024, 4, strategy).expect("packer");
        let sources: Vec<Arc<dyn Records>> = vec![Arc::new(a.clone()), Arc::new(b.clone())];
        let mut reader =
            PackedReader::new(sources, mixture.clone(), packer, -1i32).expect("reader");
        let mut per_source = [0u64; 2];
        for _ in 0..20 {
            let batch = reader.next_batch().expect("batch");
            let mut at = vec![0usize; batch.rows];
            for (piece, &row) in batch.pieces.iter().zip(&batch.piece_rows) {
                let pick = mixture.pick(piece.position).expect("pick");
                let record = &tokens[pick.source][pick.record as usize];
                let want = &record[piece.start as usize..(piece.start + piece.len) as usize];
                let from = row as usize * batch.seq_len + at[row as usize];
                assert_eq!(&batch.tokens[from..from + want.len()], want);
                at[row as usize] += want.len();
                if piece.start == 0 {
                    per_source[pick.source] += 1;
                }
            }
        }
        let share = per_source[0] as f64 / (per_source[0] + per_source[1]) as f64;
        assert!((share - 0.75).abs() < 0.05, "{strategy:?}: share {share}");
    }
}

#[test]
fn a_resumed_reader_gives_the_same_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, _) = w3_store(dir.path(), "a.zr", 500, 3);
    let mixture = Mixture::new(&[500], &[1.0], Mode::Cyclic, 5).expect("mixture");
    let packer = Packer::new(700, 2, PackStrategy::Concat).expect("packer");
    let source = || -> Vec<Arc<dyn Records>> { vec![Arc::new(a.clone())] };
    let mut straight =
        PackedReader::new(source(), mixture.clone(), packer.clone(), 0i32).expect("reader");
    let all: Vec<_> = (0..12)
        .map(|_| straight.next_batch().expect("batch"))
        .collect();
    let mut first =
        PackedReader::new(source(), mixture.clone(), packer.clone(), 0i32).expect("reader");
    for _ in 0..5 {
        first.next_batch().expect("batch");
    }
    let state = first.state().clone();
    assert_ne!(state.offset, 0, "the checkpoint should fall mid-sequence");
    let resumed_packer = packer.resume(state).expect("resume");
    let mut resumed = PackedReader::new(source(), mixture, resumed_packer, 0i32).expect("reader");
    for expected in &all[5..] {
        assert_eq!(&resumed.next_batch().expect("batch"), expected);
    }
}

#[test]
fn stores_that_are_not_tokens_of_the_readers_type_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, _) = w3_store(dir.path(), "a.zr", 10, 3);
    let mixture = Mixture::new(&[10], &[1.0], Mode::Cyclic, 5).expect("mixture");
    let packer = Packer::new(64, 2, PackStrategy::Concat).expect("packer");
    let sources = || -> Vec<Arc<dyn Records>> { vec![Arc::new(a.clone())] };
    let err = PackedReader::new(sources(), mixture.clone(), packer.clone(), 0i64)
        .err()
        .expect("i64 tokens from an int32 store");
    assert!(
        matches!(err, PackError::NotTokens { index: 0, .. }),
        "{err}"
    );
    let two = Mixture::new(&[10, 10], &[1.0, 1.0], Mode::Cyclic, 5).expect("mixture");
    let err = PackedReader::new(sources(), two, packer.clone(), 0i32)
        .err()
        .expect("one source for two");
    assert!(
        matches!(
            err,
            PackError::SourceCount {
                sources: 1,
                mixture: 2
            }
        ),
        "{err}"
    );
    let longer = Mixture::new(&[11], &[1.0], Mode::Cyclic, 5).expect("mixture");
    let err = PackedReader::new(sources(), longer, packer, 0i32)
        .err()
        .expect("more records than the store");
    assert!(
        matches!(
            err,
            PackError::SourceLength {
                records: 10,
                mixture: 11,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn the_prefetching_loader_delivers_the_readers_batches_and_the_delivered_state() {
    use zring_loader::PackedLoader;
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, _) = w3_store(dir.path(), "a.zr", 400, 9);
    let mixture = Mixture::new(&[400], &[1.0], Mode::Cyclic, 1).expect("mixture");
    let packer = Packer::new(512, 2, PackStrategy::FirstFit).expect("packer");
    let source = || -> Vec<Arc<dyn Records>> { vec![Arc::new(a.clone())] };
    let mut reader =
        PackedReader::new(source(), mixture.clone(), packer.clone(), 0i32).expect("reader");
    let mut expected = Vec::new();
    for _ in 0..10 {
        let batch = reader.next_batch().expect("batch");
        expected.push((batch, reader.state().clone()));
    }
    let reader = PackedReader::new(source(), mixture, packer, 0i32).expect("reader");
    let mut loader = PackedLoader::new(reader, 4).expect("loader");
    for (batch, state) in &expected {
        assert_eq!(&loader.next().expect("endless").expect("batch"), batch);
        // The state is the delivered batch's, however far ahead the thread is.
        assert_eq!(loader.state(), state);
    }
    // Dropping it mid-stream stops and joins the thread.
    drop(loader);
}

#[test]
fn shards_deliver_their_rows_of_the_global_batch_and_resume_with_another_world() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, _) = w3_store(dir.path(), "a.zr", 400, 7);
    let mixture = Mixture::new(&[400], &[1.0], Mode::Cyclic, 2).expect("mixture");
    for strategy in [PackStrategy::Concat, PackStrategy::FirstFit] {
        let packer = Packer::new(512, 4, strategy).expect("packer");
        let reader = |p: Packer| {
            let sources: Vec<Arc<dyn Records>> = vec![Arc::new(a.clone())];
            PackedReader::new(sources, mixture.clone(), p, 0i32).expect("reader")
        };
        let mut whole = reader(packer.clone());
        let global: Vec<_> = (0..8).map(|_| whole.next_batch().expect("batch")).collect();
        // Two ranks: each delivers its two rows of every global batch, tokens and
        // pieces alike; their states stay the global one.
        let mut ranks: Vec<_> = (0..2)
            .map(|r| reader(packer.clone()).shard(r, 2).expect("shard"))
            .collect();
        for g in &global[..5] {
            for (r, rank) in ranks.iter_mut().enumerate() {
                let b = rank.next_batch().expect("batch");
                assert_eq!(b.rows, 2);
                let rows = r * 2 * 512..(r + 1) * 2 * 512;
                assert_eq!(b.tokens, g.tokens[rows.clone()], "{strategy:?}");
                assert_eq!(b.position_ids, g.position_ids[rows]);
                let mine: Vec<_> = g
                    .pieces
                    .iter()
                    .zip(&g.piece_rows)
                    .filter(|(_, &row)| row as usize / 2 == r)
                    .map(|(p, _)| *p)
                    .collect();
                assert_eq!(b.pieces, mine);
            }
        }
        assert_eq!(ranks[0].state(), ranks[1].state());
        assert_eq!(ranks[0].state(), &{
            let mut w = reader(packer.clone());
            for _ in 0..5 {
                w.next_batch().expect("batch");
            }
            w.state().clone()
        });
        // One rank resumes the two ranks' state: the rest of the global batches.
        let resumed = packer
            .clone()
            .resume(ranks[0].state().clone())
            .expect("resume");
        let mut one = reader(resumed);
        for g in &global[5..] {
            assert_eq!(&one.next_batch().expect("batch"), g);
        }
    }
    let packer = Packer::new(512, 4, PackStrategy::Concat).expect("packer");
    let sources: Vec<Arc<dyn Records>> = vec![Arc::new(a.clone())];
    let err = PackedReader::new(sources, mixture, packer, 0i32)
        .expect("reader")
        .shard(0, 3)
        .err()
        .expect("4 rows do not split in 3");
    assert!(
        matches!(
            err,
            PackError::Shard {
                world: 3,
                rows: 4,
                ..
            }
        ),
        "{err}"
    );
}
