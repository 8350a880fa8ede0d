//! Image decoding as a stage of the read path: a field of encoded images (ragged,
//! one-dimensional `u8` records holding JPEG or PNG bytes) becomes a dense `u8`
//! batch of pixels, `[B, height, width, 3]` or `[B, 3, height, width]`.
//!
//! As packing does (`pack/`), the stage reads through the one read path: the
//! encoded records of a batch are one ragged gather of the [`Records`] (a store, a
//! dataset's field), and the images are then decoded on the engine's pool (the
//! caller working too), one [`ImageDecoder`] of scratch per thread, each straight
//! into its record's slot of the batch buffer. Every random choice is
//! `zring-image`'s pure function of `(seed, epoch, record)`, so any number of
//! threads, loader workers and a resumed run give the same pixels.
//!
//! - [`ImageDecode`]: what one field decodes to (an [`ImageSpec`]) and what a bad
//!   record does ([`OnError`]).
//! - [`decode_images`]: one batch of one or more image fields, with the bad-record
//!   policy applied across them; [`Decoded`] tells which records the batch holds
//!   in the end. The loader runs it for its image streams (see
//!   [`View::decoded`](crate::View::decoded)), the Python binding for
//!   `Dataset.gather(decode=...)`.
//! - [`DecodeError`]: why a batch could not be decoded, naming the records (store or
//!   dataset field) and the record.

mod batch;

use std::fmt;

use zring_engine::{DType, Error as EngineError, Layout, Records};
use zring_image::{ImageDecoder, ImageError, ImageProblem, ImageSpec, PixelLayout};

pub use batch::{decode_images, Decoded, ImageField};

/// What happens to a record whose image cannot be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// The batch fails with a [`DecodeError::Image`] naming the record (the default).
    #[default]
    Raise,
    /// The record is left out: the batch is that much shorter (every field, the
    /// other streams of a loader included), and [`Decoded::skipped`] names it.
    Skip,
    /// Another record, drawn as a pure function of `(seed, epoch, record)`, takes its
    /// place in every field (its label too); [`Decoded::substituted`] names both.
    Substitute,
}

impl std::str::FromStr for OnError {
    type Err = DecodeError;

    fn from_str(name: &str) -> Result<Self, DecodeError> {
        match name {
            "raise" => Ok(Self::Raise),
            "skip" => Ok(Self::Skip),
            "substitute" => Ok(Self::Substitute),
            other => Err(DecodeError::UnknownOnError(other.to_owned())),
        }
    }
}

/// One image field's decode: the output spec and the bad-record policy.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageDecode {
    spec: ImageSpec,
    on_error: OnError,
}

impl ImageDecode {
    /// Decodes to `spec`, raising on a bad record; refused when the spec cannot
    /// produce an image (a zero side, crop bounds that cannot be drawn from).
    pub fn new(spec: ImageSpec) -> Result<Self, DecodeError> {
        // The decoder's own checks, once, so that a batch never meets them.
        ImageDecoder::new(spec.clone()).map_err(DecodeError::Spec)?;
        Ok(Self {
            spec,
            on_error: OnError::Raise,
        })
    }

    /// The same decode with bad records handled by `on_error`.
    pub fn with_on_error(mut self, on_error: OnError) -> Self {
        self.on_error = on_error;
        self
    }

    /// The output spec.
    pub fn spec(&self) -> &ImageSpec {
        &self.spec
    }

    /// What a bad record does.
    pub fn on_error(&self) -> OnError {
        self.on_error
    }

    /// Bytes of one decoded record.
    pub fn out_bytes(&self) -> usize {
        self.spec.out_bytes()
    }

    /// One record's shape: `[height, width, 3]` or `[3, height, width]`.
    pub fn item_shape(&self) -> [usize; 3] {
        let (h, w) = (self.spec.height as usize, self.spec.width as usize);
        match self.spec.layout {
            PixelLayout::Hwc => [h, w, 3],
            PixelLayout::Chw => [3, h, w],
        }
    }

    /// Refuses records that cannot hold encoded images: anything but ragged,
    /// one-dimensional `u8` records (`field` names them in the error).
    pub fn check_source(&self, records: &dyn Records, field: &str) -> Result<(), DecodeError> {
        let schema = records.schema();
        if schema.dtype == DType::U8 && matches!(schema.layout, Layout::Ragged { ndim: 1 }) {
            return Ok(());
        }
        Err(DecodeError::NotEncoded {
            field: field.to_owned(),
            records: records.describe(),
            dtype: schema.dtype,
            layout: schema.layout.clone(),
        })
    }
}

/// Why a batch of images could not be decoded.
#[derive(Debug)]
#[non_exhaustive]
pub enum DecodeError {
    /// The spec cannot produce an image.
    Spec(ImageProblem),
    /// An `on_error` name other than `raise`, `skip` or `substitute`.
    UnknownOnError(String),
    /// The field does not hold encoded images (ragged `u8` records of one dimension).
    NotEncoded {
        /// The field's (or stream's) name.
        field: String,
        /// Which records ([`Records::describe`]).
        records: String,
        /// Its dtype.
        dtype: DType,
        /// Its layout.
        layout: Layout,
    },
    /// The destination does not hold one output per record.
    OutLength {
        /// `records * out_bytes`.
        expected: usize,
        /// What was given.
        actual: usize,
    },
    /// A record's image could not be decoded (with [`OnError::Raise`]).
    Image {
        /// The failing field's position among the batch's image fields.
        field: usize,
        /// Which records ([`Records::describe`]); the error names the record.
        records: String,
        /// The record and what is wrong with it.
        source: ImageError,
    },
    /// With [`OnError::Substitute`], no record decoded in place of `record` after
    /// `tries` draws.
    NoSubstitute {
        /// The failing field's position among the batch's image fields.
        field: usize,
        /// Which records.
        records: String,
        /// The record that could not be decoded.
        record: u64,
        /// Substitutes tried.
        tries: u32,
        /// Why the last one failed.
        source: ImageError,
    },
    /// Reading the encoded records failed (or was stopped).
    Read(EngineError),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Spec(problem) => write!(f, "invalid image decode: {problem}"),
            Self::UnknownOnError(name) => write!(
                f,
                "unknown on_error {name:?} (expected \"raise\", \"skip\" or \"substitute\")"
            ),
            Self::NotEncoded {
                field,
                records,
                dtype,
                layout,
            } => write!(
                f,
                "field {field:?} ({records}) holds {} records laid out as {layout:?}; \
                 decoding images takes a field of encoded images (ragged uint8 records of \
                 one dimension, JPEG or PNG bytes)",
                dtype.name()
            ),
            Self::OutLength { expected, actual } => write!(
                f,
                "the pixel buffer holds {actual} bytes, the batch needs {expected}"
            ),
            Self::Image {
                records, source, ..
            } => {
                write!(f, "cannot decode the image of {records}, {source}")
            }
            Self::NoSubstitute {
                records,
                record,
                tries,
                source,
                ..
            } => write!(
                f,
                "cannot decode the image of {records}, record {record}, nor any of {tries} \
                 substitutes (the last: {source})"
            ),
            Self::Read(e) => write!(f, "reading the encoded images failed: {e}"),
        }
    }
}

impl std::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Spec(e) => Some(e),
            Self::Image { source, .. } | Self::NoSubstitute { source, .. } => Some(source),
            Self::Read(e) => Some(e),
            _ => None,
        }
    }
}

impl From<EngineError> for DecodeError {
    fn from(e: EngineError) -> Self {
        Self::Read(e)
    }
}
