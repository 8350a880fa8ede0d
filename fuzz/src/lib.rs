//! What the fuzz targets share: a scratch directory for the files they write, a
//! dictionary for zstd-dict stores, and the input decoding that turns fuzz bytes
//! into records (so that `make_seeds` can write inputs the targets understand).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use zring_engine::{Codec, DType, Schema, WriteOptions, Writer};

/// A directory private to this process, removed when the process exits normally
/// (libFuzzer exits through `exit` after `-runs`); a crash leaves it for inspection.
pub fn scratch_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // tmpfs when there is one: the targets write a file per input.
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("zring-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("creating the fuzz scratch directory");
        extern "C" fn remove_scratch() {
            if let Some(dir) = DIR.get() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
        // SAFETY: registers a plain `extern "C" fn()` with no arguments, which is
        // what atexit expects; it only touches the process-lifetime static above.
        unsafe { libc::atexit(remove_scratch) };
        dir
    })
}

/// A path in the scratch directory.
pub fn scratch(name: &str) -> PathBuf {
    scratch_dir().join(name)
}

/// A small dictionary trained once from deterministic records, for zstd-dict stores.
pub fn dictionary() -> &'static [u8] {
    static DICT: OnceLock<Vec<u8>> = OnceLock::new();
    DICT.get_or_init(|| {
        let records: Vec<Vec<u8>> = (0..512u32)
            .map(|i| {
                let mut r = format!("record {i} of the fuzz dictionary: ").into_bytes();
                r.extend((0..64).map(|k| ((i * 7 + k) % 23) as u8));
                r
            })
            .collect();
        let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        zring_engine::train_dict(&refs, 2048).expect("training the fuzz dictionary")
    })
}

/// Reads bytes off the front of a fuzz input; past the end it yields zeros.
pub struct Input<'a>(pub &'a [u8]);

impl<'a> Input<'a> {
    pub fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    /// Up to `n` bytes.
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Records decoded from a fuzz input, and the store they make.
#[derive(Debug)]
pub struct Records {
    pub schema: Schema,
    pub codec: Codec,
    /// Each record's bytes.
    pub bytes: Vec<Vec<u8>>,
    /// Each record's shape (the item shape for dense stores).
    pub shapes: Vec<Vec<u64>>,
}

const DTYPES: [DType; 4] = [DType::U8, DType::U16, DType::U32, DType::U64];
const CODECS: [Codec; 3] = [Codec::Raw, Codec::Zstd, Codec::ZstdDict];
/// Bounds that keep one input cheap (a few KiB of records).
const MAX_RECORDS: usize = 64;
const MAX_DIM: u64 = 8;

impl Records {
    /// Decodes records from the input. Layout of the input:
    /// byte 0: bit 0 ragged, bits 1-2 codec (mod 3), bit 3 repeat each record's first
    /// bytes (compressible records); byte 1: dtype (bits 0-1) and ndim - 1 (bits
    /// 2-3, mod 3); then per record one byte per dimension (1 + b % 8) and the
    /// element bytes. Dense records all have the first record's shape.
    pub fn decode(input: &mut Input<'_>) -> Records {
        let flags = input.byte();
        let ragged = flags & 1 == 1;
        let codec = CODECS[usize::from((flags >> 1) & 3) % 3];
        let repeat = flags & 8 != 0;
        let kind = input.byte();
        let dtype = DTYPES[usize::from(kind & 3)];
        let ndim = 1 + usize::from((kind >> 2) & 3) % 3;
        let itemsize = dtype.itemsize();
        let dims = |input: &mut Input<'_>| -> Vec<u64> {
            (0..ndim)
                .map(|_| 1 + u64::from(input.byte()) % MAX_DIM)
                .collect()
        };
        let item_shape = if ragged { Vec::new() } else { dims(input) };
        let mut bytes = Vec::new();
        let mut shapes = Vec::new();
        while !input.is_empty() && bytes.len() < MAX_RECORDS {
            let shape = if ragged {
                dims(input)
            } else {
                item_shape.clone()
            };
            let len = shape.iter().product::<u64>() as usize * itemsize;
            let mut rec = input.take(len).to_vec();
            if repeat && !rec.is_empty() {
                let head = rec[..rec.len().min(4)].to_vec();
                for (k, b) in rec.iter_mut().enumerate() {
                    *b = head[k % head.len()];
                }
            }
            rec.resize(len, 0);
            bytes.push(rec);
            shapes.push(shape);
        }
        let schema = if ragged {
            Schema::ragged(dtype, ndim)
        } else {
            Schema::dense(dtype, &item_shape)
        };
        Records {
            schema,
            codec,
            bytes,
            shapes,
        }
    }

    /// Writes the records as a store at `path` (replacing any file there).
    pub fn write(&self, path: &Path) -> zring_engine::Result<()> {
        let opts = WriteOptions::with_codec(self.codec)
            .level(3)
            .dictionary((self.codec == Codec::ZstdDict).then(|| dictionary().to_vec()))
            .overwrite(true)
            .threads(1);
        let mut w = Writer::create(path, self.schema.clone(), opts)?;
        if self.schema.is_ragged() {
            let itemsize = self.schema.dtype.itemsize() as u64;
            let mut cu = vec![0u64];
            for r in &self.bytes {
                cu.push(cu[cu.len() - 1] + r.len() as u64 / itemsize);
            }
            let dims: Vec<u32> = self.shapes.iter().flatten().map(|&d| d as u32).collect();
            w.append_ragged(&self.bytes.concat(), &cu, &dims)?;
        } else {
            w.append_dense(&self.bytes.concat())?;
        }
        w.close()?;
        Ok(())
    }
}

