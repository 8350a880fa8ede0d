//! Image decoding as a read-path stage: the pixels of a batch equal a direct
//! `ImageDecoder` decode of the same bytes, whatever the threads, through
//! `decode_images` and through the loader (whose steps carry their epoch); bad
//! records raise naming the store and the record, or are skipped or substituted in
//! every stream alike.

use std::io::Cursor;
use std::path::Path;

use image::{DynamicImage, ImageFormat, RgbImage};
use zring_engine::{DType, Never, ReadOptions, Schema, Store, WriteOptions, Writer};
use zring_image::{Crop, ImageDecoder, ImageSpec, PixelLayout};
use zring_loader::{
    decode_images, DecodeError, ImageDecode, ImageField, Loader, LoaderError, LoaderOptions,
    Lookahead, OnError, Tensor, View,
};
use zring_platform::Pool;
use zring_sampler::{EpochPlan, Mode, Sampler};

/// A test picture that differs per record: `w x h` RGB.
fn picture(record: u32, w: u32, h: u32) -> RgbImage {
    RgbImage::from_fn(w, h, |x, y| {
        let block = if (x / 8 + y / 8 + record) % 2 == 0 {
            60
        } else {
            0
        };
        image::Rgb([
            (x * 255 / w) as u8,
            ((y * 255 / h) as u8).wrapping_add((record % 15) as u8 * 17),
            block,
        ])
    })
}

fn encode(img: RgbImage, format: ImageFormat) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    DynamicImage::ImageRgb8(img)
        .write_to(&mut out, format)
        .expect("encode");
    out.into_inner()
}

/// `n` images of varied sizes, JPEG and PNG alternating.
fn images(n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let format = if i % 3 == 2 {
                ImageFormat::Png
            } else {
                ImageFormat::Jpeg
            };
            encode(picture(i, 40 + 7 * (i % 5), 30 + 5 * (i % 4)), format)
        })
        .collect()
}

/// A ragged `u8` store of `records`.
fn write_encoded(path: &Path, records: &[Vec<u8>]) -> Store {
    let mut w = Writer::create(path, Schema::ragged(DType::U8, 1), WriteOptions::default())
        .expect("create");
    let mut cu = vec![0u64];
    let mut lens = Vec::new();
    for r in records {
        cu.push(cu[cu.len() - 1] + r.len() as u64);
        lens.push(r.len() as u32);
    }
    w.append_ragged(&records.concat(), &cu, &lens)
        .expect("append");
    w.close().expect("close");
    Store::open(path, ReadOptions::default()).expect("open")
}

/// A dense `u32` store whose record i is i.
fn write_labels(path: &Path, n: u32) -> Store {
    let mut w = Writer::create(
        path,
        Schema::dense(DType::U32, &[]),
        WriteOptions::default(),
    )
    .expect("create");
    w.append_dense(&(0..n).flat_map(u32::to_le_bytes).collect::<Vec<u8>>())
        .expect("append");
    w.close().expect("close");
    Store::open(path, ReadOptions::default()).expect("open")
}

fn direct(spec: &ImageSpec, bytes: &[u8], epoch: u64, record: u64) -> Vec<u8> {
    let mut out = vec![0u8; spec.out_bytes()];
    ImageDecoder::new(spec.clone())
        .expect("spec")
        .decode_into(bytes, epoch, record, &mut out)
        .expect("decode");
    out
}

fn random_spec() -> ImageSpec {
    ImageSpec {
        crop: Crop::random_resized(),
        flip: true,
        seed: 7,
        ..ImageSpec::new(24, 32)
    }
}

fn decode_with(
    pool: &Pool,
    store: &Store,
    decode: &ImageDecode,
    ids: &[u64],
    epoch: u64,
) -> Vec<u8> {
    let mut out = vec![0u8; ids.len() * decode.out_bytes()];
    let mut fields = [ImageField {
        records: store,
        decode,
        out: &mut out,
    }];
    let decoded = decode_images(&mut fields, ids, epoch, pool, &Never).expect("decode");
    assert_eq!(decoded.indices, ids);
    out
}

#[test]
fn a_batch_equals_direct_decodes_with_one_and_two_threads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let encoded = images(24);
    let store = write_encoded(&dir.path().join("img.zr"), &encoded);
    let ids: Vec<u64> = vec![5, 0, 23, 5, 11, 2, 17, 8, 9, 14, 3, 20];
    for layout in [PixelLayout::Hwc, PixelLayout::Chw] {
        let spec = ImageSpec {
            layout,
            ..random_spec()
        };
        let decode = ImageDecode::new(spec.clone()).expect("spec");
        let one = decode_with(&Pool::inline(), &store, &decode, &ids, 3);
        let two = decode_with(
            &Pool::new(1, false).expect("pool"),
            &store,
            &decode,
            &ids,
            3,
        );
        assert!(one == two, "1 and 2 threads differ");
        for (k, &id) in ids.iter().enumerate() {
            let want = direct(&spec, &encoded[id as usize], 3, id);
            let got = &one[k * spec.out_bytes()..(k + 1) * spec.out_bytes()];
            assert!(
                got == want.as_slice(),
                "record {id} in slot {k}: pixels differ"
            );
        }
        // Another epoch crops differently; the same epoch again does not.
        let other = decode_with(&Pool::inline(), &store, &decode, &ids, 4);
        assert!(one != other, "another epoch gave the same crops");
        assert!(
            one == decode_with(&Pool::inline(), &store, &decode, &ids, 3),
            "a repeat differs"
        );
    }
}

