//! docs/images.md's "From Rust" example, compiled and run: `example` holds its lines
//! exactly as the document shows them (a test checks the two are the same).

use std::io::Cursor;

use image::{DynamicImage, ImageFormat, RgbImage};

/// The document's example, verbatim between the signature and `Ok(pixels)`.
fn example(jpeg: Vec<u8>) -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    use zring_image::{Crop, ImageDecoder, ImageSpec};

    let spec = ImageSpec {
        crop: Crop::random_resized(),
        flip: true,
        seed: 42,
        ..ImageSpec::new(224, 224)
    };
    let mut decoder = ImageDecoder::new(spec)?;
    let mut pixels = vec![0u8; decoder.spec().out_bytes()];
    decoder.decode_into(&jpeg, 0, 7, &mut pixels)?; // epoch 0, record 7
    assert_eq!(pixels.len(), 224 * 224 * 3);
    Ok(pixels)
}

#[test]
fn the_example_runs() {
    let img = RgbImage::from_fn(320, 240, |x, y| image::Rgb([x as u8, y as u8, 128]));
    let mut jpeg = Cursor::new(Vec::new());
    DynamicImage::ImageRgb8(img)
        .write_to(&mut jpeg, ImageFormat::Jpeg)
        .expect("encode");
    let pixels = example(jpeg.into_inner()).expect("example");
    assert!(pixels.iter().any(|&p| p != 0));
}

fn lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_example_is_the_one_in_docs_images_md() {
    let doc = include_str!("../../docs/images.md");
    let (_, section) = doc.split_once("## From Rust").expect("section");
    let (_, block) = section.split_once("```rust\n").expect("block");
    let (block, _) = block.split_once("```").expect("block end");
    let this = include_str!("doc.rs");
    let (_, body) = this
        .split_once("Box<dyn std::error::Error>> {\n")
        .expect("body");
    let (body, _) = body.split_once("    Ok(pixels)\n").expect("body end");
    assert_eq!(lines(body), lines(block));
}
