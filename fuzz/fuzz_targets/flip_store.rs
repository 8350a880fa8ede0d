//! Bit flips in a store never give wrong data silently. The input describes records
//! (see `Records::decode`) and flips; the target writes the records as a store,
//! flips bytes of the file, and reads the damaged copy:
//!
//! - with checksums verified, every read of every record either fails or returns
//!   exactly the original bytes and shape;
//! - without them, records whose stored bytes no flip touched still read exactly;
//! - `verify()` fails whenever a flip changed a byte of any record's stored bytes;
//! - a copy no flip changed reads back completely and verifies.
//!
//! Input layout: byte 0: number of flips (mod 9); byte 1: bit 0 reads with mmap
//! instead of pread; then 5 bytes per flip (u32 LE position, taken mod the file
//! length, and an XOR mask); the rest describes the records.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zring_engine::{Backend, ReadOptions, Store};
use zring_fuzz::{scratch, Input, Records};

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let count = input.byte() % 9;
    let backend = if input.byte() & 1 == 1 {
        Backend::Mmap
    } else {
        Backend::Pread
    };
    let flips: Vec<(u32, u8)> = (0..count).map(|_| (input.u32(), input.byte())).collect();
    let records = Records::decode(&mut input);
    let clean = scratch("flip_clean.zr");
    records.write(&clean).expect("writing a valid store");
    let original = std::fs::read(&clean).expect("reading the clean store");
    // Where each record's stored bytes are, from the clean store's table.
    let spans: Vec<(u64, u64)> = {
        let store = Store::open(&clean, ReadOptions::default()).expect("opening the clean store");
        (0..store.len())
            .map(|i| {
                let e = store.entry(i).expect("a clean entry");
                (e.offset, e.offset + u64::from(e.stored_len))
            })
            .collect()
    };
    let mut damaged = original.clone();
    for &(pos, mask) in &flips {
        let at = pos as usize % damaged.len();
        damaged[at] ^= mask;
    }
    let changed: Vec<u64> = (0..damaged.len())
        .filter(|&k| damaged[k] != original[k])
        .map(|k| k as u64)
        .collect();
    let touched = |i: usize| {
        let (a, b) = spans[i];
        changed.iter().any(|&k| a <= k && k < b)
    };
    let path = scratch("flip_damaged.zr");
    std::fs::write(&path, &damaged).expect("writing the damaged store");

    for verify_checksums in [true, false] {
        let opts = ReadOptions::default()
            .backend(backend)
            .verify_checksums(verify_checksums)
            .threads(1);
        let store = match Store::open(&path, opts) {
            Ok(s) => s,
            Err(e) => {
                assert!(!changed.is_empty(), "the clean store did not open: {e}");
                continue;
            }
        };
        assert_eq!(
            store.len(),
            records.bytes.len() as u64,
            "the record count changed"
        );
        assert_eq!(store.schema(), &records.schema, "the schema changed");
        let must_match = |i: usize| verify_checksums || !touched(i);
        for (i, want) in records.bytes.iter().enumerate() {
            match store.get(i as u64) {
                Ok(got) => {
                    if must_match(i) {
                        assert_eq!(&got, want, "record {i} changed silently");
                    }
                }
                Err(e) => assert!(!changed.is_empty(), "record {i} of a clean store: {e}"),
            }
            match store.shape(i as u64) {
                Ok(got) => assert_eq!(got, records.shapes[i], "record {i}'s shape changed"),
                Err(e) => assert!(!changed.is_empty(), "shape {i} of a clean store: {e}"),
            }
        }
        let ids: Vec<u64> = (0..store.len()).rev().collect();
        if records.schema.is_ragged() {
            match store.gather_ragged(&ids) {
                Ok(batch) => {
                    let itemsize = records.schema.dtype.itemsize();
                    for (k, &i) in ids.iter().enumerate() {
                        if must_match(i as usize) {
                            assert_eq!(
                                batch.record(k, itemsize),
                                Some(&records.bytes[i as usize][..]),
                                "record {i} changed silently in a ragged gather"
                            );
                        }
                    }
                }
                Err(e) => assert!(!changed.is_empty(), "ragged gather of a clean store: {e}"),
            }
        } else {
            match store.gather_vec(&ids) {
                Ok(all) => {
                    let width = store.item_bytes().unwrap_or(0) as usize;
                    for (k, &i) in ids.iter().enumerate() {
                        if must_match(i as usize) {
                            assert_eq!(
                                &all[k * width..(k + 1) * width],
                                &records.bytes[i as usize][..],
                                "record {i} changed silently in a gather"
                            );
                        }
                    }
                }
                Err(e) => assert!(!changed.is_empty(), "gather of a clean store: {e}"),
            }
        }
        let verified = store.verify();
        if (0..spans.len()).any(touched) {
            assert!(
                verified.is_err(),
                "verify() passed a store with a damaged record"
            );
        }
        if changed.is_empty() {
            assert!(
                verified.is_ok(),
                "verify() failed a clean store: {verified:?}"
            );
        }
    }
});
