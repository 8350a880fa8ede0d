//! docs/language-models.md's "From Rust" example, compiled and run: `example` holds
//! its lines exactly as the document shows them (a test checks the two are the
//! same), over two ragged int32 stores `web.zr` and `code.zr` written here.

use zring_engine::{DType, Schema, WriteOptions, Writer};

/// The document's example, verbatim between the signature and `Ok(batch)`.
fn example() -> Result<zring_loader::PackedBatch<i32>, Box<dyn std::error::Error>> {
    use std::sync::Arc;
    use zring_engine::{ReadOptions, Records, Store};
    use zring_loader::{PackStrategy, PackedReader, Packer};
    use zring_sampler::{Mixture, Mode};

    let web = Store::open("web.zr", ReadOptions::default())?;
    let code = Store::open("code.zr", ReadOptions::default())?;
    // 70% web, 30% code; each source runs through its own permutations.
    let mixture = Mixture::new(&[web.len(), code.len()], &[0.7, 0.3], Mode::Cyclic, 0)?;
    let packer = Packer::new(2048, 8, PackStrategy::FirstFit)?;
    let sources: Vec<Arc<dyn Records>> = vec![Arc::new(web), Arc::new(code)];
    let mut reader = PackedReader::new(sources, mixture, packer, 0i32)?;
    let batch = reader.next_batch()?;
    assert_eq!(batch.tokens.len(), 8 * 2048);
    assert_eq!(batch.cu_seqlens.last(), Some(&(8 * 2048)));
    // A checkpoint is the packer's state: positions, not tokens.
    let state = reader.state().clone();
    assert_eq!(state.batches, 1);
    Ok(batch)
}

fn write(path: &std::path::Path, n: usize, seed: u64) {
    let w3 = zring_workloads::w3(n, seed);
    let mut w = Writer::create(path, Schema::ragged(DType::I32, 1), WriteOptions::default())
        .expect("create");
    w.append_ragged(&w3.values, &w3.cu_seqlens, &w3.shapes())
        .expect("append");
    w.close().expect("close");
}

#[test]
fn the_example_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("web.zr"), 2_000, 1);
    write(&dir.path().join("code.zr"), 500, 2);
    std::env::set_current_dir(dir.path()).expect("cd");
    let batch = example().expect("example");
    assert!(batch.pieces.len() > 8);
}

fn lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_example_is_the_one_in_docs_language_models_md() {
    let doc = include_str!("../../docs/language-models.md");
    let (_, section) = doc.split_once("## From Rust").expect("section");
    let (_, block) = section.split_once("```rust\n").expect("block");
    let (block, _) = block.split_once("```").expect("block end");
    let this = include_str!("lm_doc.rs");
    let (_, body) = this
        .split_once("Box<dyn std::error::Error>> {\n")
        .expect("body");
    let (body, _) = body.split_once("    Ok(batch)\n").expect("body end");
    assert_eq!(lines(body), lines(block));
}
