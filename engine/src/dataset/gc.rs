//! Removing what old versions of a dataset left behind.
//!
//! Every publication leaves the previous manifests (`manifests/<version>.json`) and,
//! after an `overwrite`, stores that no newer version names; a writer killed before
//! publishing leaves stores no manifest names and hidden temporary files.
//! [`collect_garbage`] keeps the newest `keep` versions (the current one always) and
//! every store any of them names, and removes the rest of that list:
//!
//! - manifests of versions older than the kept ones;
//! - stores under `data/` named `v<version>-...zr` that no kept manifest names and
//!   whose `<version>` is not newer than the current one (a writer building the next
//!   version writes stores named with it, so they are never touched);
//! - temporary files of writers whose process is gone and that have not changed for
//!   a minute (`data/.<name>.<pid>.<n>.zr-tmp`, `.<name>.<pid>.<n>.tmp` beside a
//!   manifest).
//!
//! `data/` and `manifests/` must be directories of the dataset's own, not symbolic
//! links: a collection through a link would remove files wherever it points.
//!
//! A dataset under a URL prefix is collected by the same plan, from the objects
//! listed under its `manifests/` and `data/`, with deletes.
//!
//! Manifests go before the stores they name, so an interruption never leaves a
//! manifest whose stores are gone. A reader that opened an older version holds its
//! stores open: on a local file system it keeps reading them after they are removed
//! (the files live until their last descriptor is closed); reopening a removed
//! version fails with the manifest's "not found" error.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::location::{LocalDir, Location};
use super::manifest::{Manifest, DATA_DIR, VERSIONS_DIR};
use crate::error::{ArgumentError, Error, ManifestProblem, Result};

/// A temporary file must be this old (unchanged) before it is removed: a writer in
/// another pid namespace sharing the directory may be alive under a pid we cannot see.
const TEMP_IDLE: Duration = Duration::from_secs(60);

/// What [`collect_garbage`] removed (or, with `dry_run`, would remove).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// The current version.
    pub current: u64,
    /// The versions kept, oldest first (their manifests exist).
    pub kept_versions: Vec<u64>,
    /// Manifest files removed.
    pub manifests: Vec<PathBuf>,
    /// Store files removed.
    pub stores: Vec<PathBuf>,
    /// Temporary files of dead writers removed.
    pub temps: Vec<PathBuf>,
    /// Bytes of the removed files.
    pub bytes: u64,
}

/// Removes from the dataset in `dir` every manifest older than the newest `keep`
/// versions, every store none of those versions names, and stale temporary files
/// (see the module documentation). With `dry_run`, removes nothing and reports what
/// it would remove.
pub fn collect_garbage(dir: impl AsRef<Path>, keep: u64, dry_run: bool) -> Result<GcReport> {
    let dir = dir.as_ref();
    if keep == 0 {
        return Err(Error::InvalidArgument(ArgumentError::GcKeepNone));
    }
    if let Some(url) = crate::remote::url_of(dir) {
        return collect_at_url(url, keep, dry_run);
    }
    let location = LocalDir::new(dir);
    let versions_dir = dir.join(VERSIONS_DIR);
    let data = dir.join(DATA_DIR);
    let mut published = Vec::new();
    for entry in read_own_dir(&versions_dir)? {
        published.push(entry.file_name().to_string_lossy().into_owned());
    }
    let mut stores = Vec::new();
    let mut temps = Vec::new();
    for entry in read_own_dir(&data)? {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            if name.ends_with(".zr-tmp") && stale_temp(&name, ".zr-tmp", &entry) {
                temps.push(entry.path());
            }
        } else {
            stores.push(name);
        }
    }
    let plan = Plan::make(&location, keep, &published, &stores)?;
    let mut report = plan.report(|rel| dir.join(rel));
    for path in report.manifests.iter().chain(&report.stores) {
        remove(path, dry_run, &mut report.bytes)?;
    }
    for path in temps {
        remove(&path, dry_run, &mut report.bytes)?;
        report.temps.push(path);
    }
    for d in [dir.to_path_buf(), versions_dir] {
        for entry in read_dir(&d)? {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.ends_with(".tmp") && stale_temp(&name, ".tmp", &entry)
            {
                remove(&entry.path(), dry_run, &mut report.bytes)?;
                report.temps.push(entry.path());
            }
        }
    }
    Ok(report)
}

