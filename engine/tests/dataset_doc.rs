//! docs/datasets.md's "From Rust" example, compiled and run: `example` holds its
//! lines exactly as the document shows them (a test checks the two are the same),
//! over the `captions` dataset the document's Python examples write (here written
//! in Rust: the same 10,000 records in shards of 2,000, of which the example reads
//! `label`, `i % 10` as int64).
#![allow(clippy::unwrap_used)]

use zring_engine::dataset::DatasetBuilder;
use zring_engine::{Codec, DType, Schema, WriteOptions, Writer};

const RECORDS: u64 = 10_000;
const SHARD: u64 = 2_000;

/// The document's example, verbatim between the signature and `Ok(out)`.
fn example() -> zring_engine::Result<Vec<u8>> {
    use zring_engine::dataset::{Dataset, FieldDest};
    use zring_engine::ReadOptions;

    let ds = Dataset::open("captions", ReadOptions::default())?;
    let label = ds.field_index("label")?;
    let mut out = vec![0u8; 3 * 8];
    ds.gather(&[7, 9_999, 42], &[label], &mut [FieldDest::Dense(&mut out)])?;
    Ok(out)
}

/// `captions` with a ragged `tokens` field (record `i`: `0..i % 50 + 1` as int32)
/// and a dense scalar `label` (`i % 10`), as `zring.write_dataset` infers them.
fn write_captions(dir: &std::path::Path) {
    let fields = vec![
        ("tokens".to_string(), Schema::ragged(DType::I32, 1)),
        ("label".to_string(), Schema::dense(DType::I64, &[])),
    ];
    let mut b = DatasetBuilder::create(dir, fields, false).unwrap();
    for start in (0..RECORDS).step_by(SHARD as usize) {
        let paths = b.shard_paths(b.added());
        let opts = WriteOptions::with_codec(Codec::Zstd);
        let mut tokens =
            Writer::create(&paths[0], Schema::ragged(DType::I32, 1), opts.clone()).unwrap();
        let mut label = Writer::create(&paths[1], Schema::dense(DType::I64, &[]), opts).unwrap();
        let (mut values, mut cu, mut shapes, mut labels) =
            (Vec::new(), vec![0u64], Vec::new(), Vec::new());
        for i in start..start + SHARD {
            let n = i % 50 + 1;
            values.extend((0..n as i32).flat_map(i32::to_le_bytes));
            cu.push(cu[cu.len() - 1] + n);
            shapes.push(n as u32);
            labels.extend(((i % 10) as i64).to_le_bytes());
        }
        tokens.append_ragged(&values, &cu, &shapes).unwrap();
        label.append_dense(&labels).unwrap();
        tokens.close().unwrap();
        label.close().unwrap();
        b.add_shard(SHARD).unwrap();
    }
    b.publish().unwrap();
}

#[test]
fn the_rust_example_in_docs_datasets_md_runs() {
    let dir = tempfile::tempdir().unwrap();
    write_captions(&dir.path().join("captions"));
    // The example names the dataset by a relative path, as the document's examples
    // run in the directory they write to. No other test here touches the file
    // system, so changing the working directory cannot disturb one.
    std::env::set_current_dir(dir.path()).unwrap();
    let out = example().unwrap();
    let labels: Vec<i64> = out
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(labels, [7, 9, 2]);
}

/// The non-empty lines of `text`, trimmed.
fn lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_example_is_the_one_in_docs_datasets_md() {
    let doc = include_str!("../../docs/datasets.md");
    let (_, section) = doc.split_once("## From Rust").unwrap();
    let (_, block) = section.split_once("```rust\n").unwrap();
    let (block, _) = block.split_once("```").unwrap();
    let this = include_str!("dataset_doc.rs");
    let (_, body) = this.split_once("Result<Vec<u8>> {\n").unwrap();
    let (body, _) = body.split_once("    Ok(out)\n").unwrap();
    assert_eq!(lines(body), lines(block));
}
