//! `zring pack`: build a store from `.npy` files, memory-mapped and appended in
//! bounded batches so memory stays flat whatever the input size.

use std::ops::Range;
use std::path::PathBuf;
use std::time::Instant;

use clap::{ArgGroup, Args};
use zring_engine::{Codec, DType, ReadOptions, Schema, Store, WriteOptions, Writer};

use super::output::{self, bytes};
use super::progress::{self, Unit};
use super::{
    parse_align, parse_codec, parse_dtype, parse_key_value, parse_level, parse_size, CliError,
    CliResult,
};
use crate::npy::NpyFile;

/// Default dictionary size: zstd's own default (110 KiB).
pub const DEFAULT_DICT_BYTES: usize = 112_640;

/// zstd wants about 100x the dictionary size in samples; more only slows training.
const DICT_SAMPLE_FACTOR: usize = 100;
/// Never sample more than this for training, however large the input.
const DICT_SAMPLE_MAX: usize = 128 << 20;

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("input").required(true).args(["npy", "values"])))]
pub struct PackArgs {
    /// The store to create (e.g. data.zr).
    pub out: PathBuf,
    /// Dense input: a C-order .npy array; axis 0 indexes records, the rest is the
    /// item shape (a 1-D array gives scalar records).
    #[arg(long, value_name = "FILE.npy")]
    pub npy: Option<PathBuf>,
    /// Ragged input: the values of all records back to back.
    #[arg(long, value_name = "FILE.npy", requires = "offsets")]
    pub values: Option<PathBuf>,
    /// Ragged input: n + 1 integer offsets (cu_seqlens) into axis 0 of --values, or
    /// element offsets into the flattened values when --shapes is given.
    #[arg(long, value_name = "FILE.npy", requires = "values")]
    pub offsets: Option<PathBuf>,
    /// Ragged input: an n x ndim integer array of per-record shapes (n for ndim 1).
    #[arg(long, value_name = "FILE.npy", requires = "values")]
    pub shapes: Option<PathBuf>,
    /// raw, zstd or zstd-dict.
    #[arg(long, default_value = "zstd", value_parser = parse_codec)]
    pub codec: Codec,
    /// zstd compression level.
    #[arg(long, default_value_t = 3, allow_negative_numbers = true, value_parser = parse_level)]
    pub level: i32,
    /// Dictionary size for zstd-dict (trained on records spread over the input);
    /// units allowed (112k).
    #[arg(long, value_name = "SIZE", default_value_t = DEFAULT_DICT_BYTES, value_parser = parse_size::<usize>)]
    pub dict_size: usize,
    /// Use this trained dictionary (from `zring train-dict`) instead of training one.
    #[arg(long, value_name = "FILE")]
    pub dict: Option<PathBuf>,
    /// Start every record at a multiple of this many bytes (4096 or 4k suits O_DIRECT).
    #[arg(long, value_name = "SIZE", default_value_t = 8, value_parser = parse_align)]
    pub align: u32,
    /// Replace an existing file at OUT.
    #[arg(long)]
    pub overwrite: bool,
    /// Compression threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// A metadata attribute to store, KEY=VALUE (repeatable).
    #[arg(long = "meta", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub meta: Vec<(String, String)>,
    /// The element type of a raw-bytes (|V) array, e.g. bfloat16 or float8_e4m3fn.
    #[arg(long, value_parser = parse_dtype)]
    pub dtype: Option<DType>,
    /// Input bytes handed to the writer per append call (memory in flight is
    /// bounded by this plus the writer's chunks); units allowed (64M).
    #[arg(long, value_name = "SIZE", default_value_t = 64 << 20, value_parser = parse_size::<usize>)]
    pub batch_bytes: usize,
}

/// Dense records: an array whose first axis is the record axis.
struct DenseInput {
    file: NpyFile,
    width: usize,
    count: usize,
}

/// Ragged records: values plus element offsets (and shapes).
struct RaggedInput {
    values: NpyFile,
    /// Element offsets, `count + 1`, starting at 0, non-decreasing.
    offsets: Vec<u64>,
    /// Per-record shapes (`count x ndim`) when given; otherwise records are
    /// `(rows, row_dims...)` slices of axis 0 of the values.
    shapes: Option<Vec<u32>>,
    /// Trailing dims of the values array and elements per row (no --shapes).
    row_dims: Vec<u32>,
    row_elems: u64,
    ndim: usize,
}

enum Input {
    Dense(DenseInput),
    Ragged(RaggedInput),
}

