//! Any file as a store: opening it, reading every record every way, and verifying it
//! must give a result or an error, never a panic, hang or wild allocation; and the
//! ways of reading must agree with each other. Seeded with valid dense and ragged
//! stores of every codec (fuzz/corpus/open_file). Each input is tried twice: as it is,
//! and resealed (every checksum recomputed, `zring_fuzz::reseal`), so that mutations
//! reach the validation behind the checksums.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zring_engine::{Backend, ReadOptions, Store};
use zring_fuzz::{reseal, scratch};

/// Records larger than this are not read: a file may claim records of up to 4 GiB,
/// and reading one allocates what it claims.
const MAX_READ: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    open_and_read(data);
    let mut resealed = data.to_vec();
    reseal(&mut resealed);
    if resealed != data {
        open_and_read(&resealed);
    }
});

fn open_and_read(data: &[u8]) {
    let path = scratch("open_file.zr");
    std::fs::write(&path, data).expect("writing the input file");
    for backend in [Backend::Pread, Backend::Mmap] {
        for verify_checksums in [false, true] {
            let opts = ReadOptions::default()
                .backend(backend)
                .verify_checksums(verify_checksums)
                .threads(1);
            if let Ok(store) = Store::open(&path, opts) {
                read_everything(&store);
            }
        }
    }
}

fn read_everything(store: &Store) {
    let _ = store.stats();
    let n = store.len();
    let mut ids = Vec::new();
    let mut total = 0u64;
    let mut singles = Vec::new();
    for i in 0..n.min(256) {
        let Ok(entry) = store.entry(i) else { continue };
        if u64::from(entry.logical_len) > MAX_READ || total > 4 * MAX_READ {
            continue;
        }
        total += u64::from(entry.logical_len);
        let _ = store.shape(i);
        singles.push((i, store.get(i)));
        ids.push(i);
    }
    if store.schema().is_ragged() {
        if let Ok(batch) = store.gather_ragged(&ids) {
            for (k, (_, one)) in singles.iter().enumerate() {
                if let Ok(one) = one {
                    assert_eq!(
                        batch.record(k, store.schema().dtype.itemsize()),
                        Some(&one[..])
                    );
                }
            }
        }
    } else if store.item_bytes().is_some_and(|w| w <= MAX_READ) {
        if let Ok(all) = store.gather_vec(&ids) {
            let width = store.item_bytes().unwrap_or(0) as usize;
            for (k, (_, one)) in singles.iter().enumerate() {
                if let Ok(one) = one {
                    assert_eq!(&all[k * width..(k + 1) * width], &one[..]);
                }
            }
        }
    }
    // verify() decodes every record, so only when none claims more than MAX_READ.
    let small = n <= 4096
        && (0..n).all(|i| {
            store
                .entry(i)
                .is_ok_and(|e| u64::from(e.logical_len) <= MAX_READ)
        });
    if small {
        let _ = store.verify();
    }
}
