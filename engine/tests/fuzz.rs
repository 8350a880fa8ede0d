//! Damage without a plan: every single-byte flip of a small store, and a few thousand
//! random mutations (flips, truncations, and edits with checksums recomputed so they
//! reach the deeper checks). Whatever the damage, the engine must answer with an
//! error or with the right data — never a panic, never silently wrong bytes when a
//! flip is caught by no check.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use common::*;
use zring_engine::format::BLOCK;
use zring_engine::{Backend, Error, ReadOptions, Store};

/// What one flip led to.
#[derive(Debug, Default)]
struct Tally {
    refused_at_open: usize,
    record_named: usize,
    harmless: usize,
}

/// Flips byte `at` of the fixture and classifies what the engine makes of it; panics
/// on any outcome that is neither an error nor exactly the original data.
fn flip_one(fx: &Fixture, path: &Path, at: usize, tally: &mut Tally) {
    let mut b = fx.bytes.clone();
    b[at] ^= if at % 2 == 0 { 0x01 } else { 0x80 };
    put(path, &b);
    let store = match open(path) {
        Err(Error::Corrupt { .. } | Error::UnsupportedVersion { .. }) => {
            tally.refused_at_open += 1;
            return;
        }
        Err(e) => panic!("byte {at}: unexpected open error {e:?}"),
        Ok(s) => s,
    };
    // Which record's stored bytes hold the flipped byte, if any.
    let owner = (0..fx.records.len() as u64).find(|&i| {
        let e = entry_of(&fx.bytes, i);
        (e.offset..e.offset + u64::from(e.stored_len)).contains(&(at as u64))
    });
    match store.verify() {
        Err(Error::CorruptRecord { index, .. }) => {
            assert_eq!(
                Some(index),
                owner,
                "byte {at}: verify blamed record {index}"
            );
            let checked = open_with(path, Backend::Mmap, true).expect("reopen");
            assert!(
                read_all(&checked).is_err(),
                "byte {at}: checked read passed"
            );
            tally.record_named += 1;
        }
        Err(e) => panic!("byte {at}: unexpected verify error {e:?}"),
        Ok(()) => {
            assert_eq!(owner, None, "byte {at} of record {owner:?} passed verify");
            let got = read_all(&store).expect("an undetected flip must be harmless");
            assert!(got == fx.records, "byte {at}: silently wrong data");
            for (i, shape) in fx.shapes.iter().enumerate() {
                let want: Vec<u64> = shape.iter().map(|&d| u64::from(d)).collect();
                assert_eq!(store.shape(i as u64).expect("shape"), want, "byte {at}");
            }
            tally.harmless += 1;
        }
    }
}

#[test]
fn every_single_byte_flip_is_detected_or_harmless() {
    let dir = tempfile::tempdir().expect("tempdir");
    for fx in [dense_mixed(dir.path(), 6), ragged_zstd(dir.path(), 6)] {
        let path = fx.path.with_extension("flip.zr");
        let mut tally = Tally::default();
        for at in 0..fx.bytes.len() {
            flip_one(&fx, &path, at, &mut tally);
        }
        println!("{}: {} bytes, {tally:?}", fx.path.display(), fx.bytes.len());
        // Everything outside the superblock's unused tail and the alignment padding
        // is covered by a check.
        assert!(tally.harmless < BLOCK + 64, "{tally:?}");
        assert!(
            tally.record_named > 0 && tally.refused_at_open > BLOCK,
            "{tally:?}"
        );
    }
}

/// Opens and reads everything a caller could read; returns whether the store opened.
/// Errors are fine (their text is rendered, to exercise `Display`); panics are not,
/// and neither are wrong bytes: every record a read returns must equal the original,
/// unless the store was opened without checksum checks and `verify` names that record
/// (its stored bytes or its entry were what the mutation damaged).
fn exercise(path: &Path, opts: ReadOptions, fx: &Fixture) -> bool {
    let checked = opts.verify_checksums;
    let store = match Store::open(path, opts) {
        Ok(s) => s,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return false;
        }
    };
    let render = |r: Result<(), Error>| {
        if let Err(e) = r {
            assert!(!e.to_string().is_empty());
        }
    };
    // A record read as `got` is either its original bytes or, unchecked, damaged
    // in a way verify sees.
    let judge = |i: u64, got: &[u8]| {
        if fx.records.get(i as usize).is_some_and(|r| r == got) {
            return;
        }
        assert!(
            !checked,
            "record {i}: a checksum-checked read returned other bytes than written"
        );
        assert!(
            store.verify_range(i..i + 1).is_err(),
            "record {i}: wrong bytes returned and verify finds nothing wrong"
        );
    };
    render(store.verify());
    render(store.stats().map(drop));
    let n = store.len().min(64);
    let all: Vec<u64> = (0..n).collect();
    if let Some(width) = store.item_bytes() {
        let width = width as usize;
        for idx in [all.clone(), vec![n / 2, 0, n / 2]] {
            match store.gather_vec(&idx) {
                Ok(got) if width > 0 => {
                    for (k, &i) in idx.iter().enumerate() {
                        judge(i, &got[k * width..(k + 1) * width]);
                    }
                }
                r => render(r.map(drop)),
            }
        }
    } else {
        let itemsize = store.schema().dtype.itemsize();
        match store.gather_ragged(&all) {
            Ok(batch) => {
                for (k, &i) in all.iter().enumerate() {
                    judge(i, batch.record(k, itemsize).expect("record in batch"));
                }
            }
            Err(e) => render(Err(e)),
        }
        render(store.ragged_layout(&all).map(drop));
    }
    for i in 0..n.min(8) {
        match store.get(i) {
            Ok(got) => judge(i, &got),
            Err(e) => render(Err(e)),
        }
        render(store.shape(i).map(drop));
        render(store.entry(i).map(drop));
    }
    assert!(store.get(store.len()).is_err());
    true
}

