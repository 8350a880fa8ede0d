//! Shared by the cross-crate engine tests: deterministic record generators, fixture
//! stores, byte-level patching of store files (with checksums recomputed so a test
//! reaches the check it targets instead of a checksum mismatch), and error matchers.
//!
//! Each test binary compiles this module on its own and uses part of it.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use zring_engine::format::{self, Footer, BLOCK, ENTRY_BYTES};
use zring_engine::{
    Backend, Codec, DType, Error, ReadOptions, RecordProblem, Result, Schema, Store, StoreProblem,
    WriteOptions, Writer,
};
use zring_engine::{Entry, EntryError};

pub use zring_testkit::{compressible, noise, Rng};

/// `n` dense records of `width` bytes back to back; record i is noise when
/// `noisy(i)`, compressible otherwise.
pub fn dense_records(n: usize, width: usize, seed: u64, noisy: impl Fn(usize) -> bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * width);
    for i in 0..n {
        let s = seed.wrapping_mul(1_000_003).wrapping_add(i as u64);
        if noisy(i) {
            out.extend(noise(width, s));
        } else {
            out.extend(compressible(width, s));
        }
    }
    out
}

/// A ragged batch as the writer takes it.
#[derive(Clone, Debug)]
pub struct Ragged {
    pub values: Vec<u8>,
    pub cu_seqlens: Vec<u64>,
    pub shapes: Vec<u32>,
    pub ndim: usize,
    pub itemsize: usize,
}

impl Ragged {
    pub fn len(&self) -> usize {
        self.cu_seqlens.len() - 1
    }

    pub fn record(&self, i: usize) -> &[u8] {
        let (a, b) = (self.cu_seqlens[i], self.cu_seqlens[i + 1]);
        &self.values[a as usize * self.itemsize..b as usize * self.itemsize]
    }

    pub fn shape(&self, i: usize) -> &[u32] {
        &self.shapes[i * self.ndim..(i + 1) * self.ndim]
    }

    /// Records `range` as a batch of their own (offsets rebased to 0).
    pub fn slice(&self, range: std::ops::Range<usize>) -> Ragged {
        let a = self.cu_seqlens[range.start];
        Ragged {
            values: self.values
                [a as usize * self.itemsize..self.cu_seqlens[range.end] as usize * self.itemsize]
                .to_vec(),
            cu_seqlens: self.cu_seqlens[range.start..=range.end]
                .iter()
                .map(|c| c - a)
                .collect(),
            shapes: self.shapes[range.start * self.ndim..range.end * self.ndim].to_vec(),
            ndim: self.ndim,
            itemsize: self.itemsize,
        }
    }
}

/// `n` ragged records of `ndim` dims (the first dim varies from 1 to `max_first`,
/// the others are 1..=3); every third record is noise, the rest compressible.
pub fn ragged_records(n: usize, ndim: usize, dtype: DType, max_first: u64, seed: u64) -> Ragged {
    let mut r = Rng::new(seed);
    let itemsize = dtype.itemsize();
    let mut out = Ragged {
        values: Vec::new(),
        cu_seqlens: vec![0],
        shapes: Vec::with_capacity(n * ndim),
        ndim,
        itemsize,
    };
    for i in 0..n {
        let mut elems = 1u64;
        for d in 0..ndim {
            let dim = if d == 0 {
                1 + r.below(max_first)
            } else {
                1 + r.below(3)
            };
            out.shapes.push(dim as u32);
            elems *= dim;
        }
        let bytes = elems as usize * itemsize;
        let s = seed.wrapping_mul(7_919).wrapping_add(i as u64);
        if i % 3 == 2 {
            out.values.extend(noise(bytes, s));
        } else {
            out.values.extend(compressible(bytes, s));
        }
        let last = out.cu_seqlens[i];
        out.cu_seqlens.push(last + elems);
    }
    out
}

/// Writes `data` (dense records) in `batches` appends and closes the store.
pub fn write_dense(
    path: &Path,
    schema: &Schema,
    opts: WriteOptions,
    data: &[u8],
    batches: usize,
) -> Result<u64> {
    let width = schema.item_bytes().expect("dense schema") as usize;
    let n = data.len() / width;
    let mut w = Writer::create(path, schema.clone(), opts)?;
    let per = n.div_ceil(batches.max(1)).max(1);
    for chunk in data.chunks(per * width) {
        w.append_dense(chunk)?;
    }
    w.close()
}

/// Writes `r` in `batches` appends and closes the store.
pub fn write_ragged(
    path: &Path,
    dtype: DType,
    opts: WriteOptions,
    r: &Ragged,
    batches: usize,
) -> Result<u64> {
    let mut w = Writer::create(path, Schema::ragged(dtype, r.ndim), opts)?;
    let per = r.len().div_ceil(batches.max(1)).max(1);
    let mut at = 0;
    while at < r.len() {
        let end = (at + per).min(r.len());
        let b = r.slice(at..end);
        w.append_ragged(&b.values, &b.cu_seqlens, &b.shapes)?;
        at = end;
    }
    w.close()
}

