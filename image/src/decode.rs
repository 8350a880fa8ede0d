//! One thread's decoder: bytes to RGB pixels, the crop, the resize, the flip.

use std::io::Cursor;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use zune_jpeg::zune_core::bytestream::ZCursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

use crate::random::Draws;
use crate::{Crop, ImageError, ImageProblem, ImageSpec, PixelLayout};

/// An encoded image's format, told by its signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    /// JPEG (`FF D8 FF`).
    Jpeg,
    /// PNG (`89 50 4E 47 0D 0A 1A 0A`).
    Png,
}

/// The format of `bytes`, or `None` when it is neither.
pub fn image_kind(bytes: &[u8]) -> Option<ImageKind> {
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(ImageKind::Jpeg)
    } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(ImageKind::Png)
    } else {
        None
    }
}

/// Decodes records of one spec; holds one thread's scratch, reused record to record.
pub struct ImageDecoder {
    spec: ImageSpec,
    /// The source image as 8-bit RGB.
    pixels: Vec<u8>,
    /// The HWC output before a CHW transpose.
    staging: Vec<u8>,
    resizer: Resizer,
}

impl std::fmt::Debug for ImageDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageDecoder")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl ImageDecoder {
    /// A decoder for `spec`, refused when the output has a zero side or the crop's
    /// bounds cannot be drawn from.
    pub fn new(spec: ImageSpec) -> Result<Self, ImageProblem> {
        if spec.height == 0 || spec.width == 0 {
            return Err(ImageProblem::EmptyOutput {
                height: spec.height,
                width: spec.width,
            });
        }
        if let Crop::RandomResized { scale, ratio } = spec.crop {
            let finite = [scale.0, scale.1, ratio.0, ratio.1]
                .iter()
                .all(|v| v.is_finite());
            if !(finite && scale.0 > 0.0 && scale.0 <= scale.1 && scale.1 <= 1.0) {
                return Err(ImageProblem::BadCrop {
                    why: "scale must satisfy 0 < lo <= hi <= 1",
                });
            }
            if !(ratio.0 > 0.0 && ratio.0 <= ratio.1) {
                return Err(ImageProblem::BadCrop {
                    why: "ratio must satisfy 0 < lo <= hi",
                });
            }
        }
        Ok(Self {
            spec,
            pixels: Vec::new(),
            staging: Vec::new(),
            resizer: Resizer::new(),
        })
    }

    /// The spec this decoder produces.
    pub fn spec(&self) -> &ImageSpec {
        &self.spec
    }

    /// Bytes of scratch held between records (the largest source image's pixels so
    /// far, and the CHW staging), for a caller's keep-or-release policy.
    pub fn scratch_bytes(&self) -> usize {
        self.pixels.capacity() + self.staging.capacity()
    }

    /// Decodes `bytes` (record `record`, in epoch `epoch`) into `out`, which must
    /// hold exactly [`ImageSpec::out_bytes`].
    pub fn decode_into(
        &mut self,
        bytes: &[u8],
        epoch: u64,
        record: u64,
        out: &mut [u8],
    ) -> Result<(), ImageError> {
        self.decode(bytes, epoch, record, out)
            .map_err(|problem| ImageError { record, problem })
    }

    fn decode(
        &mut self,
        bytes: &[u8],
        epoch: u64,
        record: u64,
        out: &mut [u8],
    ) -> Result<(), ImageProblem> {
        let spec = &self.spec;
        if out.len() != spec.out_bytes() {
            return Err(ImageProblem::OutLength {
                expected: spec.out_bytes(),
                actual: out.len(),
            });
        }
        let (width, height) = match image_kind(bytes) {
            Some(ImageKind::Jpeg) => decode_jpeg(bytes, spec.max_pixels, &mut self.pixels)?,
            Some(ImageKind::Png) => decode_png(bytes, spec.max_pixels, &mut self.pixels)?,
            None => {
                return Err(ImageProblem::UnknownFormat {
                    head: bytes[..bytes.len().min(8)].to_vec(),
                })
            }
        };
        // The flip is drawn first and always, so the crop is the same whether or
        // not flips are on, and the flip does not depend on the crop's draws.
        let mut draws = Draws::new(spec.seed, epoch, record);
        let flip = draws.unit() < 0.5 && spec.flip;
        let (left, top, crop_w, crop_h) = crop_region(spec, width, height, &mut draws);
        let (out_w, out_h) = (spec.width, spec.height);
        let src = ImageRef::new(width, height, &self.pixels, PixelType::U8x3)
            .map_err(|e| ImageProblem::Resize(e.to_string()))?;
        let options = ResizeOptions::new()
            .crop(left, top, crop_w, crop_h)
            .resize_alg(ResizeAlg::Convolution(FilterType::Bilinear));
        let hwc: &mut [u8] = match spec.layout {
            PixelLayout::Hwc => out,
            PixelLayout::Chw => {
                self.staging.resize(spec.out_bytes(), 0);
                &mut self.staging
            }
        };
        let mut dst = Image::from_slice_u8(out_w, out_h, hwc, PixelType::U8x3)
            .map_err(|e| ImageProblem::Resize(e.to_string()))?;
        self.resizer
            .resize(&src, &mut dst, &options)
            .map_err(|e| ImageProblem::Resize(e.to_string()))?;
        drop(dst);
        if flip {
            for row in hwc.chunks_exact_mut(out_w as usize * 3) {
                flip_row(row);
            }
        }
        if spec.layout == PixelLayout::Chw {
            let plane = out_w as usize * out_h as usize;
            for (i, px) in self.staging.chunks_exact(3).enumerate() {
                out[i] = px[0];
                out[plane + i] = px[1];
                out[2 * plane + i] = px[2];
            }
        }
        Ok(())
    }
}

