//! One batch of image fields: the encoded records gathered, decoded in parallel on
//! the pool into their slots, bad records handled, the batch compacted.

use std::cell::RefCell;
use std::sync::{Mutex, PoisonError};

use zring_engine::{Error as EngineError, Interrupt, RaggedLayout, Records};
use zring_image::{ImageDecoder, ImageError, ImageSpec};
use zring_platform::{batch_scratch_oversized, scratch_oversized, Pool};

use super::{DecodeError, ImageDecode, OnError};

/// How many substitutes are drawn for one bad record before the batch fails: a
/// store where that many random records in a row are bad is not worth training on.
const SUBSTITUTE_TRIES: u32 = 16;
/// Decoders kept per thread (one per spec in use: a loader's image streams, a
/// gather's fields).
const DECODERS_PER_THREAD: usize = 4;

thread_local! {
    /// This thread's decoders, one per spec, reused batch to batch: the decoded
    /// source pixels and the resizer's buffers are the per-core scratch.
    static DECODERS: RefCell<Vec<ImageDecoder>> = const { RefCell::new(Vec::new()) };
    /// The encoded records of the batches this thread gathers, reused batch to
    /// batch under the platform's keep policy, so a steady loader allocates no
    /// encoded-bytes buffer per step.
    static GATHERED: RefCell<Gathered> = RefCell::new(Gathered::default());
}

/// One image field of a batch: where its encoded records are, how they decode,
/// and its pixel buffer (`indices.len() * decode.out_bytes()` bytes).
pub struct ImageField<'a> {
    /// The encoded images (checked with [`ImageDecode::check_source`]).
    pub records: &'a dyn Records,
    /// How they decode.
    pub decode: &'a ImageDecode,
    /// The pixels, one slot per index, in order.
    pub out: &'a mut [u8],
}

/// What a decoded batch holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decoded {
    /// The records of the batch in the end, in order: the indices asked for, less
    /// those skipped, with substitutes in place. Every field's first
    /// `indices.len()` slots hold their pixels; other fields of the batch (labels)
    /// are to be read for these.
    pub indices: Vec<u64>,
    /// Records left out ([`OnError::Skip`]), in batch order.
    pub skipped: Vec<u64>,
    /// `(bad record, the record decoded in its place)` ([`OnError::Substitute`]).
    pub substituted: Vec<(u64, u64)>,
}