/// A dictionary trained on compressible samples like the ones `dense_records` makes.
pub fn test_dictionary() -> Vec<u8> {
    let samples: Vec<Vec<u8>> = (0..256).map(|s| compressible(256, 10_000 + s)).collect();
    let refs: Vec<&[u8]> = samples.iter().map(Vec::as_slice).collect();
    zring_engine::train_dict(&refs, 4096).expect("train a test dictionary")
}

/// A store on disk, its bytes and the records it must hold.
#[derive(Clone, Debug)]
pub struct Fixture {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    /// Record i's bytes.
    pub records: Vec<Vec<u8>>,
    /// Record i's shape (ragged stores only).
    pub shapes: Vec<Vec<u32>>,
    pub ragged: bool,
}

/// Dense u8[256] records, codec zstd: even records compressible (stored zstd),
/// odd records noise (stored raw).
pub fn dense_mixed(dir: &Path, n: usize) -> Fixture {
    let width = 256;
    let data = dense_records(n, width, 1, |i| i % 2 == 1);
    let path = dir.join("dense-mixed.zr");
    let schema = Schema::dense(DType::U8, &[width as u64]);
    write_dense(&path, &schema, WriteOptions::default(), &data, 3).expect("write dense-mixed");
    fixture(
        path,
        data.chunks(width).map(<[u8]>::to_vec).collect(),
        Vec::new(),
        false,
    )
}

/// Dense u8[256] records, codec zstd-dict (all compressible).
pub fn dense_dict(dir: &Path, n: usize) -> Fixture {
    let width = 256;
    let data = dense_records(n, width, 2, |_| false);
    let path = dir.join("dense-dict.zr");
    let mut opts = WriteOptions::with_codec(Codec::ZstdDict);
    opts.dictionary = Some(test_dictionary());
    let schema = Schema::dense(DType::U8, &[width as u64]);
    write_dense(&path, &schema, opts, &data, 2).expect("write dense-dict");
    fixture(
        path,
        data.chunks(width).map(<[u8]>::to_vec).collect(),
        Vec::new(),
        false,
    )
}

/// Ragged i32 records of 2 dims, codec zstd (a third of them noise, stored raw).
pub fn ragged_zstd(dir: &Path, n: usize) -> Fixture {
    let r = ragged_records(n, 2, DType::I32, 40, 3);
    let path = dir.join("ragged.zr");
    write_ragged(&path, DType::I32, WriteOptions::default(), &r, 2).expect("write ragged");
    fixture(
        path,
        (0..n).map(|i| r.record(i).to_vec()).collect(),
        (0..n).map(|i| r.shape(i).to_vec()).collect(),
        true,
    )
}

fn fixture(path: PathBuf, records: Vec<Vec<u8>>, shapes: Vec<Vec<u32>>, ragged: bool) -> Fixture {
    let bytes = fs::read(&path).expect("read the fixture back");
    Fixture {
        path,
        bytes,
        records,
        shapes,
        ragged,
    }
}

/// Writes `bytes` at `path` under a new inode (unlink, then create), so a store that
/// still maps the old file never sees it change (which could SIGBUS). Unlinking
/// rather than renaming over the old file also avoids ext4's flush-on-replace, which
/// would make loops over thousands of patched files crawl.
pub fn put(path: &Path, bytes: &[u8]) {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("cannot remove {}: {e}", path.display()),
    }
    fs::write(path, bytes).expect("write a patched store");
}

/// Opens `path` with `backend` and the checksum-on-read option.
pub fn open_with(path: &Path, backend: Backend, verify_checksums: bool) -> Result<Store> {
    Store::open(
        path,
        ReadOptions::default()
            .backend(backend)
            .verify_checksums(verify_checksums),
    )
}

pub fn open(path: &Path) -> Result<Store> {
    Store::open(path, ReadOptions::default())
}

// ---- byte-level patching -------------------------------------------------------

/// The footer of a store image (which must be intact).
pub fn footer_of(bytes: &[u8]) -> Footer {
    Footer::decode(&bytes[bytes.len() - BLOCK..]).expect("an intact footer")
}

/// Replaces the footer of a store image with `f`, checksummed (by `encode`).
pub fn set_footer(bytes: &mut [u8], f: &Footer) {
    let at = bytes.len() - BLOCK;
    bytes[at..].copy_from_slice(&f.encode());
}