/// Applies one random mutation to a store image; returns its name.
fn mutate(rng: &mut Rng, fx: &Fixture) -> (Vec<u8>, &'static str) {
    let mut b = fx.bytes.clone();
    let len = b.len();
    let f = footer_of(&b);
    let kind = match rng.below(7) {
        0 => {
            for _ in 0..1 + rng.below(8) {
                let at = rng.usize_below(len);
                b[at] ^= 1 + rng.below(255) as u8;
            }
            "flips"
        }
        1 => {
            b.truncate(rng.usize_below(len));
            "truncate"
        }
        2 => {
            // Random edits inside the table / shapes, checksums recomputed.
            let (lo, hi) = (
                f.shapes.offset as usize,
                f.table.end().expect("end") as usize,
            );
            for _ in 0..1 + rng.below(4) {
                let at = lo + rng.usize_below(hi - lo);
                b[at] = rng.next_u64() as u8;
            }
            reseal(&mut b);
            "table"
        }
        3 => {
            // One footer field set to something hostile, checksums recomputed.
            let mut f = f;
            let v = match rng.below(4) {
                0 => rng.next_u64(),
                1 => u64::MAX - rng.below(16),
                2 => len as u64 + rng.below(64) - 32,
                _ => rng.below(1 << 16),
            };
            let fields: [&mut u64; 12] = [
                &mut f.record_count,
                &mut f.data.offset,
                &mut f.data.len,
                &mut f.dict.offset,
                &mut f.dict.len,
                &mut f.shapes.offset,
                &mut f.shapes.len,
                &mut f.table.offset,
                &mut f.table.len,
                &mut f.schema.offset,
                &mut f.schema.len,
                &mut f.file_len,
            ];
            let k = rng.usize_below(fields.len());
            *fields.into_iter().nth(k).expect("field") = v;
            reseal_with(&mut b, &mut f);
            "footer"
        }
        4 => {
            // One character of the schema JSON replaced, checksums recomputed.
            let mut json = schema_json(&b).into_bytes();
            let at = rng.usize_below(json.len());
            json[at] = b" 0123456789[]{}\",:-aeiloprstuz"[rng.usize_below(30)];
            b = replace_schema(&b, &json);
            "schema"
        }
        5 => {
            // A run of the data region overwritten (record checksums left stale).
            let start = BLOCK + rng.usize_below(f.data.len as usize);
            let end = (start + 1 + rng.usize_below(64)).min(len);
            for x in &mut b[start..end] {
                *x = rng.next_u64() as u8;
            }
            "data"
        }
        _ => {
            // One entry's field rewritten, checksums recomputed.
            let i = rng.below(f.record_count);
            let r = entry_range(&b, i);
            let field = [0..8, 8..12, 12..16, 24..25][rng.usize_below(4)].clone();
            let v = rng.next_u64().to_le_bytes();
            let w = field.len();
            b[r.start + field.start..r.start + field.end].copy_from_slice(&v[..w]);
            reseal(&mut b);
            "entry"
        }
    };
    (b, kind)
}

#[test]
fn thousands_of_random_mutations_error_or_return_the_original_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixtures = [
        dense_mixed(dir.path(), 24),
        dense_dict(dir.path(), 24),
        ragged_zstd(dir.path(), 24),
    ];
    let path = dir.path().join("fuzz.zr");
    let mut rng = Rng::new(0xF022);
    let (mut opened, mut panics) = (0usize, Vec::new());
    let iterations = 3000;
    for iter in 0..iterations {
        let fx = &fixtures[rng.usize_below(fixtures.len())];
        let (bytes, kind) = mutate(&mut rng, fx);
        put(&path, &bytes);
        let backend = Backend::CONCRETE[rng.usize_below(Backend::CONCRETE.len())];
        let opts = ReadOptions::default()
            .backend(backend)
            .verify_checksums(rng.bool())
            .direct(backend != Backend::Mmap && rng.below(4) == 0)
            .threads(1 + rng.usize_below(2));
        match catch_unwind(AssertUnwindSafe(|| exercise(&path, opts.clone(), fx))) {
            Ok(true) => opened += 1,
            Ok(false) => {}
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                panics.push(format!("iteration {iter}: {kind} with {opts:?}: {msg}"));
            }
        }
    }
    println!("{iterations} mutations, {opened} opened");
    assert!(panics.is_empty(), "{} panics: {panics:#?}", panics.len());
    assert!(
        opened > iterations / 10,
        "too few mutants opened ({opened})"
    );
}
