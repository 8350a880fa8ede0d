//! Image decodes from Python: the spec of a `zring.decode.Image` (the dict its
//! `_spec()` returns) made into the loader's `ImageDecode`, and decode errors
//! mapped to Python exceptions by variant.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use zring_image::{Crop, ImageSpec, PixelLayout};
use zring_loader::{DecodeError, ImageDecode, OnError};

use crate::errors;

/// `spec[key]`, or an `InvalidArgumentError` naming the field and the key.
fn get<'py>(spec: &Bound<'py, PyDict>, key: &str, field: &str) -> PyResult<Bound<'py, PyAny>> {
    spec.get_item(key)?.ok_or_else(|| {
        errors::INVALID.err(
            spec.py(),
            format!("the decode of field {field:?} has no {key:?}"),
        )
    })
}

/// `spec[key]` extracted as `$t`; a wrong type is an `InvalidArgumentError` naming
/// the field and the key.
macro_rules! item {
    ($spec:expr, $key:expr, $field:expr, $t:ty) => {
        get($spec, $key, $field)?.extract::<$t>().map_err(|e| {
            let e: PyErr = e.into();
            errors::INVALID.err(
                $spec.py(),
                format!("the decode of field {:?} has a bad {:?}: {e}", $field, $key),
            )
        })?
    };
}

/// The decode of field `field` from its spec dict (see `zring/decode.py`).
pub(crate) fn image_decode(spec: &Bound<'_, PyAny>, field: &str) -> PyResult<ImageDecode> {
    let py = spec.py();
    let spec = spec.cast::<PyDict>().map_err(|_| {
        errors::INVALID.err(
            py,
            format!("the decode of field {field:?} must be a zring.decode.Image"),
        )
    })?;
    let (height, width): (u32, u32) = item!(spec, "size", field, (u32, u32));
    let crop = match item!(spec, "crop", field, String).as_str() {
        "center" => Crop::Center,
        "full" => Crop::Full,
        "random_resized" => Crop::RandomResized {
            scale: item!(spec, "scale", field, (f64, f64)),
            ratio: item!(spec, "ratio", field, (f64, f64)),
        },
        other => {
            return Err(errors::INVALID.err(
                py,
                format!(
                    "field {field:?}: unknown crop {other:?} (expected \"center\", \
                     \"random_resized\" or \"full\")"
                ),
            ))
        }
    };
    let layout = match item!(spec, "layout", field, String).as_str() {
        "hwc" => PixelLayout::Hwc,
        "chw" => PixelLayout::Chw,
        other => {
            return Err(errors::INVALID.err(
                py,
                format!("field {field:?}: unknown layout {other:?} (expected \"hwc\" or \"chw\")"),
            ))
        }
    };
    let spec_rs = ImageSpec {
        crop,
        flip: item!(spec, "flip", field, bool),
        layout,
        seed: item!(spec, "seed", field, u64),
        max_pixels: item!(spec, "max_pixels", field, u64),
        ..ImageSpec::new(height, width)
    };
    let on_error: OnError = item!(spec, "on_error", field, String)
        .parse()
        .map_err(|e| decode_error(py, e))?;
    ImageDecode::new(spec_rs)
        .map(|d| d.with_on_error(on_error))
        .map_err(|e| errors::INVALID.err(py, format!("field {field:?}: {e}")))
}

/// The Python exception for a decode error, by variant.
pub(crate) fn decode_error(py: Python<'_>, e: DecodeError) -> PyErr {
    decode_error_with(py, &e, e.to_string())
}

/// [`decode_error`] with the message `msg` (a loader's, with its step and stream).
pub(crate) fn decode_error_with(py: Python<'_>, e: &DecodeError, msg: String) -> PyErr {
    match e {
        DecodeError::Image { .. } | DecodeError::NoSubstitute { .. } => errors::IMAGE.err(py, msg),
        DecodeError::NotEncoded { .. } => errors::SCHEMA.err(py, msg),
        DecodeError::Read(source) => errors::engine_with(py, source, msg),
        _ => errors::INVALID.err(py, msg),
    }
}