/// Edits the raw footer bytes, then recomputes the footer checksum (the last 8 bytes)
/// so the footer decodes as far as its fields allow.
pub fn patch_footer_raw(bytes: &mut [u8], edit: impl FnOnce(&mut [u8])) {
    let at = bytes.len() - BLOCK;
    let block = &mut bytes[at..];
    edit(block);
    let sum = format::checksum(&block[..BLOCK - 8]);
    block[BLOCK - 8..].copy_from_slice(&sum.to_le_bytes());
}

/// Edits the superblock's first 56 bytes, then recomputes its checksum (bytes 56..64).
pub fn patch_superblock_raw(bytes: &mut [u8], edit: impl FnOnce(&mut [u8])) {
    edit(&mut bytes[..BLOCK]);
    let sum = format::checksum(&bytes[..56]);
    bytes[56..64].copy_from_slice(&sum.to_le_bytes());
}

/// Recomputes the checksums of the dictionary, shapes, table and schema sections
/// from the bytes they cover now, and re-encodes the footer. Sections that lie
/// outside the file (a hostile footer) keep their checksum.
pub fn reseal(bytes: &mut [u8]) {
    let mut f = footer_of(bytes);
    reseal_with(bytes, &mut f);
}

/// `reseal` starting from footer fields `f` (which may be hostile).
pub fn reseal_with(bytes: &mut [u8], f: &mut Footer) {
    let len = bytes.len() as u64;
    for s in [&mut f.dict, &mut f.shapes, &mut f.table, &mut f.schema] {
        if let Some(end) = s.end().filter(|&e| e <= len) {
            s.checksum = format::checksum(&bytes[s.offset as usize..end as usize]);
        }
    }
    set_footer(bytes, f);
}

/// Byte range of record `index`'s table entry.
pub fn entry_range(bytes: &[u8], index: u64) -> std::ops::Range<usize> {
    let at = footer_of(bytes).table.offset as usize + index as usize * ENTRY_BYTES;
    at..at + ENTRY_BYTES
}

/// Record `index`'s table entry, decoded.
pub fn entry_of(bytes: &[u8], index: u64) -> Entry {
    Entry::decode(&bytes[entry_range(bytes, index)]).expect("an intact entry")
}

/// Edits the raw 32 bytes of record `index`'s entry and reseals the store, so the
/// table checksum and the footer checksum match the edit.
pub fn patch_entry_raw(bytes: &mut [u8], index: u64, edit: impl FnOnce(&mut [u8])) {
    let r = entry_range(bytes, index);
    edit(&mut bytes[r]);
    reseal(bytes);
}

/// Replaces record `index`'s entry with `edit(entry)` and reseals the store.
pub fn patch_entry(bytes: &mut [u8], index: u64, edit: impl FnOnce(&mut Entry)) {
    let mut e = entry_of(bytes, index);
    edit(&mut e);
    patch_entry_raw(bytes, index, |b| b.copy_from_slice(&e.encode()));
}

/// A new store image whose schema section holds `json` (the schema is the last
/// section, so it may change length), with every checksum correct.
pub fn replace_schema(bytes: &[u8], json: &[u8]) -> Vec<u8> {
    let mut f = footer_of(bytes);
    let mut out = bytes[..f.schema.offset as usize].to_vec();
    out.extend_from_slice(json);
    out.extend_from_slice(&[0u8; BLOCK]);
    f.schema.len = json.len() as u64;
    f.file_len = out.len() as u64;
    reseal_with(&mut out, &mut f);
    out
}

/// The schema section's JSON text.
pub fn schema_json(bytes: &[u8]) -> String {
    let f = footer_of(bytes);
    let s = &bytes[f.schema.offset as usize..(f.schema.offset + f.schema.len) as usize];
    String::from_utf8(s.to_vec()).expect("schema is UTF-8")
}

// ---- error matchers -------------------------------------------------------------

/// Asserts `r` is `Error::Corrupt` whose typed problem `want` accepts (the test's
/// `matches!` on the [`StoreProblem`] variant and its fields); returns the problem.
#[track_caller]
pub fn expect_corrupt<T>(r: Result<T>, want: impl FnOnce(&StoreProblem) -> bool) -> StoreProblem {
    match r {
        Err(Error::Corrupt { problem, .. }) if want(&problem) => problem,
        Err(e) => panic!("expected Corrupt of the wanted kind, got {e:?} ({e})"),
        Ok(_) => panic!("expected Corrupt, got Ok"),
    }
}