#[test]
fn a_field_that_is_not_encoded_images_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let labels = write_labels(&dir.path().join("labels.zr"), 8);
    let decode = ImageDecode::new(ImageSpec::new(8, 8)).expect("spec");
    let err = decode
        .check_source(&labels, "label")
        .expect_err("dense u32");
    assert!(matches!(err, DecodeError::NotEncoded { ref field, .. } if field == "label"));
    assert!(err.to_string().contains("labels.zr"), "{err}");
    let sampler = Sampler::new(8, 4, Mode::Sequential, 0).expect("sampler");
    let streams = [("image", vec![View::new(labels).decoded(decode)])];
    let err = Loader::new(streams, sampler, LoaderOptions::new(0, 1)).err();
    assert!(
        matches!(err, Some(LoaderError::InvalidDecode { ref stream, .. }) if stream == "image"),
        "{err:?}"
    );
}

/// Steps of a loader over images + labels, as (labels, pixels) per step.
fn run_loader(
    img: &Store,
    labels: &Store,
    decode: &ImageDecode,
    workers: usize,
    from: u64,
    steps: usize,
) -> Vec<(Vec<u32>, Vec<u8>)> {
    let plan = EpochPlan::new(img.len(), 6, Mode::Cyclic, 11).expect("plan");
    let streams = [
        ("image", vec![View::from(img).decoded(decode.clone())]),
        ("label", vec![View::from(labels)]),
    ];
    let options = LoaderOptions {
        lookahead: Lookahead::Fixed,
        ..LoaderOptions::new(workers, 2)
    };
    let mut loader = Loader::new(streams, plan, options).expect("loader");
    loader.seek(from).expect("seek");
    let mut out = Vec::new();
    for _ in 0..steps {
        let step = loader.next().expect("endless").expect("step");
        let Some(Tensor::Dense { data, shape, .. }) = step.get("image", 0) else {
            panic!("no image tensor")
        };
        assert_eq!(shape[1..], decode.item_shape());
        let label = step.get("label", 0).expect("label");
        let labels: Vec<u32> = (0..label.records())
            .map(|k| {
                u32::from_le_bytes(
                    label
                        .record(k)
                        .expect("record")
                        .try_into()
                        .expect("4 bytes"),
                )
            })
            .collect();
        assert_eq!(shape[0], labels.len());
        out.push((labels, data.to_vec()));
    }
    out
}

#[test]
fn the_loader_decodes_with_the_steps_epoch_whatever_the_workers_and_on_resume() {
    let dir = tempfile::tempdir().expect("tempdir");
    let encoded = images(18);
    let img = write_encoded(&dir.path().join("img.zr"), &encoded);
    let labels = write_labels(&dir.path().join("labels.zr"), 18);
    let spec = random_spec();
    let decode = ImageDecode::new(spec.clone()).expect("spec");
    // 3 steps per epoch: 7 steps cross two epoch boundaries.
    let one = run_loader(&img, &labels, &decode, 1, 0, 7);
    let two = run_loader(&img, &labels, &decode, 2, 0, 7);
    assert!(one == two, "1 and 2 workers differ");
    let resumed = run_loader(&img, &labels, &decode, 2, 4, 3);
    assert!(one[4..] == resumed[..], "a resumed run differs");
    for (step, (labels, pixels)) in one.iter().enumerate() {
        let epoch = step as u64 / 3;
        for (k, &id) in labels.iter().enumerate() {
            let want = direct(&spec, &encoded[id as usize], epoch, u64::from(id));
            let got = &pixels[k * spec.out_bytes()..(k + 1) * spec.out_bytes()];
            assert!(
                got == want.as_slice(),
                "step {step}, record {id}: pixels differ"
            );
        }
    }
}

