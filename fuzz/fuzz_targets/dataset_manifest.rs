//! The dataset manifest parser: any bytes as `manifest.json` and/or
//! `manifests/0000000001.json` of a real dataset directory, then open and read
//! through it. An error or a dataset, never a panic; and a dataset that opens only
//! ever reads stores inside its directory (the template keeps valid stores right
//! beside it, so a manifest naming `../outside_tokens.zr` would open if it could).
#![no_main]

use std::fs;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use zring_engine::dataset::{version_path, Dataset, Manifest};
use zring_engine::ReadOptions;
use zring_fuzz::dataset_template;

/// The template dataset's manifest, parsed once (before any input overwrites it).
fn template_manifest() -> &'static Manifest {
    static MANIFEST: OnceLock<Manifest> = OnceLock::new();
    MANIFEST.get_or_init(|| {
        let text = fs::read(dataset_template().join("manifest.json"))
            .expect("reading the template manifest");
        Manifest::from_json(&text).expect("the template manifest parses")
    })
}

fuzz_target!(|data: &[u8]| {
    let dir = dataset_template();
    let template = template_manifest();
    let (&mode, text) = match data.split_first() {
        Some(split) => split,
        None => return,
    };
    let current = dir.join("manifest.json");
    let v1 = version_path(dir, 1);
    // Mode: which of the two manifest files holds the input (the other is removed
    // or keeps the template's valid text from the first run). Mode 3 gets past the
    // checksum: the input's lines replace the template's store names (shard by
    // shard, field by field) and the manifest is written with a correct checksum,
    // so that hostile names (`..`, absolute, links) reach the opener.
    let _ = fs::remove_file(&current);
    match mode % 4 {
        3 => {
            let mut manifest = template.clone();
            let mut names = text.split(|&b| b == b'\n');
            for shard in &mut manifest.shards {
                for file in &mut shard.files {
                    if let Some(name) = names.next() {
                        *file = String::from_utf8_lossy(name).into_owned();
                    }
                }
            }
            let json = manifest.to_json();
            fs::write(&current, &json).expect("writing manifest.json");
            fs::write(&v1, &json).expect("writing the version manifest");
        }
        0 => fs::write(&current, text).expect("writing manifest.json"),
        1 => fs::write(&v1, text).expect("writing the version manifest"),
        _ => {
            fs::write(&current, text).expect("writing manifest.json");
            fs::write(&v1, text).expect("writing the version manifest");
        }
    }
    let root = dir.canonicalize().expect("canonical dataset directory");
    for opened in [
        Dataset::open(dir, ReadOptions::default()),
        Dataset::open_version(dir, 1, ReadOptions::default()),
    ] {
        let Ok(ds) = opened else { continue };
        for path in ds.store_paths() {
            let real = path.canonicalize().expect("an opened store exists");
            assert!(
                real.starts_with(&root),
                "{} opened outside {}",
                real.display(),
                root.display()
            );
        }
        let _ = ds.verify();
        if !ds.is_empty() {
            let fields: Vec<usize> = (0..ds.fields().len()).collect();
            let _ = ds.gather_vec(&[0, ds.len() - 1], &fields);
        }
    }
});
