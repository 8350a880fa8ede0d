//! Decoding real encoded images: pixels against the source within the codec's
//! tolerance, every colour type, crops and flips deterministic per (seed, epoch,
//! record), the channels-first layout, and damaged or oversized images refused.

use std::io::Cursor;

use image::{DynamicImage, ImageFormat, RgbImage};
use zring_image::{Crop, ImageDecoder, ImageProblem, ImageSpec, PixelLayout};

/// A smooth test picture with some edges: `w x h` RGB.
fn picture(w: u32, h: u32) -> RgbImage {
    RgbImage::from_fn(w, h, |x, y| {
        let block = if (x / 16 + y / 16) % 2 == 0 { 40 } else { 0 };
        image::Rgb([
            (x * 255 / w) as u8,
            (y * 255 / h) as u8,
            (((x + y) * 127 / (w + h)) as u8).saturating_add(block),
        ])
    })
}

fn encode(img: &DynamicImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format).expect("encode");
    out.into_inner()
}

fn decode(spec: ImageSpec, bytes: &[u8], epoch: u64, record: u64) -> Vec<u8> {
    let mut out = vec![0u8; spec.out_bytes()];
    ImageDecoder::new(spec)
        .expect("spec")
        .decode_into(bytes, epoch, record, &mut out)
        .expect("decode");
    out
}

fn full(w: u32, h: u32) -> ImageSpec {
    ImageSpec {
        crop: Crop::Full,
        ..ImageSpec::new(h, w)
    }
}

fn mean_abs_diff(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x.abs_diff(y)))
        .sum::<f64>()
        / a.len() as f64
}

#[test]
fn png_decodes_exactly_and_jpeg_within_its_tolerance() {
    let src = picture(96, 64);
    let png = encode(&DynamicImage::ImageRgb8(src.clone()), ImageFormat::Png);
    assert_eq!(decode(full(96, 64), &png, 0, 0), src.as_raw().as_slice());
    let jpeg = encode(&DynamicImage::ImageRgb8(src.clone()), ImageFormat::Jpeg);
    let got = decode(full(96, 64), &jpeg, 0, 0);
    let err = mean_abs_diff(&got, src.as_raw());
    assert!(err < 4.0, "JPEG mean error {err}");
    // The image crate's own decode of the same JPEG, as a second reference.
    let reference = image::load_from_memory(&jpeg).expect("reference").to_rgb8();
    assert!(mean_abs_diff(&got, reference.as_raw()) < 2.0);
}

#[test]
fn every_colour_type_becomes_rgb() {
    let src = picture(40, 30);
    let rgb = DynamicImage::ImageRgb8(src.clone());
    let grey = DynamicImage::ImageLuma8(rgb.to_luma8());
    let cases = [
        ("png grey", encode(&grey, ImageFormat::Png), grey.to_rgb8()),
        (
            "png grey+alpha",
            encode(
                &DynamicImage::ImageLumaA8(rgb.to_luma_alpha8()),
                ImageFormat::Png,
            ),
            grey.to_rgb8(),
        ),
        (
            "png rgba",
            encode(&DynamicImage::ImageRgba8(rgb.to_rgba8()), ImageFormat::Png),
            src.clone(),
        ),
        (
            "png 16-bit",
            encode(&DynamicImage::ImageRgb16(rgb.to_rgb16()), ImageFormat::Png),
            src.clone(),
        ),
        (
            "jpeg grey",
            encode(&grey, ImageFormat::Jpeg),
            grey.to_rgb8(),
        ),
    ];
    for (name, bytes, want) in cases {
        let got = decode(full(40, 30), &bytes, 0, 0);
        let err = mean_abs_diff(&got, want.as_raw());
        assert!(err < 4.0, "{name}: mean error {err}");
    }
}

