//! The JPEG decoder candidates on W13-like images, one thread, same run:
//! libjpeg-turbo (what zring-image uses, through zring-platform) and zune-jpeg (the
//! fastest pure-Rust decoder), each decoding whole images to RGB.
//!
//! ```text
//! cargo run --release -p zring-image --example jpeg_decoders --features compare-zune-jpeg
//! ```

use std::io::Cursor;
use std::time::Instant;

use image::{DynamicImage, ImageFormat, RgbImage};
use zune_jpeg::zune_core::bytestream::ZCursor;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let images: Vec<Vec<u8>> = (0..400).map(photo).collect::<Result<_, _>>()?;
    let mut turbo = zring_platform::JpegDecoder::new()?;
    let mut pixels = Vec::new();
    let whole = |h: &zring_platform::JpegHeader| {
        let region = zring_platform::JpegRegion {
            x: 0,
            y: 0,
            width: h.width,
            height: h.height,
        };
        Ok::<_, zring_platform::JpegError>((1, region))
    };
    let (mut zune, mut libjpeg) = (Vec::new(), Vec::new());
    // Alternating rounds, medians.
    for _ in 0..5 {
        let start = Instant::now();
        for bytes in &images {
            let options = DecoderOptions::default().jpeg_set_out_colorspace(ColorSpace::RGB);
            let mut d =
                zune_jpeg::JpegDecoder::new_with_options(ZCursor::new(bytes.as_slice()), options);
            std::hint::black_box(d.decode()?);
        }
        zune.push(images.len() as f64 / start.elapsed().as_secs_f64());
        let start = Instant::now();
        for bytes in &images {
            turbo.decode(bytes, whole, &mut pixels)?;
        }
        libjpeg.push(images.len() as f64 / start.elapsed().as_secs_f64());
    }
    zune.sort_by(f64::total_cmp);
    libjpeg.sort_by(f64::total_cmp);
    let (z, t) = (zune[2], libjpeg[2]);
    println!("zune-jpeg:     {z:>6.0} images/s");
    println!("libjpeg-turbo: {t:>6.0} images/s = {:.2}x zune-jpeg", t / z);
    Ok(())
}

/// W13 photograph `i` (zring-workloads' generator) as a JPEG.
fn photo(i: u32) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let pixels = zring_workloads::photo_pixels(i);
    let (w, h) = (zring_workloads::PHOTO_WIDTH, zring_workloads::PHOTO_HEIGHT);
    let img = RgbImage::from_raw(w, h, pixels).ok_or("a photograph's pixels are w x h x 3")?;
    let mut out = Cursor::new(Vec::new());
    DynamicImage::ImageRgb8(img).write_to(&mut out, ImageFormat::Jpeg)?;
    Ok(out.into_inner())
}
