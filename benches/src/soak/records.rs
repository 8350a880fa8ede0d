//! The soak's records: ragged `u8` records whose length and every byte are a pure
//! function of (seed, record index), so that every read — a loader batch or a single
//! get — is checked against bytes recomputed on the spot, with no copy of the data
//! kept in memory (the store is meant to be several times the memory limit).
//!
//! Record `i` is its index (8 bytes, little-endian: a misplaced record names the
//! record it really is) followed by splitmix64 stream `i` of the seed, truncated to
//! [`Params::len`]`(i)` bytes.

use std::path::Path;

use zring_engine::{Codec, DType, ReadOptions, Schema, Store, WriteOptions, Writer};
use zring_workloads::rng::{mix, Rng};

use super::SoakError;

/// Names the generator in the store's metadata: a store written by another version
/// of this file has other bytes, and is rewritten instead of misread.
const GENERATOR: &str = "zring-soak-v1";
/// Records appended per writer call: about 12 MiB at the default sizes, so writing
/// a store many times the memory limit holds one chunk in memory at a time.
const WRITE_CHUNK: usize = 512;
/// Records read back to accept an existing store (spread over the whole file).
const SPOT_CHECKS: u64 = 64;

/// What the records are: the store's identity, kept in its metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub seed: u64,
    pub records: u64,
    /// Shortest record, bytes (at least 8: the index).
    pub min_len: usize,
    /// Longest record, bytes.
    pub max_len: usize,
}

/// The first difference between a record read and the record generated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub index: u64,
    pub got_len: usize,
    pub want_len: usize,
    /// First differing byte (the shorter length when only the lengths differ).
    pub at: usize,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "record {}: {} bytes read, {} expected, first difference at byte {}",
            self.index, self.got_len, self.want_len, self.at
        )
    }
}

impl Params {
    /// Records of `min_len..=max_len` bytes, as many as fill about `store_bytes`.
    pub fn for_size(seed: u64, store_bytes: u64, min_len: usize, max_len: usize) -> Self {
        let mean = (min_len + max_len) as u64 / 2;
        Self {
            seed,
            records: (store_bytes / mean.max(1)).max(1),
            min_len,
            max_len,
        }
    }

    /// The length of record `i`: uniform in `min_len..=max_len`.
    pub fn len(&self, i: u64) -> usize {
        let span = (self.max_len - self.min_len + 1) as u64;
        self.min_len + (mix(self.seed ^ mix(i)) % span) as usize
    }

    /// Appends record `i` to `out`.
    pub fn fill(&self, i: u64, out: &mut Vec<u8>) {
        let len = self.len(i);
        let start = out.len();
        out.extend_from_slice(&i.to_le_bytes());
        let mut rng = Rng::new(self.seed, i);
        while out.len() - start < len {
            let take = (len - (out.len() - start)).min(8);
            out.extend_from_slice(&rng.next_u64().to_le_bytes()[..take]);
        }
        out.truncate(start + len);
    }

    /// Checks `got` against record `i` without building it: eight bytes at a time,
    /// as they are generated, so checking costs no allocation on the read paths.
    pub fn check(&self, i: u64, got: &[u8]) -> Result<(), Mismatch> {
        let want_len = self.len(i);
        let mismatch = |at| Mismatch {
            index: i,
            got_len: got.len(),
            want_len,
            at,
        };
        let head = i.to_le_bytes();
        let n = got.len().min(want_len).min(8);
        if let Some(at) = (0..n).find(|&k| got[k] != head[k]) {
            return Err(mismatch(at));
        }
        let mut rng = Rng::new(self.seed, i);
        let body = got.get(8..).unwrap_or(&[]);
        let body_len = want_len.saturating_sub(8).min(body.len());
        for (k, chunk) in body[..body_len].chunks(8).enumerate() {
            let want = rng.next_u64().to_le_bytes();
            if let Some(d) = chunk.iter().zip(want).position(|(a, b)| *a != b) {
                return Err(mismatch(8 + 8 * k + d));
            }
        }
        if got.len() != want_len {
            return Err(mismatch(got.len().min(want_len)));
        }
        Ok(())
    }

    fn schema(&self) -> Schema {
        Schema::ragged(DType::U8, 1)
            .with_metadata("generator", GENERATOR)
            .with_metadata("seed", self.seed.to_string())
            .with_metadata("records", self.records.to_string())
            .with_metadata("min_len", self.min_len.to_string())
            .with_metadata("max_len", self.max_len.to_string())
    }

    /// Bytes of record data (the store adds its table and alignment).
    pub fn data_bytes(&self) -> u64 {
        (0..self.records).map(|i| self.len(i) as u64).sum()
    }
}

/// What [`prepare`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prepared {
    Reused,
    Written,
}

