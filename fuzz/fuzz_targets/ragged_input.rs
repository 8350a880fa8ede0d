//! The writer's check of ragged batches (`Writer::check_ragged`, which
//! `append_ragged` runs first): it accepts exactly the batches that describe whole
//! records, and an accepted batch appends and reads back record for record.
//!
//! Input layout: byte 0: dtype (bits 0-1) and ndim - 1 (bits 2-3, mod 3); byte 1:
//! number of offsets (mod 17); byte 2: number of dims (mod 49); byte 3: values
//! length (mod 256, in bytes); then the offsets (one byte each, mod 32, so that
//! valid batches are common, or a u32 when the byte is 255) and the dims (one byte
//! each, or a u32 when 255).
#![no_main]

use std::sync::Mutex;

use libfuzzer_sys::fuzz_target;
use zring_engine::{Codec, DType, ReadOptions, Schema, Store, WriteOptions, Writer};
use zring_fuzz::{scratch, Input};

const DTYPES: [DType; 4] = [DType::U8, DType::U16, DType::U32, DType::U64];

fn small_or_u32(input: &mut Input<'_>, modulus: u8) -> u32 {
    match input.byte() {
        255 => input.u32(),
        b => u32::from(b % modulus),
    }
}

/// What an accepted batch must satisfy, written independently of the engine.
fn whole_records(
    values_len: usize,
    itemsize: usize,
    cu: &[u64],
    dims: &[u32],
    ndim: usize,
) -> bool {
    let Some(n) = cu.len().checked_sub(1) else {
        return false;
    };
    cu[0] == 0
        && dims.len() == n * ndim
        && (0..n).all(|i| {
            let elems: u128 = dims[i * ndim..(i + 1) * ndim]
                .iter()
                .map(|&d| u128::from(d))
                .product();
            // Empty records (a zero dim) are whole records too (format 1.2).
            cu[i] <= cu[i + 1] && u128::from(cu[i + 1] - cu[i]) == elems
        })
        && u128::from(cu[n]) * itemsize as u128 == values_len as u128
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let kind = input.byte();
    let dtype = DTYPES[usize::from(kind & 3)];
    let ndim = 1 + usize::from((kind >> 2) & 3) % 3;
    let offsets = usize::from(input.byte() % 17);
    let ndims = usize::from(input.byte() % 49);
    let values_len = usize::from(input.byte());
    let mut cu: Vec<u64> = Vec::with_capacity(offsets);
    for _ in 0..offsets {
        let step = u64::from(small_or_u32(&mut input, 32));
        // Mostly cumulative (so valid batches are common); a u32 step may also go
        // backwards, which must be refused.
        let last = cu.last().copied().unwrap_or(0);
        cu.push(if step > 1 << 20 { step } else { last + step });
    }
    let dims: Vec<u32> = (0..ndims).map(|_| small_or_u32(&mut input, 8)).collect();
    let values: Vec<u8> = (0..values_len).map(|k| k as u8).collect();

    static WRITER: Mutex<Option<(Schema, Writer)>> = Mutex::new(None);
    let schema = Schema::ragged(dtype, ndim);
    let mut guard = WRITER.lock().unwrap_or_else(|e| e.into_inner());
    if guard.as_ref().is_none_or(|(s, _)| *s != schema) {
        let opts = WriteOptions::with_codec(Codec::Raw)
            .overwrite(true)
            .threads(1);
        let w = Writer::create(scratch("ragged_input.zr"), schema.clone(), opts)
            .expect("creating the writer");
        *guard = Some((schema.clone(), w));
    }
    let Some((_, writer)) = guard.as_mut() else {
        return;
    };
    let accepted = writer.check_ragged(values.len(), &cu, &dims).is_ok();
    let whole = whole_records(values.len(), dtype.itemsize(), &cu, &dims, ndim);
    assert_eq!(
        accepted, whole,
        "check_ragged({values_len} bytes, {cu:?}, {dims:?}) disagrees"
    );
    if !accepted || cu.len() < 2 {
        return;
    }
    // An accepted batch appends and reads back exactly.
    let path = scratch("ragged_append.zr");
    let opts = WriteOptions::with_codec(Codec::Raw)
        .overwrite(true)
        .threads(1);
    let mut w = Writer::create(&path, schema, opts).expect("creating the writer");
    w.append_ragged(&values, &cu, &dims)
        .expect("appending an accepted batch");
    w.close().expect("publishing");
    let store = Store::open(&path, ReadOptions::default()).expect("opening the store");
    let itemsize = dtype.itemsize();
    for i in 0..cu.len() - 1 {
        let want = &values[cu[i] as usize * itemsize..cu[i + 1] as usize * itemsize];
        assert_eq!(store.get(i as u64).expect("reading a record"), want);
        let shape: Vec<u64> = dims[i * ndim..(i + 1) * ndim]
            .iter()
            .map(|&d| u64::from(d))
            .collect();
        assert_eq!(store.shape(i as u64).expect("reading a shape"), shape);
    }
});