/// The typed problem of a damaged record: of the record itself
/// ([`Error::CorruptRecord`]) or of its table entry's decoding
/// ([`Error::CorruptEntry`]).
#[derive(Clone, Copy, Debug)]
pub enum Bad<'a> {
    Record(&'a RecordProblem),
    Entry(&'a EntryError),
}

/// Asserts `r` is `Error::CorruptRecord` (or `CorruptEntry`) for record `index`
/// whose typed problem `want` accepts, and that the message names the record.
#[track_caller]
pub fn expect_record<T>(r: Result<T>, index: u64, want: fn(Bad<'_>) -> bool) {
    let e = match r {
        Err(e) => e,
        Ok(_) => panic!("expected CorruptRecord {index}, got Ok"),
    };
    let msg = e.to_string();
    let (got, bad) = match &e {
        Error::CorruptRecord {
            index: got,
            problem,
            ..
        } => (*got, Bad::Record(problem)),
        Error::CorruptEntry {
            index: got, source, ..
        } => (*got, Bad::Entry(source)),
        other => panic!("expected CorruptRecord {index}, got {other:?} ({msg})"),
    };
    assert_eq!(got, index, "wrong record named: {msg}");
    assert!(want(bad), "not the wanted problem: {bad:?} ({msg})");
    assert!(msg.contains(&format!("record {index}")), "{msg}");
}

/// `expect_record`'s test for a checksum mismatch.
pub fn checksum_mismatch(b: Bad<'_>) -> bool {
    matches!(b, Bad::Record(RecordProblem::ChecksumMismatch { .. }))
}

/// Reads every record of `store` with `gather` / `gather_ragged` in one call.
pub fn read_all(store: &Store) -> Result<Vec<Vec<u8>>> {
    let idx: Vec<u64> = (0..store.len()).collect();
    match store.item_bytes() {
        Some(w) => {
            let flat = store.gather_vec(&idx)?;
            Ok(flat.chunks(w.max(1) as usize).map(<[u8]>::to_vec).collect())
        }
        None => {
            let itemsize = store.schema().dtype.itemsize();
            let batch = store.gather_ragged(&idx)?;
            Ok((0..idx.len())
                .map(|k| batch.record(k, itemsize).unwrap_or_default().to_vec())
                .collect())
        }
    }
}

/// Whether io_uring works here; otherwise prints why the caller skips (or fails the
/// test under `ZRING_REQUIRE_URING=1`).
pub fn uring_here() -> bool {
    zring_testkit::require_uring("io_uring", zring_platform::uring_unavailable_reason())
}

/// Opens `path` with `opts` when the file system takes O_DIRECT; otherwise prints
/// why the caller skips (or fails under `ZRING_REQUIRE_URING=1`).
pub fn open_direct_or_skip(path: &Path, opts: ReadOptions) -> Option<Store> {
    match Store::open(path, opts) {
        Ok(s) => Some(s),
        Err(e) => {
            zring_testkit::require_uring("O_DIRECT", Some(&e.to_string()));
            None
        }
    }
}

/// Asserts that every record `store` has served so far came through the backend it
/// was asked for (`Auto` excepted): a `uring` store that silently read with pread,
/// or a backend that was never used, fails here.
pub fn assert_served_by(store: &Store, asked: Backend, records: u64) {
    let s = store.reads_served();
    let want = match asked {
        Backend::Uring if !uring_here() => Backend::Pread,
        b => b,
    };
    let (p, m, u) = match want {
        Backend::Pread => (records, 0, 0),
        Backend::Mmap => (0, records, 0),
        Backend::Uring => (0, 0, records),
        Backend::Auto => panic!("Auto has no fixed backend"),
    };
    assert_eq!(
        (s.pread, s.mmap, s.uring),
        (p, m, u),
        "records served by (pread, mmap, uring) with backend {asked}"
    );
}

/// Field 0 (int64 labels) of `ids` in dataset `ds`.
pub fn labels_at(ds: &zring_engine::dataset::Dataset, ids: &[u64]) -> Vec<i64> {
    use zring_engine::dataset::FieldDest;
    let mut out = vec![0u8; ids.len() * 8];
    ds.gather(ids, &[0], &mut [FieldDest::Dense(&mut out)])
        .expect("gather labels");
    out.chunks(8)
        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// A dataset at `dir/ds`: one field, `label` (int64), `shards` shards of 5 records,
/// record `i` holding `i`.
pub fn label_dataset_of(dir: &Path, shards: usize) -> PathBuf {
    use zring_engine::dataset::DatasetBuilder;
    let path = dir.join("ds");
    let schema = Schema::dense(DType::I64, &[]);
    let fields = vec![("label".to_string(), schema.clone())];
    let mut b = DatasetBuilder::create(&path, fields, false).expect("builder");
    for shard in 0..shards {
        let files = b.shard_paths(shard);
        let mut w =
            Writer::create(&files[0], schema.clone(), WriteOptions::default()).expect("writer");
        let first = 5 * shard as i64;
        let labels: Vec<u8> = (first..first + 5).flat_map(i64::to_le_bytes).collect();
        w.append_dense(&labels).expect("append");
        w.close().expect("close");
        b.add_shard(5).expect("shard");
    }
    b.publish().expect("publish");
    path
}