/// Decodes records `indices` of every field into its `out`, for epoch `epoch`, on
/// `pool` (the caller working too); `stop` is asked between records.
///
/// A record that fails in any field is handled by that field's [`OnError`] (the
/// first failing field in order decides): [`OnError::Raise`] fails the batch with
/// the first bad record in batch order, whatever the threads' timing;
/// [`OnError::Skip`] leaves the record out of every field; [`OnError::Substitute`]
/// decodes, in every field, a record drawn from `(seed, epoch, record, try)` in its
/// place. Skipped slots are closed up, so every field's first
/// `Decoded::indices.len()` slots are the batch.
pub fn decode_images(
    fields: &mut [ImageField<'_>],
    indices: &[u64],
    epoch: u64,
    pool: &Pool,
    stop: &dyn Interrupt,
) -> Result<Decoded, DecodeError> {
    for field in fields.iter() {
        let expected = indices.len() * field.decode.out_bytes();
        if field.out.len() != expected {
            return Err(DecodeError::OutLength {
                expected,
                actual: field.out.len(),
            });
        }
    }
    let n = indices.len();
    let mut current = indices.to_vec();
    let mut alive = vec![true; n];
    let mut substituted = Vec::new();
    // This thread's gather scratch, taken out for the batch (a nested call on the
    // same thread, which cannot happen, would start from an empty one).
    let mut scratch = GATHERED
        .with(|g| g.try_borrow_mut().map(|mut g| std::mem::take(&mut *g)))
        .unwrap_or_default();
    let resolved = resolve(
        fields,
        indices,
        epoch,
        pool,
        stop,
        &mut scratch,
        &mut current,
        &mut alive,
    );
    // Kept for the next batch unless it grew past the platform's batch keep limit.
    if !batch_scratch_oversized(scratch.bytes.capacity()) {
        GATHERED.with(|g| {
            if let Ok(mut g) = g.try_borrow_mut() {
                *g = scratch;
            }
        });
    }
    resolved?;
    for (slot, (&asked, &got)) in indices.iter().zip(&current).enumerate() {
        if alive[slot] && asked != got {
            substituted.push((asked, got));
        }
    }
    let skipped = (0..n).filter(|&s| !alive[s]).map(|s| indices[s]).collect();
    let mut kept = Vec::with_capacity(n);
    for (slot, &record) in current.iter().enumerate() {
        if alive[slot] {
            let to = kept.len();
            if to != slot {
                for field in fields.iter_mut() {
                    let width = field.decode.out_bytes();
                    field
                        .out
                        .copy_within(slot * width..(slot + 1) * width, to * width);
                }
            }
            kept.push(record);
        }
    }
    Ok(Decoded {
        indices: kept,
        skipped,
        substituted,
    })
}

/// Decodes every field's slots until no slot is left to (re)decode: failures are
/// handled by their field's policy, and substituted slots are decoded again, in
/// every field, for their new record. `current` ends as the records decoded, and
/// `alive` false for the skipped slots.
#[allow(clippy::too_many_arguments)]
fn resolve(
    fields: &mut [ImageField<'_>],
    indices: &[u64],
    epoch: u64,
    pool: &Pool,
    stop: &dyn Interrupt,
    scratch: &mut Gathered,
    current: &mut [u64],
    alive: &mut [bool],
) -> Result<(), DecodeError> {
    let n = indices.len();
    let mut tries = vec![0u32; n];
    let mut dirty: Vec<usize> = (0..n).collect();
    while !dirty.is_empty() {
        // The first failure of each slot, over the fields in order.
        let mut failed: Vec<Option<(usize, ImageError)>> = Vec::new();
        for (f, field) in fields.iter_mut().enumerate() {
            for (slot, error) in decode_slots(field, &dirty, current, epoch, pool, stop, scratch)? {
                if failed.len() < n {
                    failed.resize_with(n, || None);
                }
                if failed[slot].is_none() {
                    failed[slot] = Some((f, error));
                }
            }
        }
        let mut next = Vec::new();
        for (slot, failure) in failed.into_iter().enumerate() {
            let Some((f, error)) = failure else { continue };
            let field = &fields[f];
            match field.decode.on_error() {
                OnError::Raise => {
                    return Err(DecodeError::Image {
                        field: f,
                        records: field.records.describe(),
                        source: error,
                    })
                }
                OnError::Skip => alive[slot] = false,
                OnError::Substitute => {
                    tries[slot] += 1;
                    if tries[slot] > SUBSTITUTE_TRIES {
                        return Err(DecodeError::NoSubstitute {
                            field: f,
                            records: field.records.describe(),
                            record: indices[slot],
                            tries: SUBSTITUTE_TRIES,
                            source: error,
                        });
                    }
                    let spec = field.decode.spec();
                    current[slot] =
                        substitute(spec, epoch, indices[slot], tries[slot], field.records.len());
                    next.push(slot);
                }
            }
        }
        dirty = next;
    }
    Ok(())
}

/// A batch's encoded records, reused from round to round.
#[derive(Default)]
struct Gathered {
    layout: RaggedLayout,
    bytes: Vec<u8>,
    records: Vec<u64>,
}

/// Decodes slots `slots` (ascending) of `field`, holding records `current[slot]`, on
/// the pool; returns the slots that failed with their errors.
fn decode_slots(
    field: &mut ImageField<'_>,
    slots: &[usize],
    current: &[u64],
    epoch: u64,
    pool: &Pool,
    stop: &dyn Interrupt,
    gathered: &mut Gathered,
) -> Result<Vec<(usize, ImageError)>, DecodeError> {
    let Gathered {
        layout,
        bytes,
        records,
    } = gathered;
    records.clear();
    records.extend(slots.iter().map(|&s| current[s]));
    // One ragged gather of the encoded records through the read path.
    field.records.ragged_layout_into(records, layout)?;
    bytes.clear();
    if bytes.capacity() < layout.values_bytes {
        // Exactly this batch's size, allocated afresh: growing would copy the old
        // contents and double past what the batches need (and past the keep limit).
        *bytes = Vec::with_capacity(layout.values_bytes);
    }
    bytes.resize(layout.values_bytes, 0);
    field
        .records
        .gather_ragged_until(records, layout, bytes, stop)?;
    let spec = field.decode.spec();
    let width = spec.out_bytes();
    // Each task takes the next (slot, record, encoded bytes, pixel slot): the
    // destination is handed out as disjoint `&mut` parts, one by one.
    let mut wanted = slots.iter().copied().peekable();
    let mut parts = Vec::with_capacity(slots.len());
    for (slot, out) in field.out.chunks_exact_mut(width).enumerate() {
        if wanted.peek() == Some(&slot) {
            wanted.next();
            parts.push((slot, out));
        }
    }
    let cu = &layout.cu_seqlens;
    let items =
        parts
            .into_iter()
            .zip(records.iter())
            .enumerate()
            .map(|(k, ((slot, out), &record))| {
                let (from, to) = (cu[k] as usize, cu[k + 1] as usize);
                (slot, record, &bytes[from..to], out)
            });
    let tasks = slots.len();
    let items = Mutex::new(items);
    let failures = Mutex::new(Vec::new());
    let problem = Mutex::new(None);
    pool.run(tasks, pool.workers(), |_| {
        if stop.interrupted() {
            return;
        }
        // Held for the claim only, never during a decode.
        let item = items.lock().unwrap_or_else(PoisonError::into_inner).next();
        let Some((slot, record, encoded, out)) = item else {
            return;
        };
        match with_decoder(spec, |d| d.decode_into(encoded, epoch, record, out)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((slot, e)),
            Err(e) => {
                let _ = problem
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(e);
            }
        }
    });
    if let Some(e) = problem.into_inner().unwrap_or_else(PoisonError::into_inner) {
        return Err(e);
    }
    if stop.interrupted() {
        return Err(DecodeError::Read(EngineError::Interrupted));
    }
    let mut failures = failures
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    // Batch order, whatever order the threads finished in.
    failures.sort_by_key(|&(slot, _)| slot);
    Ok(failures)
}

/// Runs `f` with this thread's decoder for `spec` (made on first use); a decoder
/// whose scratch grew past the platform's keep limit is released afterwards.
fn with_decoder<T>(
    spec: &ImageSpec,
    f: impl FnOnce(&mut ImageDecoder) -> T,
) -> Result<T, DecodeError> {
    DECODERS.with(|cell| {
        let Ok(mut decoders) = cell.try_borrow_mut() else {
            // Re-entered on this thread (cannot happen in a pool task): no reuse.
            let mut decoder = ImageDecoder::new(spec.clone()).map_err(DecodeError::Spec)?;
            return Ok(f(&mut decoder));
        };
        let at = match decoders.iter().position(|d| d.spec() == spec) {
            Some(at) => at,
            None => {
                if decoders.len() >= DECODERS_PER_THREAD {
                    decoders.remove(0);
                }
                decoders.push(ImageDecoder::new(spec.clone()).map_err(DecodeError::Spec)?);
                decoders.len() - 1
            }
        };
        let out = f(&mut decoders[at]);
        if scratch_oversized(decoders[at].scratch_bytes()) {
            decoders.remove(at);
        }
        Ok(out)
    })
}

/// The record decoded in place of bad `record` at try `attempt` (from 1): uniform
/// over `len` records, a pure function of `(seed, epoch, record, attempt)`.
fn substitute(spec: &ImageSpec, epoch: u64, record: u64, attempt: u32, len: u64) -> u64 {
    let mut z = mix64(spec.seed ^ 0x7375_6273_7469_7475);
    z = mix64(z ^ epoch);
    z = mix64(z ^ record.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = mix64(z ^ u64::from(attempt));
    // Multiply-shift: uniform enough over any `len` far below 2^64.
    ((u128::from(z) * u128::from(len.max(1))) >> 64) as u64
}

/// The splitmix64 finalizer.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
