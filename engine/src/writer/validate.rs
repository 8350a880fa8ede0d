//! What a writer checks before it writes anything: its options and each ragged batch.

use crate::error::{ArgumentError, Error, Result, SchemaError};
use crate::format;
use crate::schema::{Codec, Schema};

use super::WriteOptions;

/// Checks the schema and the options of a new writer.
pub(super) fn options(schema: &Schema, opts: &WriteOptions) -> Result<()> {
    schema.validate()?;
    if schema.item_bytes() == Some(0) {
        return Err(Error::Schema(SchemaError::ZeroSizeRecords));
    }
    if !opts.align.is_power_of_two() || opts.align > format::MAX_ALIGN {
        return Err(Error::InvalidArgument(ArgumentError::Align {
            align: opts.align,
            max: format::MAX_ALIGN,
        }));
    }
    let levels = zstd::compression_level_range();
    if opts.codec != Codec::Raw && !levels.contains(&opts.level) {
        return Err(Error::InvalidArgument(ArgumentError::Level {
            level: opts.level,
            min: *levels.start(),
            max: *levels.end(),
        }));
    }
    match (&opts.codec, &opts.dictionary) {
        (Codec::ZstdDict, None) => Err(Error::InvalidArgument(ArgumentError::DictMissing)),
        (Codec::ZstdDict, Some(d)) if d.is_empty() => {
            Err(Error::InvalidArgument(ArgumentError::DictEmpty))
        }
        (Codec::Raw | Codec::Zstd, Some(_)) => {
            Err(Error::InvalidArgument(ArgumentError::DictUnused {
                codec: opts.codec,
            }))
        }
        _ => Ok(()),
    }
}

/// Checks a ragged batch before anything is written.
pub(super) fn ragged(
    values_len: usize,
    itemsize: usize,
    cu_seqlens: &[u64],
    shapes: &[u32],
    ndim: usize,
) -> Result<()> {
    let n = match cu_seqlens.len().checked_sub(1) {
        Some(n) => n,
        None => return Err(Error::InvalidArgument(ArgumentError::CuSeqlensEmpty)),
    };
    if cu_seqlens[0] != 0 {
        return Err(Error::InvalidArgument(ArgumentError::CuSeqlensStart {
            first: cu_seqlens[0],
        }));
    }
    if Some(shapes.len()) != n.checked_mul(ndim) {
        return Err(Error::InvalidArgument(ArgumentError::ShapesLen {
            len: shapes.len(),
            records: n,
            ndim,
        }));
    }
    for i in 0..n {
        let (a, b) = (cu_seqlens[i], cu_seqlens[i + 1]);
        // Equal offsets are an empty record (format v1.2), which a 0 dim must say.
        if b < a {
            return Err(Error::InvalidArgument(ArgumentError::CuSeqlensDecreasing {
                record: i,
                start: a,
                end: b,
            }));
        }
        let dims = &shapes[i * ndim..(i + 1) * ndim];
        let elems = dims
            .iter()
            .map(|&d| u64::from(d))
            .try_fold(1u64, u64::checked_mul);
        if elems != Some(b - a) {
            return Err(Error::InvalidArgument(ArgumentError::ShapeMismatch {
                record: i,
                shape: dims.iter().map(|&d| u64::from(d)).collect(),
                elements: b - a,
            }));
        }
        if (b - a).saturating_mul(itemsize as u64) > format::MAX_RECORD_BYTES {
            return Err(Error::InvalidArgument(ArgumentError::RecordTooLarge {
                record: i,
                limit: format::MAX_RECORD_BYTES,
            }));
        }
    }
    let total = cu_seqlens[n].checked_mul(itemsize as u64);
    if total != Some(values_len as u64) {
        return Err(Error::InvalidArgument(ArgumentError::ValuesLen {
            elements: cu_seqlens[n],
            bytes: cu_seqlens[n].saturating_mul(itemsize as u64),
            values: values_len,
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ragged_validation_names_the_problem() {
        let ok = ragged(24, 4, &[0, 2, 6], &[2, 4], 1);
        assert!(ok.is_ok());
        // Empty records (format v1.2): a 0 dim, equal offsets.
        assert!(ragged(8, 4, &[0, 0, 2, 2], &[0, 2, 0], 1).is_ok());
        assert!(ragged(0, 4, &[0, 0], &[3, 0], 2).is_ok());
        use ArgumentError as A;
        type Case<'a> = (&'a [u64], &'a [u32], usize, fn(&A) -> bool);
        let cases: [Case; 6] = [
            (&[1, 2, 6], &[1, 4], 24, |a| {
                matches!(a, A::CuSeqlensStart { first: 1 })
            }),
            (&[0, 2, 1], &[2, 1], 4, |a| {
                matches!(a, A::CuSeqlensDecreasing { record: 1, .. })
            }),
            (&[0, 2, 2], &[2, 1], 8, |a| {
                matches!(a, A::ShapeMismatch { record: 1, .. })
            }),
            (&[0, 2, 6], &[2, 3], 24, |a| {
                matches!(a, A::ShapeMismatch { record: 1, .. })
            }),
            (&[0, 2, 6], &[2, 4], 20, |a| {
                matches!(a, A::ValuesLen { values: 20, .. })
            }),
            (&[0, 2, 6], &[2], 24, |a| {
                matches!(a, A::ShapesLen { len: 1, .. })
            }),
        ];
        for (k, (cu, shapes, len, want)) in cases.into_iter().enumerate() {
            match ragged(len, 4, cu, shapes, 1) {
                Err(Error::InvalidArgument(a)) => assert!(want(&a), "case {k}: {a:?}"),
                other => panic!("case {k}: expected InvalidArgument, got {other:?}"),
            }
        }
    }
}
