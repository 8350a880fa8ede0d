//! The image decoder on any bytes: an encoded JPEG or PNG (the seeds) or anything
//! else. Every decode returns an error naming the record or fills exactly the output
//! it was given, for each crop and layout, and never panics, hangs or allocates past
//! the pixel limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zring_image::{Crop, ImageDecoder, ImageSpec, PixelLayout};

fuzz_target!(|data: &[u8]| {
    let specs = [
        ImageSpec {
            crop: Crop::Full,
            // A small limit keeps libFuzzer's memory bounded: a header may claim
            // anything up to 65535 x 65535.
            max_pixels: 1 << 20,
            ..ImageSpec::new(16, 16)
        },
        ImageSpec {
            crop: Crop::random_resized(),
            flip: true,
            layout: PixelLayout::Chw,
            max_pixels: 1 << 20,
            seed: 3,
            ..ImageSpec::new(7, 9)
        },
    ];
    for spec in specs {
        let mut out = vec![0u8; spec.out_bytes()];
        let mut decoder = ImageDecoder::new(spec).expect("a valid spec");
        if let Err(e) = decoder.decode_into(data, 1, 42, &mut out) {
            assert_eq!(e.record, 42);
            assert!(e.to_string().starts_with("record 42: "));
        }
    }
});
