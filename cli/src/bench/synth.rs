//! Writing the synthetic store of `bench`; its records come from
//! [`zring_workloads::SynthSpec`], the one home of zring's generated workloads, and
//! its schema from [`schema`].

use std::path::Path;
use std::time::Instant;

use zring_engine::{Codec, DType, Schema, WriteOptions, Writer};

pub use zring_workloads::{SynthSpec, IMAGE_BYTES, IMAGE_SHAPE};

use crate::progress::{self, Unit};
use crate::{CliError, CliResult};

/// Input bytes generated per append call while writing.
const BATCH_BYTES: usize = 16 << 20;

/// How writing the synthetic store went.
#[derive(Clone, Copy, Debug)]
pub struct WriteReport {
    pub logical_bytes: u64,
    /// The store file's size: what went to the disk (padding, table and metadata
    /// included), the bytes a comparison with the disk's write must use.
    pub file_bytes: u64,
    /// Create, appends and close (which includes both fsyncs); data generation
    /// and dictionary training are not counted.
    pub seconds: f64,
    /// Dictionary training (zstd-dict only).
    pub dict_seconds: Option<f64>,
    /// Whether the records were generated before the write (so `seconds` is one
    /// stretch of writing from memory) or between appends (only appends timed).
    pub from_memory: bool,
    /// CPU seconds of the process during the write (user + system: copies into the
    /// page cache, checksums, compression).
    pub cpu_seconds: Option<f64>,
    /// Cores other processes kept busy meanwhile.
    pub others_cores: Option<f64>,
}

/// Builds the synthetic store at `path` (created fresh); `opts.dictionary` is
/// trained here for zstd-dict.
pub fn create_store(
    path: &Path,
    spec: &SynthSpec,
    mut opts: WriteOptions,
    dict_bytes: usize,
) -> CliResult<WriteReport> {
    let total = spec.logical_bytes();
    let bar = progress::bar(total, "write", Unit::Bytes);
    let mut timed = 0.0f64;
    let mut dict_seconds = None;
    if opts.codec == Codec::ZstdDict && opts.dictionary.is_none() {
        let want = (dict_bytes.saturating_mul(100) / spec.record_bytes.max(1))
            .clamp(1, spec.count as usize) as u64;
        let samples: Vec<Vec<u8>> = (0..want)
            .map(|k| spec.record(k * spec.count / want))
            .collect();
        let refs: Vec<&[u8]> = samples.iter().map(Vec::as_slice).collect();
        let started = Instant::now();
        opts.dictionary = Some(zring_engine::train_dict(&refs, dict_bytes)?);
        dict_seconds = Some(started.elapsed().as_secs_f64());
    }
    // Stores up to IN_MEMORY_BYTES are generated first and written from memory in
    // one timed stretch, as the W7 write benchmark does: timing only the appends of
    // a store generated on the fly would let the device write back while the clock
    // is stopped. Larger stores are generated chunk by chunk, appends timed.
    let from_memory = total <= IN_MEMORY_BYTES;
    let mut next = 0u64;
    let mut ready = Vec::new();
    if from_memory {
        while let Some(c) = chunk(spec, &mut next) {
            ready.push(c);
        }
    }
    let mut ready = ready.into_iter();
    let load = super::measure::LoadWindow::start();
    let cpu_before = zring_platform::process_cpu_time();
    let started = Instant::now();
    let mut writer = Writer::create(path, schema(spec), opts)?;
    timed += started.elapsed().as_secs_f64();
    loop {
        let chunk = match ready.next() {
            Some(c) => c,
            None if from_memory => break,
            None => match chunk(spec, &mut next) {
                Some(c) => c,
                None => break,
            },
        };
        let started = Instant::now();
        if spec.ragged {
            writer.append_ragged(&chunk.values, &chunk.cu, &chunk.shapes)?;
        } else {
            writer.append_dense(&chunk.values)?;
        }
        timed += started.elapsed().as_secs_f64();
        bar.inc(chunk.values.len() as u64);
    }
    let started = Instant::now();
    writer.close()?;
    timed += started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    // Over the whole write, generation included when it was not done first.
    let cpu_seconds = super::measure::cpu_seconds_since(cpu_before);
    let file_bytes = std::fs::metadata(path)
        .map_err(|e| CliError::io(path, "reading the store's size", e))?
        .len();
    Ok(WriteReport {
        logical_bytes: total,
        file_bytes,
        seconds: timed,
        dict_seconds,
        from_memory,
        cpu_seconds,
        others_cores: load.other_cores(cpu_seconds),
    })
}

/// Stores at most this large are generated in memory before the timed write.
const IN_MEMORY_BYTES: u64 = 512 << 20;

/// Up to `BATCH_BYTES` of consecutive records, ready to append.
struct Chunk {
    values: Vec<u8>,
    cu: Vec<u64>,
    shapes: Vec<u32>,
}

/// The records of `spec` from `*next` on that fit in one chunk (at least one),
/// advancing `*next`; `None` when all were generated.
fn chunk(spec: &SynthSpec, next: &mut u64) -> Option<Chunk> {
    if *next >= spec.count {
        return None;
    }
    let mut c = Chunk {
        values: Vec::new(),
        cu: vec![0],
        shapes: Vec::new(),
    };
    while *next < spec.count
        && (c.values.is_empty() || c.values.len() + spec.record_len(*next) <= BATCH_BYTES)
    {
        let len = spec.record_len(*next);
        let at = c.values.len();
        c.values.resize(at + len, 0);
        spec.fill_record(*next, &mut c.values[at..]);
        c.cu.push(c.values.len() as u64);
        c.shapes.push(len as u32);
        *next += 1;
    }
    Some(c)
}

/// The store schema of `spec`'s records: uint8[3,224,224] for the W1 size, uint8[n]
/// otherwise, or ragged 1-D uint8; its metadata names the generator and the seed.
pub fn schema(spec: &SynthSpec) -> Schema {
    let schema = if spec.ragged {
        Schema::ragged(DType::U8, 1)
    } else if spec.record_bytes == IMAGE_BYTES {
        Schema::dense(DType::U8, &IMAGE_SHAPE)
    } else {
        Schema::dense(DType::U8, &[spec.record_bytes as u64])
    };
    schema
        .with_metadata("generator", "zring bench synthetic image-like v1")
        .with_metadata("seed", spec.seed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_sized_records_get_the_image_shape() {
        let spec = SynthSpec {
            count: 1,
            record_bytes: IMAGE_BYTES,
            ragged: false,
            seed: 0,
            lengths: None,
        };
        assert_eq!(schema(&spec).item_bytes(), Some(IMAGE_BYTES as u64));
        assert_eq!(schema(&spec).ndim(), 3);
    }

    #[test]
    fn chunks_cover_every_record_once_in_order() {
        let spec = SynthSpec {
            count: 40,
            record_bytes: 1 << 20,
            ragged: true,
            seed: 3,
            lengths: None,
        };
        let mut next = 0;
        let mut all = Vec::new();
        while let Some(c) = chunk(&spec, &mut next) {
            assert!(c.values.len() <= BATCH_BYTES || c.shapes.len() == 1);
            all.extend_from_slice(&c.values);
        }
        let want: Vec<u8> = (0..40).flat_map(|i| spec.record(i)).collect();
        assert_eq!(all, want);
    }
}
