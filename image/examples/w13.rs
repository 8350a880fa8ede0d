//! W13: JPEG decode + RandomResizedCrop 224 + flip on all cores, against the
//! decoder's own single-thread speed times the cores, in the same run. The limit is
//! libjpeg-turbo alone, one thread, decoding exactly what zring decodes for each
//! record (the crop's region, at the same DCT scale), so the ratio is what zring's
//! threads, crop, resize and flip cost; the whole-image decode is shown beside it.
//!
//! ```text
//! cargo run --release -p zring-image --example w13 -- [images] [threads]
//! ```
//!
//! The images are 500x375 JPEGs (quality 90) of smooth gradients, edges and
//! noise, about the size of an ImageNet photograph's JPEG.

use std::io::Cursor;
use std::time::Instant;

use image::{DynamicImage, ImageFormat, RgbImage};
use zring_image::{Crop, ImageDecoder, ImageSpec, JpegRegion, JpegScale};
use zring_platform::{JpegDecoder, JpegError, JpegHeader};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let n = args.next().transpose()?.unwrap_or(400);
    let threads = args
        .next()
        .transpose()?
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |p| p.get()));
    let images: Vec<Vec<u8>> = (0..n as u32).map(photo).collect::<Result<_, _>>()?;
    let mean_kib = images.iter().map(Vec::len).sum::<usize>() as f64 / n as f64 / 1024.0;
    println!("W13: {n} JPEGs of 500x375, mean {mean_kib:.0} KiB; {threads} threads");

    let spec = ImageSpec {
        crop: Crop::random_resized(),
        flip: true,
        ..ImageSpec::new(224, 224)
    };
    // What zring decodes of each record (epoch 0, record i).
    let mut planner = ImageDecoder::new(spec.clone())?;
    let plans = images
        .iter()
        .enumerate()
        .map(|(i, bytes)| planner.jpeg_region(bytes, 0, i as u64))
        .collect::<Result<Vec<_>, _>>()?;
    // Alternating rounds, medians: other work on the machine hits both sides.
    let (mut wholes, mut ones, mut alls) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        wholes.push(decoder_alone(&images, None)?);
        ones.push(decoder_alone(&images, Some(&plans))?);
        alls.push(decode_all(&images, &spec, threads)?);
    }
    let (whole, one, all) = (median(&mut wholes), median(&mut ones), median(&mut alls));
    println!("libjpeg-turbo alone, whole images, 1 thread:   {whole:>8.0} images/s");
    println!("libjpeg-turbo alone, zring's regions, 1 thread: {one:>8.0} images/s (the limit)");
    println!(
        "decode + crop 224 + flip, {threads} threads:     {all:>8.0} images/s = {:.2}x the decoder x {threads}",
        all / (one * threads as f64)
    );
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// libjpeg-turbo alone, one thread (images/s): each image whole, or the region and
/// scale zring decodes of it.
fn decoder_alone(
    images: &[Vec<u8>],
    plans: Option<&[(JpegScale, JpegRegion)]>,
) -> Result<f64, Box<dyn std::error::Error>> {
    let mut decoder = JpegDecoder::new()?;
    let mut pixels = Vec::new();
    let start = Instant::now();
    for (i, bytes) in images.iter().enumerate() {
        let plan = |h: &JpegHeader| {
            Ok::<_, JpegError>(plans.map_or(
                (
                    1,
                    JpegRegion {
                        x: 0,
                        y: 0,
                        width: h.width,
                        height: h.height,
                    },
                ),
                |p| p[i],
            ))
        };
        decoder.decode(bytes, plan, &mut pixels)?;
        std::hint::black_box(&pixels);
    }
    Ok(images.len() as f64 / start.elapsed().as_secs_f64())
}

/// zring's decode, crop and flip on `threads` threads (images/s).
fn decode_all(
    images: &[Vec<u8>],
    spec: &ImageSpec,
    threads: usize,
) -> Result<f64, Box<dyn std::error::Error>> {
    let start = Instant::now();
    std::thread::scope(|s| -> Result<(), zring_image::ImageError> {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let spec = spec.clone();
                s.spawn(move || -> Result<(), zring_image::ImageError> {
                    let mut decoder = ImageDecoder::new(spec)
                        .map_err(|problem| zring_image::ImageError { record: 0, problem })?;
                    let mut out = vec![0u8; decoder.spec().out_bytes()];
                    for (i, bytes) in images.iter().enumerate().skip(t).step_by(threads) {
                        decoder.decode_into(bytes, 0, i as u64, &mut out)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join().expect("worker")?;
        }
        Ok(())
    })?;
    Ok(images.len() as f64 / start.elapsed().as_secs_f64())
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