#[test]
fn center_crop_takes_the_middle_and_resizes() {
    // 200x100, left half black, right half white; a 50x50 centre crop spans
    // x in [50, 150): half black, half white.
    let src = RgbImage::from_fn(200, 100, |x, _| {
        image::Rgb([if x < 100 { 0 } else { 255 }; 3])
    });
    let png = encode(&DynamicImage::ImageRgb8(src), ImageFormat::Png);
    let out = decode(ImageSpec::new(50, 50), &png, 0, 0);
    let row = &out[25 * 50 * 3..26 * 50 * 3];
    assert_eq!(&row[..3], &[0, 0, 0]);
    assert_eq!(&row[row.len() - 3..], &[255, 255, 255]);
    let white = row.chunks_exact(3).filter(|p| p[0] > 127).count();
    assert!((24..=26).contains(&white), "{white} white pixels of 50");
}

#[test]
fn random_crops_and_flips_are_a_function_of_seed_epoch_and_record() {
    let jpeg = encode(
        &DynamicImage::ImageRgb8(picture(160, 120)),
        ImageFormat::Jpeg,
    );
    let spec = ImageSpec {
        crop: Crop::random_resized(),
        flip: true,
        seed: 7,
        ..ImageSpec::new(32, 32)
    };
    // Two decoders (two threads' worth of scratch) agree, in any order.
    let a: Vec<Vec<u8>> = (0..20).map(|r| decode(spec.clone(), &jpeg, 3, r)).collect();
    let b: Vec<Vec<u8>> = (0..20)
        .rev()
        .map(|r| decode(spec.clone(), &jpeg, 3, r))
        .collect();
    assert_eq!(a, b.into_iter().rev().collect::<Vec<_>>());
    // Records, epochs and seeds each change the draw.
    assert_ne!(a[0], a[1]);
    assert_ne!(a[0], decode(spec.clone(), &jpeg, 4, 0));
    let other_seed = ImageSpec {
        seed: 8,
        ..spec.clone()
    };
    assert_ne!(a[0], decode(other_seed, &jpeg, 3, 0));
    // With flips off the crop is the same: each output is the unflipped one or
    // its mirror, and about half are mirrored.
    let no_flip = ImageSpec {
        flip: false,
        ..spec
    };
    let mut flipped = 0;
    for (r, out) in a.iter().enumerate() {
        let plain = decode(no_flip.clone(), &jpeg, 3, r as u64);
        if *out != plain {
            let mirror: Vec<u8> = plain
                .chunks_exact(32 * 3)
                .flat_map(|row| {
                    row.chunks_exact(3)
                        .rev()
                        .flatten()
                        .copied()
                        .collect::<Vec<_>>()
                })
                .collect();
            assert_eq!(*out, mirror, "record {r}");
            flipped += 1;
        }
    }
    assert!((4..=16).contains(&flipped), "{flipped} of 20 flipped");
}

#[test]
fn channels_first_is_the_transpose_of_channels_last() {
    let png = encode(&DynamicImage::ImageRgb8(picture(64, 48)), ImageFormat::Png);
    let jpeg = encode(&DynamicImage::ImageRgb8(picture(64, 48)), ImageFormat::Jpeg);
    // Flipped and not (the flip is fused into the transpose), both formats.
    let mut flipped = 0;
    for (bytes, flip, record) in
        (0..8).flat_map(|r| [(&png, false, r), (&png, true, r), (&jpeg, true, r)])
    {
        let spec = ImageSpec {
            crop: Crop::random_resized(),
            flip,
            seed: 5,
            ..ImageSpec::new(24, 31)
        };
        let hwc = decode(spec.clone(), bytes, 0, record);
        let unflipped = ImageSpec {
            flip: false,
            ..spec.clone()
        };
        flipped += usize::from(hwc != decode(unflipped, bytes, 0, record));
        let chw_spec = ImageSpec {
            layout: PixelLayout::Chw,
            ..spec
        };
        let chw = decode(chw_spec, bytes, 0, record);
        // 744 pixels: 46 blocks of 16 and a remainder of 8.
        let plane = 24 * 31;
        for i in 0..plane {
            for c in 0..3 {
                assert_eq!(chw[c * plane + i], hwc[3 * i + c], "record {record}");
            }
        }
    }
    assert!(flipped >= 4, "{flipped} of 16 flipped");
}