/// [`collect_garbage`] of a dataset under a URL prefix: the same plan from the
/// objects listed under `manifests/` and `data/`, carried out by deletes. (Its
/// writers stage locally, so no temporary objects exist there.)
#[cfg(feature = "remote")]
fn collect_at_url(url: &str, keep: u64, dry_run: bool) -> Result<GcReport> {
    let at = crate::remote::ObjectDir::new(url, &crate::remote::RemoteOptions::default())?;
    let names = |rel: &str| -> Result<Vec<(String, u64)>> { at.list(rel, "listing the dataset") };
    let published: Vec<String> = names(VERSIONS_DIR)?.into_iter().map(|(n, _)| n).collect();
    // Store names in listing order, and their sizes (the bytes a removal frees).
    let listed = names(DATA_DIR)?;
    let stores: Vec<String> = listed.iter().map(|(n, _)| n.clone()).collect();
    let sizes: std::collections::HashMap<&str, u64> =
        listed.iter().map(|(n, b)| (n.as_str(), *b)).collect();
    let plan = Plan::make(&at, keep, &published, &stores)?;
    let mut report = plan.report(|rel| at.url_of(rel));
    for v in &plan.old_manifests {
        if !dry_run {
            at.delete(&version_rel(*v), "removing an old manifest")?;
        }
    }
    for name in &plan.stores {
        if !dry_run {
            at.delete(&format!("{DATA_DIR}/{name}"), "removing an unnamed store")?;
        }
        report.bytes += sizes.get(name.as_str()).copied().unwrap_or(0);
    }
    Ok(report)
}

#[cfg(not(feature = "remote"))]
fn collect_at_url(url: &str, _: u64, _: bool) -> Result<GcReport> {
    Err(Error::InvalidArgument(ArgumentError::RemoteNotBuilt {
        url: url.to_string(),
    }))
}

/// `manifests/<version>.json`.
fn version_rel(version: u64) -> String {
    format!("{VERSIONS_DIR}/{version:010}.json")
}

/// What a collection removes, decided from names alone: the same rules for a
/// directory and a URL prefix (see the module documentation).
struct Plan {
    current: u64,
    kept_versions: Vec<u64>,
    /// Versions whose manifests go (older than the kept ones).
    old_manifests: Vec<u64>,
    /// Store names under `data/` that go.
    stores: Vec<String>,
}

impl Plan {
    /// The plan for the dataset at `location`, whose `manifests/` holds the files
    /// `published` and whose `data/` holds the files `stores`.
    fn make(
        location: &dyn Location,
        keep: u64,
        published: &[String],
        stores: &[String],
    ) -> Result<Self> {
        let parse = |version: u64| -> Result<Manifest> {
            let text = location.read_manifest(Some(version))?;
            Manifest::from_json(&text).map_err(|problem| {
                let problem = ManifestProblem::InVersion {
                    version,
                    problem: Box::new(problem),
                };
                Error::manifest(location.describe(), problem)
            })
        };
        let current = super::location::read_current(location)?;
        let oldest_kept = current.version.saturating_sub(keep - 1).max(1);
        let mut versions: Vec<u64> = published
            .iter()
            .filter_map(|name| {
                name.strip_suffix(".json")
                    .filter(|s| s.len() == 10)
                    .and_then(|s| s.parse::<u64>().ok())
            })
            .collect();
        versions.sort_unstable();
        // Every store a kept version names. A kept manifest that cannot be read
        // stops the collection: what it names is unknown, so nothing could be
        // removed safely.
        let mut referenced: BTreeSet<String> = BTreeSet::new();
        referenced.extend(current.shards.iter().flat_map(|s| s.files.iter().cloned()));
        let mut kept_versions = Vec::new();
        for &v in &versions {
            if (oldest_kept..current.version).contains(&v) {
                let m = parse(v)?;
                referenced.extend(m.shards.iter().flat_map(|s| s.files.iter().cloned()));
            }
            if (oldest_kept..=current.version).contains(&v) {
                kept_versions.push(v);
            }
        }
        let old_manifests = versions
            .iter()
            .copied()
            .filter(|v| *v < oldest_kept)
            .collect();
        // Only stores named by zring's builders, for a version not newer than the
        // current one (a writer building the next version is not disturbed).
        let stores = stores
            .iter()
            .filter(|name| {
                !name.starts_with('.')
                    && name.ends_with(".zr")
                    && !referenced.contains(&format!("{DATA_DIR}/{name}"))
                    && store_version(name).is_some_and(|v| v <= current.version)
            })
            .cloned()
            .collect();
        Ok(Self {
            current: current.version,
            kept_versions,
            old_manifests,
            stores,
        })
    }

