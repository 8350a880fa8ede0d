//! W13 on all cores: JPEG decode + RandomResizedCrop 224 + flip through the loader
//! (an image stream made with `View::decoded`, decoded on the engine's pool), against
//! the decoder alone (libjpeg-turbo on one thread, decoding exactly the region and
//! scale the loader decodes of each record in that epoch) times the cores, measured
//! in the same run (alternating rounds, medians).
//!
//! ```text
//! cargo run --release -p zring-loader --example image_w13 -- [images] [batch]
//! ```
//!
//! Writes a ragged `u8` store of 500x375 JPEGs (quality 75, gradients, flat
//! objects and pixel noise: those of `zring-image`'s `w13` example) and a label
//! store to a temporary directory, reads them once to warm the page cache, then
//! alternates: the decoder alone over every image on one thread, and one epoch of
//! the loader (cyclic order, two loader workers) over the same images. The cores
//! are the engine pool's threads (its workers and the caller), `ZRING_THREADS`
//! or the machine's.

use std::io::Cursor;
use std::time::Instant;

use image::{DynamicImage, ImageFormat, RgbImage};
use zring_engine::{DType, ReadOptions, Schema, Store, WriteOptions, Writer};
use zring_image::{Crop, ImageDecoder, ImageSpec, JpegRegion, JpegScale};
use zring_loader::{ImageDecode, Loader, LoaderOptions, Lookahead, View};
use zring_platform::Pool;
use zring_sampler::{EpochPlan, Mode};

const ROUNDS: usize = 5;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let n = args.next().transpose()?.unwrap_or(400);
    let batch = args.next().transpose()?.unwrap_or(64);
    let images: Vec<Vec<u8>> = (0..n as u32).map(photo).collect::<Result<_, _>>()?;
    let mean_kib = images.iter().map(Vec::len).sum::<usize>() as f64 / n as f64 / 1024.0;
    let cores = Pool::global().workers() + 1;

    let dir = tempfile::tempdir()?;
    let img = write_images(&dir.path().join("img.zr"), &images)?;
    let labels = write_labels(&dir.path().join("labels.zr"), n as u32)?;
    let all: Vec<u64> = (0..n as u64).collect();
    img.gather_ragged(&all)?; // warm the page cache
    println!(
        "W13: {n} JPEGs of 500x375, mean {mean_kib:.0} KiB; loader batch {batch}; {cores} cores"
    );

    let spec = ImageSpec {
        crop: Crop::random_resized(),
        flip: true,
        seed: 1,
        ..ImageSpec::new(224, 224)
    };
    let decode = ImageDecode::new(spec.clone())?;
    let mut planner = ImageDecoder::new(spec)?;
    let (mut ones, mut alls) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        // What the loader decodes of each record in this round's epoch.
        let plans = images
            .iter()
            .enumerate()
            .map(|(i, bytes)| planner.jpeg_region(bytes, round as u64, i as u64))
            .collect::<Result<Vec<_>, _>>()?;
        ones.push(decoder_alone(&images, &plans)?);
        alls.push(loader_epoch(&img, &labels, &decode, batch, round as u64)?);
    }
    let (one, all) = (median(&mut ones), median(&mut alls));
    println!("libjpeg-turbo alone on the loader's regions, 1 thread: {one:>8.0} images/s");
    println!(
        "loader: decode + crop 224 + flip, {cores} cores:       {all:>8.0} images/s = {:.2}x the decoder x {cores}",
        all / (one * cores as f64)
    );
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The limit: libjpeg-turbo alone, one thread, decoding each image's planned region
/// at its planned scale (images/s).
fn decoder_alone(
    images: &[Vec<u8>],
    plans: &[(JpegScale, JpegRegion)],
) -> Result<f64, Box<dyn std::error::Error>> {
    let mut decoder = zring_platform::JpegDecoder::new()?;
    let mut pixels = Vec::new();
    let start = Instant::now();
    for (bytes, &plan) in images.iter().zip(plans) {
        decoder.decode(
            bytes,
            |_| Ok::<_, zring_platform::JpegError>(plan),
            &mut pixels,
        )?;
        std::hint::black_box(&pixels);
    }
    Ok(images.len() as f64 / start.elapsed().as_secs_f64())
}

/// Epoch `epoch` of the loader over the images and labels (images/s).
fn loader_epoch(
    img: &Store,
    labels: &Store,
    decode: &ImageDecode,
    batch: usize,
    epoch: u64,
) -> Result<f64, Box<dyn std::error::Error>> {
    let plan = EpochPlan::new(img.len(), batch, Mode::Cyclic, 7)?.with_epochs(Some(epoch + 1));
    let mut plan = plan;
    plan.seek(epoch * plan.steps_per_epoch());
    let streams = [
        ("image", vec![View::from(img).decoded(decode.clone())]),
        ("label", vec![View::from(labels)]),
    ];
    let options = LoaderOptions {
        lookahead: Lookahead::Fixed,
        ..LoaderOptions::new(2, 2)
    };
    let start = Instant::now();
    let mut images = 0usize;
    for step in Loader::new(streams, plan, options)? {
        let step = step?;
        images += step.get("label", 0).map_or(0, |t| t.records());
        std::hint::black_box(&step);
    }
    Ok(images as f64 / start.elapsed().as_secs_f64())
}

fn write_images(
    path: &std::path::Path,
    images: &[Vec<u8>],
) -> Result<Store, Box<dyn std::error::Error>> {
    let mut w = Writer::create(path, Schema::ragged(DType::U8, 1), WriteOptions::default())?;
    let mut cu = vec![0u64];
    let mut lens = Vec::with_capacity(images.len());
    for bytes in images {
        cu.push(cu[cu.len() - 1] + bytes.len() as u64);
        lens.push(u32::try_from(bytes.len())?);
    }
    w.append_ragged(&images.concat(), &cu, &lens)?;
    w.close()?;
    Ok(Store::open(path, ReadOptions::default())?)
}

fn write_labels(path: &std::path::Path, n: u32) -> Result<Store, Box<dyn std::error::Error>> {
    let mut w = Writer::create(
        path,
        Schema::dense(DType::U32, &[]),
        WriteOptions::default(),
    )?;
    w.append_dense(&(0..n).flat_map(u32::to_le_bytes).collect::<Vec<u8>>())?;
    w.close()?;
    Ok(Store::open(path, ReadOptions::default())?)
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