/// Rewrites every checksum of a store-shaped file so that damage the fuzzer made
/// gets past them: the superblock's, each record's (for table entries whose stored
/// bytes lie in the file), each metadata section's (those inside the file) and the
/// footer's. Files too short for a superblock and a footer, or without the footer
/// magic, are left as they are. This takes `open_file` past the checksums into the
/// validation of the footer's fields, the table, the shapes and the schema.
pub fn reseal(file: &mut [u8]) {
    use zring_engine::format::{checksum, BLOCK, ENTRY_BYTES};
    let len = file.len();
    if len < 2 * BLOCK || &file[len - BLOCK..len - BLOCK + 8] != b"ZRING\0FT" {
        return;
    }
    let sum = checksum(&file[0..56]);
    file[56..64].copy_from_slice(&sum.to_le_bytes());
    let footer = len - BLOCK;
    let at = |f: &[u8], i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&f[i..i + 8]);
        u64::from_le_bytes(b)
    };
    let inside = |offset: u64, n: u64| -> Option<std::ops::Range<usize>> {
        let end = offset.checked_add(n)?;
        (end <= footer as u64).then_some(offset as usize..end as usize)
    };
    // Records first (their checksums live in the table, which is hashed next).
    let table = 32 + 24 * 3;
    let (t_off, t_len) = (at(file, footer + table), at(file, footer + table + 8));
    if let Some(t) = inside(t_off, t_len) {
        let entries = (t.len() / ENTRY_BYTES).min(4096);
        for k in 0..entries {
            let e = t.start + k * ENTRY_BYTES;
            let (offset, stored) = (
                at(file, e),
                u64::from(u32::from_le_bytes([
                    file[e + 8],
                    file[e + 9],
                    file[e + 10],
                    file[e + 11],
                ])),
            );
            if let Some(r) = inside(offset, stored) {
                let sum = checksum(&file[r]);
                file[e + 16..e + 24].copy_from_slice(&sum.to_le_bytes());
            }
        }
    }
    // The dictionary, shapes, table and schema sections (the data section's
    // checksum field is 0 by definition).
    for k in 1..5 {
        let s = footer + 32 + 24 * k;
        if let Some(r) = inside(at(file, s), at(file, s + 8)) {
            let sum = checksum(&file[r]);
            file[s + 16..s + 24].copy_from_slice(&sum.to_le_bytes());
        }
    }
    let sum = checksum(&file[footer..len - 8]);
    file[len - 8..].copy_from_slice(&sum.to_le_bytes());
}

/// A small published dataset (fields `tokens` ragged i32 and `label` dense i64, two
/// shards of 3 and 2 records) in its own scratch directory, and a valid store
/// beside it, outside it: a manifest naming that store must not open. Returns the
/// dataset directory; its manifests are what `dataset_manifest` overwrites.
pub fn dataset_template() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("dataset");
        let fields = vec![
            ("tokens".to_string(), Schema::ragged(DType::I32, 1)),
            ("label".to_string(), Schema::dense(DType::I64, &[])),
        ];
        let mut b = zring_engine::dataset::DatasetBuilder::create(&dir, fields, false)
            .expect("creating the template dataset");
        for records in [3u64, 2] {
            let paths = b.shard_paths(b.added());
            write_field_stores(&paths, records);
            b.add_shard(records).expect("adding a template shard");
        }
        let mut manifest = b.publish().expect("publishing the template dataset");
        // Published store names carry a random tag; fixed names keep the seeds'
        // manifests (written by make_seeds in another process) naming real files.
        for (s, shard) in manifest.shards.iter_mut().enumerate() {
            for (f, file) in shard.files.iter_mut().enumerate() {
                let name = format!("data/s{s}f{f}.zr");
                std::fs::rename(dir.join(&*file), dir.join(&name))
                    .expect("renaming a template store");
                *file = name;
            }
        }
        let json = manifest.to_json();
        std::fs::write(dir.join("manifest.json"), &json).expect("writing the template manifest");
        std::fs::write(zring_engine::dataset::version_path(&dir, 1), &json)
            .expect("writing the template manifest");
        write_field_stores(
            &[scratch("outside_tokens.zr"), scratch("outside_label.zr")],
            2,
        );
        dir
    })
}

fn write_field_stores(paths: &[PathBuf], records: u64) {
    let opts = WriteOptions::default();
    let mut t = Writer::create(&paths[0], Schema::ragged(DType::I32, 1), opts.clone())
        .expect("creating a template store");
    let mut l = Writer::create(&paths[1], Schema::dense(DType::I64, &[]), opts)
        .expect("creating a template store");
    let values: Vec<u8> = (0..records as i32).flat_map(|v| v.to_le_bytes()).collect();
    let cu: Vec<u64> = (0..=records).collect();
    let shapes = vec![1u32; records as usize];
    t.append_ragged(&values, &cu, &shapes)
        .expect("writing template tokens");
    let labels: Vec<u8> = (0..records as i64).flat_map(|v| v.to_le_bytes()).collect();
    l.append_dense(&labels).expect("writing template labels");
    t.close().expect("closing a template store");
    l.close().expect("closing a template store");
}
