//! Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/:
//! `cargo run --manifest-path fuzz/Cargo.toml --example make_seeds` (from the
//! repository root). The seeds are a few small valid inputs per target; libFuzzer mutates them.

use std::fs;
use std::path::Path;

use zring_fuzz::{scratch, Input, Records};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let put = |target: &str, name: &str, bytes: &[u8]| {
        let dir = root.join(target);
        fs::create_dir_all(&dir).expect("creating the corpus directory");
        fs::write(dir.join(name), bytes).expect("writing a seed");
    };

    // Record descriptions (Records::decode): dense and ragged, each codec, records
    // that compress (flag bit 3) so that zstd frames are really stored.
    let payload: Vec<u8> = (0..200u32).map(|k| (k * 13 % 7) as u8).collect();
    for (name, flags, kind) in [
        ("dense_raw", 0b0000u8, 0b0100u8),
        ("dense_zstd", 0b1010, 0b0101),
        ("dense_dict", 0b1100, 0b0000),
        ("ragged_raw", 0b0001, 0b0000),
        ("ragged_zstd", 0b1011, 0b0110),
        ("ragged_dict", 0b1101, 0b0001),
    ] {
        let mut desc = vec![flags, kind];
        desc.extend_from_slice(&payload);
        let records = Records::decode(&mut Input(&desc));
        let path = scratch("seed.zr");
        records.write(&path).expect("writing a seed store");
        put(
            "open_file",
            name,
            &fs::read(&path).expect("reading it back"),
        );
        // flip_store: no flip, then two flips (count, backend, pos x4, mask).
        let mut clean = vec![0u8, 0];
        clean.extend_from_slice(&desc);
        put("flip_store", &format!("{name}_clean"), &clean);
        let mut flipped = vec![2u8, 1, 0x10, 0x10, 0, 0, 0x01, 0x40, 0x00, 0, 0, 0x80];
        flipped.extend_from_slice(&desc);
        put("flip_store", &format!("{name}_flipped"), &flipped);
    }

    for (name, version, dict) in [
        (
            "v1_f4",
            1u8,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
        ),
        (
            "v1_u8_1d",
            1,
            "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }",
        ),
        (
            "v2_i8_scalar",
            2,
            "{'descr': '<i8', 'fortran_order': False, 'shape': (), }",
        ),
        (
            "v3_fortran",
            3,
            "{'descr': '>u2', 'fortran_order': True, 'shape': (2, 2), }",
        ),
    ] {
        let mut h = b"\x93NUMPY".to_vec();
        h.extend_from_slice(&[version, 0]);
        let mut text = dict.to_string();
        let pre = if version == 1 { 10 } else { 12 };
        while (pre + text.len() + 1) % 64 != 0 {
            text.push(' ');
        }
        text.push('\n');
        if version == 1 {
            h.extend_from_slice(&(text.len() as u16).to_le_bytes());
        } else {
            h.extend_from_slice(&(text.len() as u32).to_le_bytes());
        }
        h.extend_from_slice(text.as_bytes());
        h.extend((0..48u8).map(|k| k % 5));
        put("npy_header", name, &h);
    }

    for (name, json) in [
        (
            "dense",
            r#"{"format":"zring","layout":"dense","item_shape":[3,4],"dtype":"float32","codec":"zstd","level":3,"dict_id":null,"record_count":10,"metadata":{"a":"b"}}"#,
        ),
        (
            "ragged",
            r#"{"format":"zring","layout":"ragged","ndim":2,"dtype":"int16","codec":"zstd-dict","level":-5,"dict_id":12345,"record_count":0,"metadata":{}}"#,
        ),
        (
            "scalar",
            r#"{"format":"zring","layout":"dense","item_shape":[],"dtype":"bfloat16","codec":"raw","level":0,"dict_id":null,"record_count":18446744073709551615,"metadata":{"k\u00e9y":"v\"al"}}"#,
        ),
    ] {
        put("schema_json", name, json.as_bytes());
    }

    // ragged_input: kind, offsets, dims, values length, offsets..., dims...
    put(
        "ragged_input",
        "valid_1d",
        &[0b0000, 3, 2, 6, 0, 2, 4, 2, 4],
    );
    put(
        "ragged_input",
        "valid_2d_u16",
        &[0b0101, 3, 4, 24, 0, 6, 6, 2, 3, 3, 2],
    );
    put("ragged_input", "bad_start", &[0b0000, 2, 1, 2, 1, 1, 1]);
    put(
        "ragged_input",
        "big_dims",
        &[0b0000, 2, 1, 4, 0, 4, 255, 0, 0, 1, 0],
    );

    // dataset_manifest: a mode byte (0 manifest.json, 1 the version file, 2 both)
    // then the template dataset's own manifest; and the same manifest naming the
    // valid stores just outside the dataset directory, which must not open.
    let manifest = fs::read(zring_fuzz::dataset_template().join("manifest.json"))
        .expect("reading the template manifest");
    for mode in 0u8..3 {
        let mut seed = vec![mode];
        seed.extend_from_slice(&manifest);
        put("dataset_manifest", &format!("template_{mode}"), &seed);
    }
    let text = String::from_utf8_lossy(&manifest).into_owned();
    if let Some(first) = text.split('"').find(|s| s.ends_with(".zr")) {
        let outside = text.replacen(first, "../outside_tokens.zr", 1);
        let mut seed = vec![2u8];
        seed.extend_from_slice(outside.as_bytes());
        put("dataset_manifest", "outside", &seed);
    }
    // Mode 3: store names, one a line, under a correct checksum.
    put(
        "dataset_manifest",
        "names_outside",
        b"\x03../outside_tokens.zr\n../outside_label.zr\n/etc/passwd\nshards/../../x.zr",
    );
}