/// Reverses a row of RGB pixels in place.
fn flip_row(row: &mut [u8]) {
    let n = row.len() / 3;
    for i in 0..n / 2 {
        let j = n - 1 - i;
        for c in 0..3 {
            row.swap(3 * i + c, 3 * j + c);
        }
    }
}

/// The source region `(left, top, width, height)` the spec's crop takes.
fn crop_region(
    spec: &ImageSpec,
    width: u32,
    height: u32,
    draws: &mut Draws,
) -> (f64, f64, f64, f64) {
    let (w, h) = (f64::from(width), f64::from(height));
    let centred = |cw: f64, ch: f64| ((w - cw) / 2.0, (h - ch) / 2.0, cw, ch);
    match spec.crop {
        Crop::Full => (0.0, 0.0, w, h),
        Crop::Center => {
            // The largest region with the output's aspect ratio.
            let target = f64::from(spec.width) / f64::from(spec.height);
            if w / h > target {
                centred(h * target, h)
            } else {
                centred(w, w / target)
            }
        }
        Crop::RandomResized { scale, ratio } => {
            let area = w * h;
            let (log_lo, log_hi) = (ratio.0.ln(), ratio.1.ln());
            for _ in 0..10 {
                let target_area = area * (scale.0 + (scale.1 - scale.0) * draws.unit());
                let aspect = (log_lo + (log_hi - log_lo) * draws.unit()).exp();
                let cw = (target_area * aspect).sqrt().round();
                let ch = (target_area / aspect).sqrt().round();
                if cw >= 1.0 && ch >= 1.0 && cw <= w && ch <= h {
                    let left = ((w - cw + 1.0) * draws.unit()).floor().min(w - cw);
                    let top = ((h - ch + 1.0) * draws.unit()).floor().min(h - ch);
                    return (left, top, cw, ch);
                }
            }
            // As torchvision: a centre crop of the whole image, its ratio clamped.
            let in_ratio = w / h;
            if in_ratio < ratio.0 {
                centred(w, (w / ratio.0).round().min(h))
            } else if in_ratio > ratio.1 {
                centred((h * ratio.1).round().min(w), h)
            } else {
                (0.0, 0.0, w, h)
            }
        }
    }
}