    /// The report of this plan, with each file named by `at` (relative path in).
    fn report(&self, at: impl Fn(&str) -> PathBuf) -> GcReport {
        GcReport {
            current: self.current,
            kept_versions: self.kept_versions.clone(),
            manifests: self
                .old_manifests
                .iter()
                .map(|v| at(&version_rel(*v)))
                .collect(),
            stores: self
                .stores
                .iter()
                .map(|name| at(&format!("{DATA_DIR}/{name}")))
                .collect(),
            ..GcReport::default()
        }
    }
}

/// The entries of the dataset's own directory `d` (`data/`, `manifests/`), which must
/// not be a symbolic link: collection removes files by name, and through a link it
/// would remove them wherever the link points.
fn read_own_dir(d: &Path) -> Result<Vec<fs::DirEntry>> {
    if fs::symlink_metadata(d).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(Error::io(
            d,
            "listing the dataset directory",
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "it is a symbolic link; gc removes nothing through one",
            ),
        ));
    }
    read_dir(d)
}

/// The entries of directory `d` (none if it does not exist).
fn read_dir(d: &Path) -> Result<Vec<fs::DirEntry>> {
    match fs::read_dir(d) {
        Ok(it) => it
            .map(|e| e.map_err(|e| Error::io(d, "listing the dataset directory", e)))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io(d, "listing the dataset directory", e)),
    }
}

/// The version in a builder's store name `v<version>-<shard>-<writer>.<field>.zr`
/// (`v<version>-<shard>.<field>.zr` before writers were named).
fn store_version(name: &str) -> Option<u64> {
    let rest = name.strip_prefix('v')?;
    let (v, _) = rest.split_once('-')?;
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// Whether the temporary file `.<name>.<pid>[.<n>]<suffix>` belongs to a writer that
/// is gone: its pid is not alive (and not ours) and it has not changed for a minute.
fn stale_temp(file: &str, suffix: &str, entry: &fs::DirEntry) -> bool {
    let Some(body) = file.strip_suffix(suffix) else {
        return false;
    };
    // Names may hold dots: the pid is counted from the end. Temporary names end
    // `.<pid>.<n>`; a manifest's ended `.<pid>` before each write got its own `<n>`,
    // and then its name's part before the pid is `json`, never a number.
    let parts: Vec<&str> = body.rsplit('.').take(2).collect();
    let pid = match parts.get(1).and_then(|p| p.parse::<u32>().ok()) {
        Some(pid) => Some(pid),
        None if suffix == ".tmp" => parts.first().and_then(|p| p.parse::<u32>().ok()),
        None => None,
    };
    let Some(pid) = pid else {
        return false;
    };
    let idle = entry
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age >= TEMP_IDLE);
    pid != std::process::id() && idle && !zring_platform::process_is_alive(pid)
}

fn remove(path: &Path, dry_run: bool, bytes: &mut u64) -> Result<()> {
    let len = fs::symlink_metadata(path).map(|m| m.len()).unwrap_or(0);
    if !dry_run {
        match fs::remove_file(path) {
            Ok(()) => {}
            // Removed meanwhile (another collection): nothing left to do.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io(path, "removing an old dataset file", e)),
        }
    }
    *bytes += len;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_names_give_their_version() {
        assert_eq!(store_version("v000003-000001.tokens.zr"), Some(3));
        assert_eq!(
            store_version("v000003-000001-0123456789abcdef.tokens.zr"),
            Some(3)
        );
        assert_eq!(store_version("v12-0.a.zr"), Some(12));
        assert_eq!(store_version("x000003-000001.a.zr"), None);
        assert_eq!(store_version("v-1.a.zr"), None);
        assert_eq!(store_version("vab-1.a.zr"), None);
    }
}
