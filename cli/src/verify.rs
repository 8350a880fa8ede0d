//! `zring verify`: check every record; the first damaged record or section is named.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use zring_engine::Store;

use super::output::{self, bytes, count};
use super::progress::{self, Unit};
use super::{CliError, CliResult};

/// About this many stored bytes are checked between progress updates.
const CHUNK_BYTES: u64 = 64 << 20;

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The store (or dataset directory) to check.
    pub store: PathBuf,
    #[command(flatten)]
    pub read: super::settings::ReadArgs,
}

/// Runs `zring verify`: opening checks the superblock, footer, section checksums and
/// schema; then every record's table entry, checksum and decoded length is checked.
pub fn run(args: &VerifyArgs) -> CliResult {
    let opts = args.read.options()?;
    if zring_engine::dataset::is_dataset(&args.store) {
        return super::dataset::verify(&args.store, opts);
    }
    let started = Instant::now();
    let store = Store::open(&args.store, opts)?;
    let n = store.len();
    let avg = store.file_bytes() / n.max(1);
    let chunk = (CHUNK_BYTES / avg.max(1)).clamp(256, 1 << 20);
    let bar = progress::bar(n, "verify", Unit::Records);
    let mut start = 0;
    while start < n {
        let end = (start + chunk).min(n);
        store
            .verify_range(start..end)
            .map_err(|e| CliError::from(e).context("verify failed"))?;
        bar.set_position(end);
        start = end;
    }
    bar.finish_and_clear();
    let stats = store.stats()?;
    output::print(&format!(
        "ok: {}: {} records verified ({} logical, {} stored) in {:.2} s\n",
        args.store.display(),
        count(stats.records),
        bytes(stats.logical_bytes),
        bytes(stats.stored_bytes),
        started.elapsed().as_secs_f64()
    ))
    .map_err(|e| CliError::new(format!("writing to stdout: {e}")))
}
