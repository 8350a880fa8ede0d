//! `zring gc`: remove the manifests and stores of a dataset's old versions.

use std::path::PathBuf;

use clap::Args;
use zring_engine::dataset::{collect_garbage, is_dataset};

use super::output::{self, bytes};
use super::{CliError, CliResult};

#[derive(Debug, Args)]
pub struct GcArgs {
    /// The dataset directory.
    pub dataset: PathBuf,
    /// How many of the newest versions to keep (the current one always).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub keep: u64,
    /// Only list what would be removed.
    #[arg(long)]
    pub dry_run: bool,
    /// List every removed file.
    #[arg(long, short)]
    pub verbose: bool,
}

/// Runs `zring gc`: keeps the newest `--keep` versions and every store they name;
/// removes older manifests, stores no kept version names (never those of a version
/// being written) and temporary files of dead writers.
pub fn run(args: &GcArgs) -> CliResult {
    if !is_dataset(&args.dataset) {
        return Err(CliError::new(format!(
            "{}: not a dataset directory (no manifest.json)",
            args.dataset.display()
        )));
    }
    let r = collect_garbage(&args.dataset, args.keep, args.dry_run)?;
    let mut text = String::new();
    if args.verbose || args.dry_run {
        for p in r.manifests.iter().chain(&r.stores).chain(&r.temps) {
            text.push_str(&format!("{}\n", p.display()));
        }
    }
    let kept: Vec<String> = r.kept_versions.iter().map(u64::to_string).collect();
    text.push_str(&format!(
        "{}{}: kept version{} {} (current {}); {} {} manifests, {} stores, {} temporary files ({})\n",
        if args.dry_run { "dry run: " } else { "" },
        args.dataset.display(),
        if kept.len() == 1 { "" } else { "s" },
        kept.join(", "),
        r.current,
        if args.dry_run { "would remove" } else { "removed" },
        r.manifests.len(),
        r.stores.len(),
        r.temps.len(),
        bytes(r.bytes),
    ));
    output::print(&text).map_err(|e| CliError::new(format!("writing to stdout: {e}")))
}
