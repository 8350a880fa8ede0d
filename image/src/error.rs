//! Why a record's image could not be decoded.

use thiserror::Error;

/// A record whose image could not be decoded, and why.
#[derive(Debug, Error)]
#[error("record {record}: {problem}")]
pub struct ImageError {
    /// The record's index in its store.
    pub record: u64,
    /// What is wrong.
    #[source]
    pub problem: ImageProblem,
}

/// What is wrong with an image, or with the spec it is decoded to.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ImageProblem {
    /// The output size has a zero side.
    #[error("the output size {height}x{width} has a zero side")]
    EmptyOutput {
        /// Output height.
        height: u32,
        /// Output width.
        width: u32,
    },
    /// The crop's bounds cannot be drawn from.
    #[error("the crop's bounds are invalid: {why}")]
    BadCrop {
        /// Which bound, and why.
        why: &'static str,
    },
    /// The destination is not the spec's output size.
    #[error("the destination holds {actual} bytes, the output is {expected}")]
    OutLength {
        /// `height * width * 3`.
        expected: usize,
        /// What was given.
        actual: usize,
    },
    /// Neither a JPEG nor a PNG signature.
    #[error("not a JPEG or PNG image (the first bytes are {head:02x?})")]
    UnknownFormat {
        /// Up to 8 first bytes.
        head: Vec<u8>,
    },
    /// More pixels than the spec allows (a decompression bomb, or a mistake).
    #[error("{width}x{height} is {pixels} pixels, over the limit of {max_pixels}")]
    TooLarge {
        /// Source width.
        width: u64,
        /// Source height.
        height: u64,
        /// `width * height`.
        pixels: u64,
        /// The spec's limit.
        max_pixels: u64,
    },
    /// The header claims a zero side.
    #[error("the image claims a size of {width}x{height}")]
    EmptyImage {
        /// Source width.
        width: u64,
        /// Source height.
        height: u64,
    },
    /// The JPEG decoder (libjpeg-turbo) refused the bytes.
    #[error("bad JPEG: {0}")]
    Jpeg(#[from] zring_platform::JpegError),
    /// The PNG decoder refused the bytes.
    #[error("bad PNG: {0}")]
    Png(#[source] png::DecodingError),
    /// The decoder gave fewer pixels than its header promised.
    #[error("the decoder gave {actual} bytes for a {width}x{height} image")]
    ShortDecode {
        /// Source width.
        width: u64,
        /// Source height.
        height: u64,
        /// Bytes it gave.
        actual: usize,
    },
    /// The resizer refused (a bug: sizes are checked before).
    #[error("resizing failed: {0}")]
    Resize(String),
}
