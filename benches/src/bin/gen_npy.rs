//! Writes the benchmark workloads as `.npy` files for `benches/npy_baseline.py`:
//! `w1.npy` uint8[N,3,224,224], `w2.npy` int32[N,512], and W3 as `w3_values.npy`
//! int32[total] plus `w3_offsets.npy` int64[N+1]. Same seed and sizes as the criterion
//! benches (and the same `ZRING_BENCH_*_RECORDS` overrides).
//!
//! Usage: `zring-bench-npy OUT_DIR`

use std::path::PathBuf;
use std::process::ExitCode;

use zring_benches::{data, npy::write_npy, records_from_env, SEED};

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: zring-bench-npy OUT_DIR");
        return ExitCode::from(2);
    };
    match run(&dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zring-bench-npy: {}: {e}", dir.display());
            ExitCode::FAILURE
        }
    }
}

fn run(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let n1 = records_from_env("ZRING_BENCH_W1_RECORDS", zring_benches::W1_RECORDS);
    let w1 = data::w1(n1, SEED);
    write_npy(&dir.join("w1.npy"), "|u1", &[n1, 3, 224, 224], &w1.bytes)?;
    drop(w1);
    let n2 = records_from_env("ZRING_BENCH_W2_RECORDS", zring_benches::W2_RECORDS);
    let w2 = data::w2(n2, SEED);
    write_npy(
        &dir.join("w2.npy"),
        "<i4",
        &[n2, data::W2_TOKENS],
        &w2.bytes,
    )?;
    drop(w2);
    let n3 = records_from_env("ZRING_BENCH_W3_RECORDS", zring_benches::W3_RECORDS);
    let w3 = data::w3(n3, SEED);
    write_npy(
        &dir.join("w3_values.npy"),
        "<i4",
        &[w3.values.len() / 4],
        &w3.values,
    )?;
    let offsets: Vec<u8> = w3.cu_seqlens.iter().flat_map(|o| o.to_le_bytes()).collect();
    write_npy(&dir.join("w3_offsets.npy"), "<i8", &[n3 + 1], &offsets)?;
    println!(
        "wrote W1 {n1} / W2 {n2} / W3 {n3} records ({} tokens) to {}",
        w3.values.len() / 4,
        dir.display()
    );
    Ok(())
}