impl Input {
    fn count(&self) -> usize {
        match self {
            Input::Dense(d) => d.count,
            Input::Ragged(r) => r.offsets.len() - 1,
        }
    }

    fn record(&self, i: usize) -> &[u8] {
        match self {
            Input::Dense(d) => &d.file.data()[i * d.width..(i + 1) * d.width],
            Input::Ragged(r) => &r.values.data()[r.byte_range(i..i + 1)],
        }
    }

    fn total_bytes(&self) -> usize {
        match self {
            Input::Dense(d) => d.file.data().len(),
            Input::Ragged(r) => r.values.data().len(),
        }
    }

    fn schema(&self) -> Schema {
        match self {
            Input::Dense(d) => Schema::dense(d.file.dtype(), &d.file.shape()[1..]),
            Input::Ragged(r) => Schema::ragged(r.values.dtype(), r.ndim),
        }
    }
}

impl RaggedInput {
    fn byte_range(&self, records: Range<usize>) -> Range<usize> {
        let size = self.values.dtype().itemsize();
        self.offsets[records.start] as usize * size..self.offsets[records.end] as usize * size
    }

    /// The shapes of records `range`, flattened.
    fn shapes_of(&self, range: Range<usize>) -> Vec<u32> {
        match &self.shapes {
            Some(s) => s[range.start * self.ndim..range.end * self.ndim].to_vec(),
            None => range
                .flat_map(|i| {
                    let rows = (self.offsets[i + 1] - self.offsets[i]) / self.row_elems;
                    std::iter::once(rows as u32).chain(self.row_dims.iter().copied())
                })
                .collect(),
        }
    }
}

/// Runs `zring pack`.
pub fn run(args: &PackArgs) -> CliResult {
    if args.out.is_dir() {
        return Err(CliError::new(format!(
            "{}: is a directory; give the path of the store file to create",
            args.out.display()
        )));
    }
    if args.out.exists() && !args.overwrite {
        return Err(CliError::new(format!(
            "{}: already exists (pass --overwrite to replace it)",
            args.out.display()
        )));
    }
    if args.dict.is_some() && args.codec != Codec::ZstdDict {
        return Err(CliError::usage(
            "--dict is only used with --codec zstd-dict",
        ));
    }
    let input = open_input(args)?;
    let mut schema = input.schema();
    for (k, v) in &args.meta {
        schema.metadata.insert(k.clone(), v.clone());
    }
    let dictionary = match (args.codec, &args.dict) {
        (Codec::ZstdDict, Some(path)) => {
            Some(std::fs::read(path).map_err(|e| CliError::io(path, "reading the dictionary", e))?)
        }
        (Codec::ZstdDict, None) => Some(train(&input, args.dict_size)?),
        _ => None,
    };
    let opts = WriteOptions::with_codec(args.codec)
        .level(args.level)
        .dictionary(dictionary)
        .align(args.align)
        .overwrite(args.overwrite)
        .threads(args.threads);
    let started = Instant::now();
    let mut writer = Writer::create(&args.out, schema, opts)?;
    // Ctrl-C or a kill (SIGTERM) removes the unfinished temporary file.
    let _cleanup = writer.temp_path().map(zring_platform::remove_on_signal);
    let total = input.total_bytes();
    let bar = progress::bar(total as u64, "pack", Unit::Bytes);
    let batch_bytes = args.batch_bytes.max(1);
    for range in batches(&input, batch_bytes) {
        match &input {
            Input::Dense(d) => {
                writer.append_dense(&d.file.data()[range.start * d.width..range.end * d.width])?
            }
            Input::Ragged(r) => {
                let base = r.offsets[range.start];
                let cu: Vec<u64> = r.offsets[range.start..=range.end]
                    .iter()
                    .map(|o| o - base)
                    .collect();
                let values = &r.values.data()[r.byte_range(range.clone())];
                writer.append_ragged(values, &cu, &r.shapes_of(range.clone()))?
            }
        };
        let done = match &input {
            Input::Dense(d) => {
                let bytes = range.start * d.width..range.end * d.width;
                d.file.release(bytes.clone());
                bytes.len()
            }
            Input::Ragged(r) => {
                let bytes = r.byte_range(range);
                r.values.release(bytes.clone());
                bytes.len()
            }
        };
        bar.inc(done as u64);
    }
    writer.close()?;
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    let store = Store::open(&args.out, ReadOptions::default())?;
    let stats = store.stats()?;
    let kind = match &store.schema().layout {
        zring_engine::Layout::Dense { item_shape } => {
            format!("{}{}", store.schema().dtype, output::shape(item_shape))
        }
        zring_engine::Layout::Ragged { ndim } => {
            format!("ragged {} (ndim {ndim})", store.schema().dtype)
        }
    };
    let ratio = if stats.stored_bytes > 0 {
        format!(
            "{:.2}x",
            stats.logical_bytes as f64 / stats.stored_bytes as f64
        )
    } else {
        "n/a".into()
    };
    output::print(&format!(
        "packed {} records of {kind} into {} ({}): {} -> {} stored ({ratio}), file {}, in {seconds:.2} s ({} MiB/s)\n",
        output::count(stats.records),
        args.out.display(),
        codec_label(args.codec, args.level),
        bytes(stats.logical_bytes),
        bytes(stats.stored_bytes),
        bytes(stats.file_bytes),
        output::rate(stats.logical_bytes as f64 / output::MIB / seconds.max(1e-9)),
    ))
    .map_err(|e| CliError::new(format!("writing to stdout: {e}")))
}

