//! Building benchmark stores from generated data, and reading back what was stored.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use zring_engine::{train_dict, Codec, Error, Result, Store, WriteOptions, Writer};
use zring_engine::{Entry, RecordCodec};

use crate::data::{Dense, Ragged, StoreSchema};

/// zstd level of every compressed benchmark store (docs/workloads.md: zstd-3).
pub const ZSTD_LEVEL: i32 = 3;
/// Size of trained dictionaries.
pub const DICT_BYTES: usize = 64 << 10;

/// A store codec as the benchmarks name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreCodec {
    Raw,
    /// zstd level 3, no dictionary.
    Zstd,
    /// zstd level 3 with a dictionary trained on the records.
    ZstdDict,
}

impl StoreCodec {
    /// The name used in benchmark ids.
    pub fn name(self) -> &'static str {
        match self {
            StoreCodec::Raw => "raw",
            StoreCodec::Zstd => "zstd",
            StoreCodec::ZstdDict => "zstd-dict",
        }
    }

    fn codec(self) -> Codec {
        match self {
            StoreCodec::Raw => Codec::Raw,
            StoreCodec::Zstd => Codec::Zstd,
            StoreCodec::ZstdDict => Codec::ZstdDict,
        }
    }
}

/// Write options for `codec` with `threads` compression threads (0 = all cores);
/// `dict` is required by, and only used for, `ZstdDict`. Existing files are replaced.
pub fn write_options(codec: StoreCodec, threads: usize, dict: Option<&[u8]>) -> WriteOptions {
    WriteOptions::default()
        .codec(codec.codec())
        .level(ZSTD_LEVEL)
        .dictionary(
            (codec == StoreCodec::ZstdDict)
                .then(|| dict.map(<[u8]>::to_vec))
                .flatten(),
        )
        .overwrite(true)
        .threads(threads)
}

/// Writes the first `n` records of `data` to `path` (the whole `Writer::create` ..
/// `close`, including the fsyncs). Returns the number of records.
pub fn write_dense(path: &Path, data: &Dense, n: usize, opts: WriteOptions) -> Result<u64> {
    let mut w = Writer::create(path, data.schema(), opts)?;
    w.append_dense(data.head(n))?;
    w.close()
}

/// Writes every record of `data` to `path`. Returns the number of records.
pub fn write_ragged(path: &Path, data: &Ragged, opts: WriteOptions) -> Result<u64> {
    let mut w = Writer::create(path, data.schema(), opts)?;
    w.append_ragged(&data.values, &data.cu_seqlens, &data.shapes())?;
    w.close()
}

/// A [`DICT_BYTES`] dictionary trained on the first `n` dense records.
pub fn dense_dict(data: &Dense, n: usize) -> Result<Vec<u8>> {
    let recs: Vec<&[u8]> = (0..n.min(data.len())).map(|i| data.record(i)).collect();
    train_dict(&recs, DICT_BYTES)
}

/// A [`DICT_BYTES`] dictionary trained on the ragged records.
pub fn ragged_dict(data: &Ragged) -> Result<Vec<u8>> {
    let recs: Vec<&[u8]> = (0..data.len()).map(|i| data.record(i)).collect();
    train_dict(&recs, DICT_BYTES)
}

/// Reads the whole file once so that timed reads find it in the page cache.
/// Returns its size.
pub fn warm(path: &Path) -> std::io::Result<u64> {
    let mut f = File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        match f.read(&mut buf)? {
            0 => return Ok(total),
            n => total += n as u64,
        }
    }
}

/// A store's file in memory with its table: the exact frames the engine decodes,
/// for the decode-limit baseline.
pub struct Frames {
    pub file: Vec<u8>,
    pub entries: Vec<Entry>,
    /// The store's dictionary (empty unless zstd-dict).
    pub dictionary: Vec<u8>,
}

impl Frames {
    /// Loads `store`'s file and table.
    pub fn load(store: &Store) -> Result<Self> {
        let file = std::fs::read(store.path()).map_err(|source| Error::Io {
            path: store.path().to_path_buf(),
            what: "reading the store for a baseline",
            source,
        })?;
        let entries = (0..store.len())
            .map(|i| store.entry(i))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            file,
            entries,
            dictionary: store.dictionary().to_vec(),
        })
    }

    /// The stored bytes of record `i` and whether they are compressed.
    pub fn stored(&self, i: usize) -> (&[u8], bool) {
        let e = &self.entries[i];
        let at = e.offset as usize;
        (
            &self.file[at..at + e.stored_len as usize],
            e.codec != RecordCodec::Raw,
        )
    }

    /// Logical over stored payload bytes.
    pub fn ratio(&self) -> f64 {
        let logical: u64 = self.entries.iter().map(|e| u64::from(e.logical_len)).sum();
        let stored: u64 = self.entries.iter().map(|e| u64::from(e.stored_len)).sum();
        logical as f64 / stored.max(1) as f64
    }
}
