//! One thread's decoder: bytes to RGB pixels, the crop, the resize, the flip.

use std::io::Cursor;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use zring_platform::{JpegDecoder, JpegHeader, JpegRegion, JpegScale};

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
    /// libjpeg-turbo's decompressor.
    jpeg: JpegDecoder,
    /// The source image (or the region of it a crop needs) as 8-bit RGB.
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
            jpeg: JpegDecoder::new()?,
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

    /// What decoding JPEG `bytes` as record `record` in `epoch` reads: the DCT-domain
    /// scale (1, 2, 4 or 8) and the region of the image at that scale. The
    /// benchmarks' like-for-like baseline decodes exactly this with libjpeg-turbo
    /// alone.
    pub fn jpeg_region(
        &mut self,
        bytes: &[u8],
        epoch: u64,
        record: u64,
    ) -> Result<(JpegScale, JpegRegion), ImageError> {
        let spec = &self.spec;
        let (mut draws, _) = draws_and_flip(spec, epoch, record);
        self.jpeg
            .header(bytes)
            .map_err(ImageProblem::from)
            .and_then(|header| plan_jpeg(spec, &header, &mut draws))
            .map(|(_, plan)| plan)
            .map_err(|problem| ImageError { record, problem })
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
        let (mut draws, flip) = draws_and_flip(spec, epoch, record);
        // The source's pixels in `self.pixels` (`width` x `height`) and the crop's
        // rectangle in them.
        let (width, height, (left, top, crop_w, crop_h)) = match image_kind(bytes) {
            Some(ImageKind::Jpeg) => {
                let mut crop = (0.0, 0.0, 0.0, 0.0);
                let plan = |header: &JpegHeader| {
                    let (drawn, plan) = plan_jpeg(spec, header, &mut draws)?;
                    crop = drawn;
                    Ok::<_, ImageProblem>(plan)
                };
                let (header, scale, region) = self.jpeg.decode(bytes, plan, &mut self.pixels)?;
                if header.cmyk {
                    cmyk_to_rgb(&mut self.pixels);
                }
                // The crop in the decoded region's coordinates.
                let s = f64::from(scale);
                let (left, top, cw, ch) = crop;
                let rect = (
                    left / s - f64::from(region.x),
                    top / s - f64::from(region.y),
                    (cw / s).min(f64::from(region.width)),
                    (ch / s).min(f64::from(region.height)),
                );
                (region.width, region.height, rect)
            }
            Some(ImageKind::Png) => {
                let (w, h) = decode_png(bytes, spec.max_pixels, &mut self.pixels)?;
                (w, h, crop_region(spec, w, h, &mut draws))
            }
            None => {
                return Err(ImageProblem::UnknownFormat {
                    head: bytes[..bytes.len().min(8)].to_vec(),
                })
            }
        };
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
            to_planes(&self.staging, out);
        }
        Ok(())
    }
}

/// Interleaved RGB pixels into three planes (CHW), in blocks of 16 pixels over
/// zipped slices: no bounds checks, and fixed-size blocks the compiler turns into
/// shuffles (the pixel-by-pixel, bounds-checked loop took a tenth of a decode).
fn to_planes(hwc: &[u8], out: &mut [u8]) {
    const BLOCK: usize = 16;
    let plane = hwc.len() / 3;
    let (r, rest) = out.split_at_mut(plane);
    let (g, b) = rest.split_at_mut(plane);
    let blocks = hwc
        .chunks_exact(3 * BLOCK)
        .zip(r.chunks_exact_mut(BLOCK))
        .zip(g.chunks_exact_mut(BLOCK))
        .zip(b.chunks_exact_mut(BLOCK));
    for (((px, r), g), b) in blocks {
        for i in 0..BLOCK {
            (r[i], g[i], b[i]) = (px[3 * i], px[3 * i + 1], px[3 * i + 2]);
        }
    }
    let done = plane / BLOCK * BLOCK;
    let rest = hwc[3 * done..]
        .chunks_exact(3)
        .zip(&mut r[done..])
        .zip(&mut g[done..])
        .zip(&mut b[done..]);
    for (((px, r), g), b) in rest {
        (*r, *g, *b) = (px[0], px[1], px[2]);
    }
}

/// Reverses a row of RGB pixels in place: the bytes reversed (a vectorised
/// `reverse`), then each pixel's bytes put back in order. Swapping pixel by pixel
/// took a tenth of a 224x224 image's decode.
fn flip_row(row: &mut [u8]) {
    row.reverse();
    for px in row.chunks_exact_mut(3) {
        px.swap(0, 2);
    }
}