/// What `_decode_images` returns: one pixel array per source, then the records
/// kept, those skipped and the `(bad, substitute)` pairs.
type DecodedOut<'py> = (Vec<Bound<'py, PyAny>>, Vec<u64>, Vec<u64>, Vec<(u64, u64)>);

/// Decodes records `idx` (a 1-D selection) of every source (a store or a dataset
/// field of encoded images, named by `names`) with its spec, for `epoch`, on the
/// engine's pool: the framework adapters' read of image fields given as stores.
#[pyfunction]
#[pyo3(signature = (sources, names, idx, specs, epoch = 0))]
pub(crate) fn _decode_images<'py>(
    py: Python<'py>,
    sources: Vec<Bound<'py, PyAny>>,
    names: Vec<String>,
    idx: &Bound<'py, PyAny>,
    specs: Vec<Bound<'py, PyAny>>,
    epoch: u64,
) -> PyResult<DecodedOut<'py>> {
    if sources.len() != names.len() || sources.len() != specs.len() || sources.is_empty() {
        return Err(errors::INVALID.err(
            py,
            "_decode_images takes one name and one spec per source, and a source at least",
        ));
    }
    let mut fields = Vec::with_capacity(sources.len());
    for ((source, name), spec) in sources.iter().zip(&names).zip(&specs) {
        let py_name = pyo3::types::PyString::new(py, name);
        let (records, _) = crate::loader::view_source(py, &py_name, source)?;
        let image = image_decode(spec, name)?;
        image
            .check_source(&*records, name)
            .map_err(|e| decode_error(py, e))?;
        fields.push((records, image));
    }
    let sel = crate::index::select(idx, fields[0].0.len())?;
    let (arrays, decoded) = decode_arrays(py, &fields, sel.ids(), epoch)?;
    Ok((
        arrays,
        decoded.indices,
        decoded.skipped,
        decoded.substituted,
    ))
}

/// Decodes records `ids` of every `(records, decode)` for `epoch` on the engine's
/// pool (without the GIL) into one `uint8` pixel array per source, `(kept, *shape)`.
pub(crate) fn decode_arrays<'py>(
    py: Python<'py>,
    fields: &[(zring_loader::Source, ImageDecode)],
    ids: &[u64],
    epoch: u64,
) -> PyResult<(Vec<Bound<'py, PyAny>>, zring_loader::Decoded)> {
    let mut bufs = Vec::with_capacity(fields.len());
    for (_, image) in fields {
        let n = ids.len().saturating_mul(image.out_bytes());
        let buf = crate::buffer::acquire(n).map_err(|e| {
            pyo3::exceptions::PyMemoryError::new_err(format!(
                "cannot allocate {n} bytes of decoded pixels: {e}"
            ))
        })?;
        bufs.push(buf);
    }
    // Ctrl-C stops the decode between records (see `interrupt::read`).
    let mut decoded = None;
    crate::interrupt::read(py, |stop| {
        let mut dests: Vec<zring_loader::ImageField<'_>> = fields
            .iter()
            .zip(bufs.iter_mut())
            .map(|((records, image), buf)| zring_loader::ImageField {
                records: &**records,
                decode: image,
                out: &mut buf[..],
            })
            .collect();
        decoded = Some(zring_loader::decode_images(
            &mut dests,
            ids,
            epoch,
            zring_platform::Pool::global(),
            stop,
        )?);
        Ok(())
    })
    .map_err(|halt| match halt {
        crate::interrupt::Halt::Failed(e) => decode_error(py, e),
        crate::interrupt::Halt::Signal(e) => e,
    })?;
    let decoded =
        decoded.ok_or_else(|| errors::INVALID.err(py, "internal: the decode returned nothing"))?;
    let kept = decoded.indices.len();
    let descr = crate::dtype::to_numpy(py, zring_engine::DType::U8)?;
    let mut arrays = Vec::with_capacity(bufs.len());
    for ((_, image), mut buf) in fields.iter().zip(bufs) {
        buf.truncate(kept * image.out_bytes());
        let shape: Vec<usize> = std::iter::once(kept).chain(image.item_shape()).collect();
        arrays.push(crate::buffer::array_over(py, buf, &descr, &shape)?);
    }
    Ok((arrays, decoded))
}
