//! DCT-domain downscaling measured: zring's path to a 224x224 centre crop
//! (libjpeg-turbo decoding the crop's region at the largest 1/2^k scale that keeps
//! it at least 224 wide, then the resize) against `jpeg-decoder` decoding the whole
//! image at full and reduced size (its `Decoder::scale`: a smaller IDCT), then the
//! same crop and resize, on one thread, three rounds. docs/images.md has the figures.
//!
//! ```text
//! cargo run --release -p zring-image --example dct_scaling --features compare-jpeg-decoder -- a.jpg b.jpg
//! ```

use std::time::Instant;

use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use zring_image::{Crop, ImageDecoder, ImageSpec};

const SIDE: u32 = 224;
const REPEATS: u64 = 30;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        return Err("give one or more JPEG files, much larger than 224x224".into());
    }
    for path in &paths {
        let bytes = std::fs::read(path)?;
        let spec = ImageSpec {
            crop: Crop::Center,
            ..ImageSpec::new(SIDE, SIDE)
        };
        let mut zring = ImageDecoder::new(spec)?;
        let mut out = vec![0u8; zring.spec().out_bytes()];
        let mut resizer = Resizer::new();
        println!("{path} ({} KiB)", bytes.len() / 1024);
        for round in 0..3 {
            let start = Instant::now();
            for r in 0..REPEATS {
                zring.decode_into(&bytes, 0, r, &mut out)?;
            }
            let full = start.elapsed().as_secs_f64() / REPEATS as f64;
            let mut line = format!("  round {round}: zring's path {:.2} ms", full * 1e3);
            // Asked for a size no smaller than this, jpeg-decoder picks the
            // smallest of 1/1, 1/2, 1/4, 1/8 that covers it.
            for divisor in [1u16, 2, 4] {
                let start = Instant::now();
                let mut dims = (0, 0);
                for _ in 0..REPEATS {
                    dims = scaled(&bytes, divisor, &mut resizer, &mut out)?;
                }
                let t = start.elapsed().as_secs_f64() / REPEATS as f64;
                line += &format!(
                    " | jpeg-decoder at {}x{} {:.2} ms ({:.2}x)",
                    dims.0,
                    dims.1,
                    t * 1e3,
                    full / t
                );
            }
            println!("{line}");
        }
    }
    Ok(())
}

/// Decodes `bytes` at about 1/`divisor` of its size with jpeg-decoder, then takes
/// the centre crop into `out` as zring's path does; answers the decoded size.
fn scaled(
    bytes: &[u8],
    divisor: u16,
    resizer: &mut Resizer,
    out: &mut [u8],
) -> Result<(u16, u16), Box<dyn std::error::Error>> {
    let mut decoder = jpeg_decoder::Decoder::new(bytes);
    decoder.read_info()?;
    let info = decoder.info().ok_or("no JPEG header")?;
    let (w, h) = decoder.scale(info.width / divisor, info.height / divisor)?;
    let pixels = decoder.decode()?;
    if decoder.info().map(|i| i.pixel_format) != Some(jpeg_decoder::PixelFormat::RGB24) {
        return Err("not an RGB JPEG".into());
    }
    let src = ImageRef::new(u32::from(w), u32::from(h), &pixels, PixelType::U8x3)?;
    let side = f64::from(w.min(h));
    let options = ResizeOptions::new()
        .crop(
            (f64::from(w) - side) / 2.0,
            (f64::from(h) - side) / 2.0,
            side,
            side,
        )
        .resize_alg(ResizeAlg::Convolution(FilterType::Bilinear));
    let mut dst = Image::from_slice_u8(SIDE, SIDE, out, PixelType::U8x3)?;
    resizer.resize(&src, &mut dst, &options)?;
    Ok((w, h))
}