/// `zstd-3`, `zstd-dict-3` or `raw`.
pub fn codec_label(codec: Codec, level: i32) -> String {
    match codec {
        Codec::Raw => "raw".into(),
        c => format!("{c}-{level}"),
    }
}

/// Ranges of records holding about `batch_bytes` of input each (at least one record).
fn batches(input: &Input, batch_bytes: usize) -> Vec<Range<usize>> {
    let n = input.count();
    let mut out = Vec::new();
    let mut start = 0;
    while start < n {
        let end = match input {
            Input::Dense(d) => start + (batch_bytes / d.width).max(1),
            Input::Ragged(r) => {
                let limit =
                    r.offsets[start] * r.values.dtype().itemsize() as u64 + batch_bytes as u64;
                let size = r.values.dtype().itemsize() as u64;
                // The first offset past the budget ends the batch.
                let k = r.offsets[start + 1..].partition_point(|&o| o * size <= limit);
                start + k.max(1)
            }
        };
        let end = end.min(n);
        out.push(start..end);
        start = end;
    }
    out
}

/// Trains a dictionary on records spread evenly over the whole input.
fn train(input: &Input, dict_bytes: usize) -> CliResult<Vec<u8>> {
    let n = input.count();
    if n == 0 {
        return Err(CliError::new(
            "codec zstd-dict needs records to train a dictionary; the input has none",
        ));
    }
    let avg = (input.total_bytes() / n).max(1);
    let budget = dict_bytes
        .saturating_mul(DICT_SAMPLE_FACTOR)
        .min(DICT_SAMPLE_MAX);
    let want = (budget / avg).clamp(1, n);
    let samples: Vec<&[u8]> = (0..want)
        .map(|k| input.record((k as u128 * n as u128 / want as u128) as usize))
        .collect();
    zring_engine::train_dict(&samples, dict_bytes)
        .map_err(|e| CliError::from(e).context("training the dictionary"))
}