fn problem(spec: ImageSpec, bytes: &[u8]) -> ImageProblem {
    let mut out = vec![0u8; spec.out_bytes()];
    let err = ImageDecoder::new(spec)
        .expect("spec")
        .decode_into(bytes, 0, 17, &mut out)
        .expect_err("refused");
    assert_eq!(err.record, 17);
    assert!(err.to_string().starts_with("record 17: "), "{err}");
    err.problem
}

#[test]
fn damaged_unknown_and_oversized_images_are_refused_by_name() {
    let src = DynamicImage::ImageRgb8(picture(64, 48));
    let jpeg = encode(&src, ImageFormat::Jpeg);
    let png = encode(&src, ImageFormat::Png);
    let spec = ImageSpec::new(16, 16);
    // Truncated anywhere: an error, never a panic. A JPEG cut after its header is
    // an error too (libjpeg-turbo's "premature end" warning is made one), not a
    // partly grey picture; so is one cut just before its end-of-image marker. (A
    // PNG cut inside its closing IEND chunk still holds the whole picture.)
    let mut d = ImageDecoder::new(spec.clone()).expect("spec");
    for cut in [0, 2, 3, 10, 100, png.len() / 2] {
        let mut out = vec![0u8; spec.out_bytes()];
        assert!(
            d.decode_into(&png[..cut], 0, 1, &mut out).is_err(),
            "png cut at {cut}"
        );
    }
    for cut in [0, 2, 3, 10, 100, jpeg.len() / 2, jpeg.len() - 40] {
        let mut out = vec![0u8; spec.out_bytes()];
        assert!(
            d.decode_into(&jpeg[..cut], 0, 1, &mut out).is_err(),
            "jpeg cut at {cut}"
        );
        // The same decoder goes on to decode a whole image.
        d.decode_into(&jpeg, 0, 1, &mut out)
            .expect("the whole JPEG after a damaged one");
    }
    assert!(matches!(
        problem(spec.clone(), b"GIF89a......"),
        ImageProblem::UnknownFormat { .. }
    ));
    // A JPEG whose frame header claims 60000x60000 (a decompression bomb).
    let mut bomb = jpeg.clone();
    let sof = bomb
        .windows(2)
        .position(|w| w == [0xFF, 0xC0])
        .expect("baseline JPEG frame header");
    bomb[sof + 5..sof + 9].copy_from_slice(&[0xEA, 0x60, 0xEA, 0x60]);
    assert!(matches!(
        problem(spec.clone(), &bomb),
        ImageProblem::TooLarge {
            width: 60000,
            height: 60000,
            ..
        }
    ));
    // A PNG over a lowered limit.
    let small_limit = ImageSpec {
        max_pixels: 1000,
        ..spec.clone()
    };
    assert!(matches!(
        problem(small_limit, &png),
        ImageProblem::TooLarge { pixels: 3072, .. }
    ));
    // The destination must be the output's size.
    let mut short = vec![0u8; 10];
    let err = ImageDecoder::new(spec.clone())
        .expect("spec")
        .decode_into(&png, 0, 0, &mut short)
        .expect_err("short destination");
    assert!(matches!(err.problem, ImageProblem::OutLength { .. }));
}

#[test]
fn bad_specs_are_refused() {
    assert!(matches!(
        ImageDecoder::new(ImageSpec::new(0, 10)),
        Err(ImageProblem::EmptyOutput { .. })
    ));
    for (scale, ratio) in [
        ((0.0, 1.0), (0.75, 1.33)),
        ((0.5, 0.2), (0.75, 1.33)),
        ((0.1, 1.0), (2.0, 1.0)),
        ((0.1, f64::NAN), (0.75, 1.33)),
    ] {
        let spec = ImageSpec {
            crop: Crop::RandomResized { scale, ratio },
            ..ImageSpec::new(8, 8)
        };
        assert!(
            matches!(ImageDecoder::new(spec), Err(ImageProblem::BadCrop { .. })),
            "{scale:?} {ratio:?}"
        );
    }
}
