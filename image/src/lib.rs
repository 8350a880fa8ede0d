//! zring-image: encoded images (JPEG, PNG) decoded, cropped, flipped and resized
//! straight into a caller's batch buffer.
//!
//! An [`ImageDecoder`] holds one thread's scratch (the decoded pixels, the
//! resizer's buffers) and an [`ImageSpec`]: the output size, the crop, the flip,
//! the pixel layout and the largest image it accepts. [`ImageDecoder::decode_into`]
//! turns one record's bytes into exactly `height * width * 3` bytes of RGB.
//!
//! - **Formats**: JPEG through libjpeg-turbo (grayscale and CMYK converted to RGB;
//!   CMYK as Adobe's inverted CMYK, tested through the Python package's
//!   `test_image_decode.py`), PNG
//!   through the png crate (palette, grayscale, alpha and 16-bit normalised to
//!   8-bit RGB; alpha is dropped). The format is told by the bytes' signature.
//! - **Crops**: [`Crop::Full`] (the whole image), [`Crop::Center`] (the largest
//!   centred region with the output's aspect ratio) and [`Crop::RandomResized`]
//!   (torchvision's `RandomResizedCrop`: a random area fraction and log-uniform
//!   aspect ratio, ten tries, then a centre crop). The region is resized to the
//!   output with a bilinear filter.
//! - **Deterministic randomness**: every random choice is a pure function of
//!   `(seed, epoch, record)`, so a resumed run, any number of threads or workers and
//!   any rank produce the same pixels for the same record.
//! - **Only what the crop needs**: a JPEG's coefficients are all entropy-decoded
//!   (they are one sequential stream), but only the crop's region goes through the
//!   IDCT, upsampling and colour conversion, downscaled in the DCT domain (1/2, 1/4, 1/8) where the crop is at least that
//!   many times the output's size ([`ImageDecoder::jpeg_region`]).
//! - **Bombs**: the dimensions are read from the header first, and an image of more
//!   than [`ImageSpec::max_pixels`] pixels is refused before anything is allocated.
//!
//! Errors name the record ([`ImageError`]); the caller adds the store.

mod decode;
mod error;
mod random;
mod spec;

pub use decode::{image_kind, ImageDecoder, ImageKind};
pub use error::{ImageError, ImageProblem};
pub use spec::{Crop, ImageSpec, PixelLayout, DEFAULT_MAX_PIXELS};
/// The region and DCT-domain scale of a JPEG a decode reads
/// ([`ImageDecoder::jpeg_region`]).
pub use zring_platform::{JpegRegion, JpegScale};