#[test]
fn bad_records_raise_naming_the_store_and_record_or_are_skipped_or_substituted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut encoded = images(12);
    // Record 4: a JPEG cut short; record 9: not an image at all.
    let third = encoded[4].len() / 3;
    encoded[4].truncate(third);
    encoded[9] = b"not an image".to_vec();
    let img = write_encoded(&dir.path().join("bad.zr"), &encoded);
    let labels = write_labels(&dir.path().join("labels.zr"), 12);
    let spec = ImageSpec::new(16, 16);
    let ids: Vec<u64> = (0..12).collect();

    let raise = ImageDecode::new(spec.clone()).expect("spec");
    let mut out = vec![0u8; ids.len() * raise.out_bytes()];
    let mut fields = [ImageField {
        records: &img,
        decode: &raise,
        out: &mut out,
    }];
    let err = decode_images(&mut fields, &ids, 0, Pool::global(), &Never).expect_err("bad");
    let text = err.to_string();
    assert!(
        text.contains("bad.zr") && text.contains("record 4"),
        "{text}"
    );

    let skip = raise.clone().with_on_error(OnError::Skip);
    let mut fields = [ImageField {
        records: &img,
        decode: &skip,
        out: &mut out,
    }];
    let decoded = decode_images(&mut fields, &ids, 0, Pool::global(), &Never).expect("skip");
    assert_eq!(decoded.skipped, [4, 9]);
    let kept: Vec<u64> = ids
        .iter()
        .copied()
        .filter(|i| ![4, 9].contains(i))
        .collect();
    assert_eq!(decoded.indices, kept);
    for (k, &id) in kept.iter().enumerate() {
        let want = direct(&spec, &encoded[id as usize], 0, id);
        assert!(
            out[k * spec.out_bytes()..(k + 1) * spec.out_bytes()] == want[..],
            "record {id}: pixels differ"
        );
    }

    // Through the loader the labels follow the images: skipped, then substituted.
    let sampler = Sampler::new(12, 12, Mode::Sequential, 0).expect("sampler");
    let streams = [
        ("image", vec![View::from(&img).decoded(skip.clone())]),
        ("label", vec![View::from(&labels)]),
    ];
    // No workers: exactly the steps asked for are made (and counted).
    let mut loader =
        Loader::new(streams, sampler.clone(), LoaderOptions::new(0, 1)).expect("loader");
    let step = loader.next().expect("endless").expect("step");
    assert_eq!(step.skipped(), [4, 9]);
    let label = step.get("label", 0).expect("label");
    assert_eq!(label.records(), 10);
    assert_eq!(
        step.get("image", 0).expect("image").bytes().len(),
        10 * spec.out_bytes()
    );
    drop(step);
    assert_eq!(loader.stats().images_skipped, 2);
    loader.close();

    // With workers making steps ahead, a step's bad images count once it is
    // delivered: steps of 3 records, the bad ones in steps 1 and 3.
    let small = Sampler::new(12, 3, Mode::Sequential, 0).expect("sampler");
    let streams = [("image", vec![View::from(&img).decoded(skip.clone())])];
    let mut loader = Loader::new(streams, small, LoaderOptions::new(1, 4)).expect("loader");
    let first = loader.next().expect("endless").expect("step 0");
    assert!(first.skipped().is_empty());
    drop(first);
    // Time for the worker to make steps 1-4 ahead.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        loader.stats().images_skipped,
        0,
        "made ahead, not delivered"
    );
    let second = loader.next().expect("endless").expect("step 1");
    assert_eq!(second.skipped(), [4]);
    drop(second);
    assert_eq!(loader.stats().images_skipped, 1);
    for _ in 2..4 {
        drop(loader.next().expect("endless").expect("step"));
    }
    assert_eq!(loader.stats().images_skipped, 2);
    loader.close();

    let substitute = raise.clone().with_on_error(OnError::Substitute);
    let run = || {
        let streams = [
            ("image", vec![View::from(&img).decoded(substitute.clone())]),
            ("label", vec![View::from(&labels)]),
        ];
        let mut loader =
            Loader::new(streams, sampler.clone(), LoaderOptions::new(1, 1)).expect("loader");
        let step = loader.next().expect("endless").expect("step");
        let pairs = step.substituted().to_vec();
        let labels: Vec<u32> = (0..12)
            .map(|k| {
                let r = step
                    .get("label", 0)
                    .expect("label")
                    .record(k)
                    .expect("record");
                u32::from_le_bytes(r.try_into().expect("4 bytes"))
            })
            .collect();
        let pixels = step.get("image", 0).expect("image").bytes().to_vec();
        (pairs, labels, pixels)
    };
    let (pairs, got_labels, pixels) = run();
    assert_eq!(pairs.iter().map(|p| p.0).collect::<Vec<_>>(), [4, 9]);
    for &(bad, good) in &pairs {
        assert!(![4, 9].contains(&good), "{bad} replaced by bad {good}");
        let slot = bad as usize;
        assert_eq!(got_labels[slot], good as u32, "the label follows the image");
        let want = direct(&spec, &encoded[good as usize], 0, good);
        assert!(
            pixels[slot * spec.out_bytes()..(slot + 1) * spec.out_bytes()] == want[..],
            "substitute {good}: pixels differ"
        );
    }
    assert_eq!(
        run(),
        (pairs, got_labels, pixels),
        "substitutes are deterministic"
    );

    // The loader's error names the stream, the store and the record.
    let streams = [("image", vec![View::from(&img).decoded(raise)])];
    let mut loader = Loader::new(streams, sampler, LoaderOptions::new(0, 1)).expect("loader");
    let err = loader.next().expect("a step").expect_err("bad record");
    let text = err.to_string();
    assert!(matches!(err, LoaderError::Decode { .. }), "{err:?}");
    assert!(
        text.contains("\"image\"") && text.contains("bad.zr") && text.contains("record 4"),
        "{text}"
    );
}