/// Makes `path` a store of `params`' records: reuses a store this generator wrote
/// with the same parameters whose spot-checked records read back right, rewrites a
/// soak store that differs, and refuses to replace any other file.
pub fn prepare(path: &Path, params: &Params) -> Result<Prepared, SoakError> {
    if path.exists() {
        match Store::open(path, ReadOptions::default()) {
            Ok(store) => {
                let meta = &store.schema().metadata;
                if meta.get("generator").map(String::as_str) != Some(GENERATOR) {
                    return Err(SoakError::NotASoakStore {
                        path: path.to_path_buf(),
                        reason: "a zring store this tool did not write".into(),
                    });
                }
                if store.schema() == &params.schema() && spot_check(&store, params).is_ok() {
                    return Ok(Prepared::Reused);
                }
                eprintln!(
                    "soak: {} is a soak store of other records (or damaged); rewriting it",
                    path.display()
                );
            }
            Err(e) => {
                return Err(SoakError::NotASoakStore {
                    path: path.to_path_buf(),
                    reason: e.to_string(),
                })
            }
        }
    }
    write(path, params)?;
    let store = Store::open(path, ReadOptions::default())?;
    spot_check(&store, params)?;
    Ok(Prepared::Written)
}

/// Reads [`SPOT_CHECKS`] records spread over the store, and the last, and checks them.
fn spot_check(store: &Store, params: &Params) -> Result<(), SoakError> {
    if store.len() != params.records {
        return Err(SoakError::Wrong(format!(
            "{}: {} records, {} expected",
            store.path().display(),
            store.len(),
            params.records
        )));
    }
    let step = (params.records / SPOT_CHECKS).max(1);
    let picks = (0..params.records)
        .step_by(step as usize)
        .chain([params.records - 1]);
    for i in picks {
        params
            .check(i, &store.get(i)?)
            .map_err(|m| SoakError::Wrong(m.to_string()))?;
    }
    Ok(())
}

/// Writes every record, [`WRITE_CHUNK`] at a time, printing progress by tenths.
fn write(path: &Path, params: &Params) -> Result<(), SoakError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| SoakError::Io {
            path: dir.to_path_buf(),
            what: "creating the store's directory",
            source,
        })?;
    }
    // Raw: the bytes are random, so compressing them would only spend the CPU the
    // readers need; checksums are written (and checked on every read) regardless.
    let opts = WriteOptions::with_codec(Codec::Raw).overwrite(true);
    let mut w = Writer::create(path, params.schema(), opts)?;
    let started = std::time::Instant::now();
    let (mut values, mut cu, mut shapes) = (Vec::new(), Vec::new(), Vec::new());
    let mut tenth = 0;
    let mut next = 0u64;
    while next < params.records {
        let end = (next + WRITE_CHUNK as u64).min(params.records);
        values.clear();
        cu.clear();
        shapes.clear();
        cu.push(0u64);
        for i in next..end {
            params.fill(i, &mut values);
            cu.push(values.len() as u64);
            shapes.push(params.len(i) as u32);
        }
        w.append_ragged(&values, &cu, &shapes)?;
        next = end;
        if next * 10 / params.records > tenth {
            tenth = next * 10 / params.records;
            eprintln!(
                "soak: writing {}: {}0% ({:.0} s)",
                path.display(),
                tenth,
                started.elapsed().as_secs_f64()
            );
        }
    }
    w.close()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params {
            seed: 7,
            records: 100,
            min_len: 8,
            max_len: 300,
        }
    }

    #[test]
    fn records_check_against_themselves_and_any_change_is_found() {
        let p = params();
        for i in 0..100 {
            let mut r = Vec::new();
            p.fill(i, &mut r);
            assert_eq!(r.len(), p.len(i));
            assert_eq!(p.check(i, &r), Ok(()));
            let last = r.len() - 1;
            r[last] ^= 1;
            assert_eq!(p.check(i, &r).map_err(|m| m.at), Err(last));
            r[last] ^= 1;
            assert!(p.check(i + 1, &r).is_err(), "another index's bytes");
            r.pop();
            assert_eq!(p.check(i, &r).map_err(|m| m.at), Err(last));
            r.extend([0, 0]);
            assert!(p.check(i, &r).is_err(), "too long");
        }
    }

    #[test]
    fn a_written_store_is_reused_and_a_foreign_file_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("soak.zr");
        let p = params();
        assert_eq!(prepare(&path, &p).expect("write"), Prepared::Written);
        assert_eq!(prepare(&path, &p).expect("reuse"), Prepared::Reused);
        let other = Params { seed: 8, ..p };
        assert_eq!(prepare(&path, &other).expect("rewrite"), Prepared::Written);
        let foreign = dir.path().join("notes.txt");
        std::fs::write(&foreign, b"not a store").expect("write");
        assert!(matches!(
            prepare(&foreign, &p),
            Err(SoakError::NotASoakStore { .. })
        ));
    }
}