/// Refuses a header's size when it has a zero side or too many pixels.
fn check_size(width: u64, height: u64, max_pixels: u64) -> Result<(), ImageProblem> {
    if width == 0 || height == 0 {
        return Err(ImageProblem::EmptyImage { width, height });
    }
    let pixels = width.saturating_mul(height);
    if pixels > max_pixels {
        return Err(ImageProblem::TooLarge {
            width,
            height,
            pixels,
            max_pixels,
        });
    }
    Ok(())
}

/// A JPEG into `pixels` as RGB; returns its size.
fn decode_jpeg(
    bytes: &[u8],
    max_pixels: u64,
    pixels: &mut Vec<u8>,
) -> Result<(u32, u32), ImageProblem> {
    // zune's own size limits are lifted: `check_size` is the one limit.
    let options = DecoderOptions::default()
        .jpeg_set_out_colorspace(ColorSpace::RGB)
        .set_max_width(usize::from(u16::MAX))
        .set_max_height(usize::from(u16::MAX));
    let mut decoder = JpegDecoder::new_with_options(ZCursor::new(bytes), options);
    decoder.decode_headers().map_err(ImageProblem::Jpeg)?;
    let (width, height) = decoder
        .info()
        .map(|i| (u64::from(i.width), u64::from(i.height)))
        .unwrap_or((0, 0));
    check_size(width, height, max_pixels)?;
    let expected = (width * height * 3) as usize;
    if decoder.output_buffer_size() != Some(expected) {
        return Err(ImageProblem::ShortDecode {
            width,
            height,
            actual: decoder.output_buffer_size().unwrap_or(0),
        });
    }
    pixels.resize(expected, 0);
    decoder.decode_into(pixels).map_err(ImageProblem::Jpeg)?;
    Ok((width as u32, height as u32))
}

/// A PNG into `pixels` as 8-bit RGB (palette expanded, 16 bits stripped, alpha
/// dropped, grey repeated); returns its size.
fn decode_png(
    bytes: &[u8],
    max_pixels: u64,
    pixels: &mut Vec<u8>,
) -> Result<(u32, u32), ImageProblem> {
    let mut decoder = png::Decoder::new(Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    // The byte limit follows the pixel limit (at most 8 bytes a pixel, 16-bit RGBA).
    decoder.set_limits(png::Limits {
        bytes: usize::try_from(max_pixels.saturating_mul(8)).unwrap_or(usize::MAX),
    });
    let mut reader = decoder.read_info().map_err(ImageProblem::Png)?;
    let (width, height) = {
        let info = reader.info();
        (u64::from(info.width), u64::from(info.height))
    };
    check_size(width, height, max_pixels)?;
    let size = reader.output_buffer_size().ok_or(ImageProblem::TooLarge {
        width,
        height,
        pixels: width.saturating_mul(height),
        max_pixels,
    })?;
    let mut raw = vec![0u8; size];
    let frame = reader.next_frame(&mut raw).map_err(ImageProblem::Png)?;
    let n = (width * height) as usize;
    let channels = match frame.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        // `normalize_to_color8` expands palettes; this is never reached.
        png::ColorType::Indexed => 0,
    };
    if channels == 0 || raw.len() < n * channels {
        return Err(ImageProblem::ShortDecode {
            width,
            height,
            actual: raw.len(),
        });
    }
    pixels.clear();
    pixels.reserve(n * 3);
    match channels {
        3 => pixels.extend_from_slice(&raw[..n * 3]),
        4 => {
            for px in raw[..n * 4].chunks_exact(4) {
                pixels.extend_from_slice(&px[..3]);
            }
        }
        _ => {
            for px in raw[..n * channels].chunks_exact(channels) {
                pixels.extend_from_slice(&[px[0], px[0], px[0]]);
            }
        }
    }
    Ok((width as u32, height as u32))
}