fn open_input(args: &PackArgs) -> CliResult<Input> {
    if let Some(path) = &args.npy {
        let file = NpyFile::open(path, args.dtype)?;
        let shape = file.shape();
        let Some((&count, item_shape)) = shape.split_first() else {
            return Err(CliError::new(format!(
                "{}: a 0-d array has no record axis; save it as a 1-element 1-D array",
                path.display()
            )));
        };
        let width = zring_engine::shape_bytes(item_shape, file.dtype())
            .and_then(|w| usize::try_from(w).ok())
            .ok_or_else(|| CliError::new(format!("{}: records are too large", path.display())))?;
        if width == 0 && count > 0 {
            return Err(CliError::new(format!(
                "{}: records of shape {} hold no bytes",
                path.display(),
                output::shape(item_shape)
            )));
        }
        let count = usize::try_from(count)
            .map_err(|_| CliError::new(format!("{}: too many records", path.display())))?;
        return Ok(Input::Dense(DenseInput { file, width, count }));
    }
    let (Some(values_path), Some(offsets_path)) = (&args.values, &args.offsets) else {
        return Err(CliError::new(
            "give --npy FILE (dense) or --values FILE --offsets FILE (ragged)",
        ));
    };
    let values = NpyFile::open(values_path, args.dtype)?;
    let offsets_file = NpyFile::open(offsets_path, None)?;
    if offsets_file.shape().len() != 1 {
        return Err(CliError::new(format!(
            "{}: offsets must be a 1-D array of n + 1 integers, not shape {}",
            offsets_path.display(),
            output::shape(offsets_file.shape())
        )));
    }
    let mut offsets = offsets_file.to_u64_vec("offsets")?;
    if offsets.is_empty() {
        return Err(CliError::new(format!(
            "{}: offsets is empty; it needs n + 1 entries starting at 0",
            offsets_path.display()
        )));
    }
    let n = offsets.len() - 1;
    let elements = values.header().elements().unwrap_or(u64::MAX);
    let (shapes, row_dims, row_elems, ndim) = match &args.shapes {
        Some(shapes_path) => {
            let f = NpyFile::open(shapes_path, None)?;
            let ndim = match f.shape() {
                [rows] if *rows as usize == n => 1,
                [rows, ndim] if *rows as usize == n => *ndim as usize,
                s => {
                    return Err(CliError::new(format!(
                        "{}: shapes must be {n} x ndim (one row per record), not {}",
                        shapes_path.display(),
                        output::shape(s)
                    )))
                }
            };
            let dims = f
                .to_u64_vec("shapes")?
                .into_iter()
                .map(u32::try_from)
                .collect::<Result<Vec<u32>, _>>()
                .map_err(|_| {
                    CliError::new(format!(
                        "{}: a dimension does not fit in 32 bits",
                        shapes_path.display()
                    ))
                })?;
            (Some(dims), Vec::new(), 1, ndim)
        }
        None => {
            let Some((_, rest)) = values.shape().split_first() else {
                return Err(CliError::new(format!(
                    "{}: values must have at least one axis",
                    values_path.display()
                )));
            };
            let row_dims = rest
                .iter()
                .map(|&d| u32::try_from(d))
                .collect::<Result<Vec<u32>, _>>()
                .map_err(|_| {
                    CliError::new(format!(
                        "{}: a dimension does not fit in 32 bits",
                        values_path.display()
                    ))
                })?;
            let row_elems = rest.iter().product::<u64>();
            if row_elems == 0 {
                return Err(CliError::new(format!(
                    "{}: values rows hold no elements",
                    values_path.display()
                )));
            }
            // Offsets count rows of axis 0; the writer wants element offsets.
            for o in &mut offsets {
                *o = o.checked_mul(row_elems).ok_or_else(|| {
                    CliError::new(format!("{}: offsets overflow", offsets_path.display()))
                })?;
            }
            (None, row_dims, row_elems, values.shape().len())
        }
    };
    let input = RaggedInput {
        values,
        offsets,
        shapes,
        row_dims,
        row_elems,
        ndim,
    };
    check_ragged(&input, elements, offsets_path)?;
    Ok(Input::Ragged(input))
}

/// Checks offsets and shapes with record numbers of the whole input (the writer
/// would name records relative to one batch).
fn check_ragged(r: &RaggedInput, elements: u64, offsets_path: &std::path::Path) -> CliResult {
    let bad = |d: String| Err(CliError::new(format!("{}: {d}", offsets_path.display())));
    let unit = if r.shapes.is_none() && r.row_elems > 1 {
        r.row_elems
    } else {
        1
    };
    let o = &r.offsets;
    if o[0] != 0 {
        return bad(format!("offsets must start at 0, not {}", o[0] / unit));
    }
    for i in 0..o.len() - 1 {
        // Equal offsets are an empty record (format v1.2).
        if o[i + 1] < o[i] {
            return bad(format!(
                "offsets must not decrease: record {i} spans {}..{}",
                o[i] / unit,
                o[i + 1] / unit
            ));
        }
        if r.shapes.is_none() && (o[i + 1] - o[i]) / unit > u64::from(u32::MAX) {
            return bad(format!("record {i} has more than 2^32 - 1 rows"));
        }
        if let Some(shapes) = &r.shapes {
            let dims = &shapes[i * r.ndim..(i + 1) * r.ndim];
            let product = dims
                .iter()
                .map(|&d| u64::from(d))
                .try_fold(1u64, u64::checked_mul);
            if product != Some(o[i + 1] - o[i]) {
                return bad(format!(
                    "record {i} has shape {dims:?} but the offsets give it {} elements",
                    o[i + 1] - o[i]
                ));
            }
        }
    }
    let last = o[o.len() - 1];
    if last != elements {
        return bad(format!(
            "the last offset is {} but the values hold {}",
            last / unit,
            elements / unit
        ));
    }
    Ok(())
}