/// A rectangle `(left, top, width, height)` in pixels, fractional where a crop is.
type Rect = (f64, f64, f64, f64);

/// Record `record`'s draws in `epoch`, and whether it is flipped. The flip is drawn
/// first and always, so the crop is the same whether or not flips are on, and the
/// flip does not depend on the crop's draws.
fn draws_and_flip(spec: &ImageSpec, epoch: u64, record: u64) -> (Draws, bool) {
    let mut draws = Draws::new(spec.seed, epoch, record);
    let flip = draws.unit() < 0.5 && spec.flip;
    (draws, flip)
}

/// A JPEG's crop, drawn from `draws` (in full-size pixels), and the scale and region
/// decoded for it ([`jpeg_plan`]); an image over the spec's pixel limit is refused.
/// The one plan both a decode and [`ImageDecoder::jpeg_region`] follow.
fn plan_jpeg(
    spec: &ImageSpec,
    header: &JpegHeader,
    draws: &mut Draws,
) -> Result<(Rect, (JpegScale, JpegRegion)), ImageProblem> {
    let (w, h) = (u64::from(header.width), u64::from(header.height));
    check_size(w, h, spec.max_pixels)?;
    let crop = crop_region(spec, header.width, header.height, draws);
    Ok((crop, jpeg_plan(spec, header, crop)))
}

/// The source region `(left, top, width, height)` the spec's crop takes.
fn crop_region(spec: &ImageSpec, width: u32, height: u32, draws: &mut Draws) -> Rect {
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

/// The scale and the region of the scaled image a JPEG is decoded at for `crop`
/// (in full-size pixels): the largest DCT-domain downscale (1/2, 1/4, 1/8) that
/// keeps the crop at least the output's size, and the crop's rectangle there, with
/// a margin for the resize filter's support, its left edge moved to an iMCU
/// boundary as libjpeg-turbo requires.
fn jpeg_plan(
    spec: &ImageSpec,
    header: &JpegHeader,
    (left, top, crop_w, crop_h): Rect,
) -> (JpegScale, JpegRegion) {
    let whole = JpegRegion {
        x: 0,
        y: 0,
        width: header.width,
        height: header.height,
    };
    let Some(mcu_width) = header.mcu_width else {
        return (1, whole);
    };
    let (out_w, out_h) = (f64::from(spec.width), f64::from(spec.height));
    let scale: JpegScale = [8, 4, 2]
        .into_iter()
        .find(|&s| crop_w / f64::from(s) >= out_w && crop_h / f64::from(s) >= out_h)
        .unwrap_or(1);
    let s = f64::from(scale);
    let (scaled_w, scaled_h) = (header.width.div_ceil(scale), header.height.div_ceil(scale));
    let margin = 2.0 + (crop_w / s / out_w).max(crop_h / s / out_h).ceil();
    // Float to integer casts saturate; every bound is clamped to the scaled image.
    let lo = |v: f64| ((v / s - margin).floor().max(0.0)) as u32;
    let hi = |v: f64, side: u32| ((v / s + margin).ceil() as u32).min(side);
    let step = mcu_width.div_ceil(scale);
    let x = lo(left) / step * step;
    let y = lo(top).min(scaled_h.saturating_sub(1));
    let x_end = hi(left + crop_w, scaled_w).max(x + 1);
    let y_end = hi(top + crop_h, scaled_h).max(y + 1);
    if x_end > scaled_w || y_end > scaled_h {
        return (1, whole);
    }
    let region = JpegRegion {
        x,
        y,
        width: x_end - x,
        height: y_end - y,
    };
    (scale, region)
}

/// Adobe's inverted CMYK (what libjpeg-turbo returns for CMYK and YCCK JPEGs, as
/// Photoshop and Pillow write them) to RGB, in place: 4 bytes a pixel become 3.
fn cmyk_to_rgb(pixels: &mut Vec<u8>) {
    let n = pixels.len() / 4;
    for i in 0..n {
        let k = u32::from(pixels[4 * i + 3]);
        for c in 0..3 {
            // `c * k / 255` rounded; at most 255.
            pixels[3 * i + c] = ((u32::from(pixels[4 * i + c]) * k + 127) / 255) as u8;
        }
    }
    pixels.truncate(3 * n);
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
