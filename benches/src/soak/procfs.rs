//! The process's resources as the kernel counts them: resident memory, open file
//! descriptors and threads, read from `/proc/self`.

use std::path::PathBuf;

use zring_testkit::os::kib_field;

use super::SoakError;

/// One reading of this process's resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resources {
    /// VmRSS, KiB.
    pub rss_kib: u64,
    /// Open file descriptors.
    pub fds: u64,
    /// Threads of the process.
    pub threads: u64,
    /// Of the RSS, anonymous memory in transparent huge pages (AnonHugePages of
    /// `/proc/self/smaps_rollup`, KiB), where the kernel reports it: a huge page
    /// made of a partly used buffer makes all its 2 MiB resident.
    pub anon_huge_kib: Option<u64>,
}

impl Resources {
    /// Reads `/proc/self/status` and `/proc/self/fd`.
    pub fn now() -> Result<Self, SoakError> {
        let status_path = "/proc/self/status";
        let status = std::fs::read_to_string(status_path).map_err(|source| SoakError::Io {
            path: PathBuf::from(status_path),
            what: "reading the process's status",
            source,
        })?;
        let field = |key: &str| {
            kib_field(&status, key).ok_or_else(|| {
                SoakError::Wrong(format!("{status_path} has no readable {key} line"))
            })
        };
        let fd_dir = "/proc/self/fd";
        let listing = std::fs::read_dir(fd_dir).map_err(|source| SoakError::Io {
            path: PathBuf::from(fd_dir),
            what: "listing the process's file descriptors",
            source,
        })?;
        // The listing's own descriptor is open while it is read, and listed: it is
        // not one of the process's.
        let fds = listing.count().saturating_sub(1) as u64;
        let anon_huge_kib = std::fs::read_to_string("/proc/self/smaps_rollup")
            .ok()
            .and_then(|rollup| kib_field(&rollup, "AnonHugePages:"));
        Ok(Self {
            rss_kib: field("VmRSS:")?,
            fds,
            threads: field("Threads:")?,
            anon_huge_kib,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_read_where_proc_exists() {
        if std::path::Path::new("/proc/self/status").exists() {
            let r = Resources::now().expect("resources");
            assert!(r.rss_kib > 0 && r.threads >= 1 && r.fds >= 3);
        }
    }
}
