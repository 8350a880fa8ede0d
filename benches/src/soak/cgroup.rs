//! The soak's memory limit: a memory cgroup that the process creates and moves
//! itself into, so that the store is several times the memory the process may use
//! (page cache included: a cgroup charges the cache pages its processes bring in).
//!
//! Both hierarchies are handled, because machines differ: cgroup v2 (`memory.max`),
//! and the v1 memory controller still found on hybrid set-ups
//! (`memory.limit_in_bytes`). The hierarchy is the one `/proc/self/mountinfo` and
//! `/proc/self/cgroup` name. With v1 the new cgroup is a child of the one the process
//! is in, so any limit above still applies; with v2 it is a child of the root,
//! because v2 does not let a cgroup that holds processes (the one we start in) enable
//! the memory controller for its children. Creating and joining need root (or a
//! delegated hierarchy).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Which cgroup hierarchy holds the memory controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// A memory cgroup: the one the process is in, or one it made.
#[derive(Clone, Debug)]
pub struct Cgroup {
    pub version: Version,
    /// The hierarchy's mount point.
    mount: PathBuf,
    /// This cgroup's directory.
    pub dir: PathBuf,
}

/// Problems with the cgroup interface, as text: none of them stops the soak, which
/// reports them and runs without a limit.
pub type CgroupResult<T> = Result<T, String>;

impl Cgroup {
    /// The memory cgroup this process is in.
    pub fn current() -> CgroupResult<Self> {
        let mountinfo = read("/proc/self/mountinfo")?;
        let membership = read("/proc/self/cgroup")?;
        let (version, mount, root) = memory_mount(&mountinfo).ok_or(
            "no memory cgroup hierarchy is mounted (neither cgroup v2 nor v1's memory controller)",
        )?;
        let path = membership
            .lines()
            .filter_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
                let ours = match version {
                    Version::V1 => controllers.split(',').any(|c| c == "memory"),
                    Version::V2 => controllers.is_empty(),
                };
                ours.then_some(path)
            })
            .next()
            .ok_or("/proc/self/cgroup names no memory cgroup")?;
        // A mount of a sub-tree (a container's) shows paths relative to its root.
        let rel = path.strip_prefix(root.as_str()).unwrap_or(path);
        let dir = mount.join(rel.trim_start_matches('/'));
        Ok(Self {
            version,
            mount,
            dir,
        })
    }

    /// Creates (or reuses) the cgroup `name`, limits it to `bytes` and moves this
    /// whole process (every thread) into it.
    pub fn join_new(&self, name: &str, bytes: u64) -> CgroupResult<Self> {
        let parent = match self.version {
            Version::V1 => self.dir.clone(),
            Version::V2 => {
                // The root's children get the memory controller only when the root
                // enables it; writing it again is harmless.
                let control = self.mount.join("cgroup.subtree_control");
                write(&control, "+memory")?;
                self.mount.clone()
            }
        };
        let dir = parent.join(name);
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("creating {}: {e}", dir.display())),
        }
        let child = Self {
            version: self.version,
            mount: self.mount.clone(),
            dir,
        };
        let limit_file = match self.version {
            Version::V1 => "memory.limit_in_bytes",
            Version::V2 => "memory.max",
        };
        write(&child.dir.join(limit_file), &bytes.to_string())?;
        if self.version == Version::V2 {
            // No swapping around the limit either, where swap is configured (the
            // file exists only with swap accounting; its absence is no error).
            let _ = write(&child.dir.join("memory.swap.max"), "0");
        }
        write(
            &child.dir.join("cgroup.procs"),
            &std::process::id().to_string(),
        )?;
        Ok(child)
    }

    /// Moves the process back into `to` and removes this cgroup (its charges go
    /// with it), so that a finished soak leaves nothing behind.
    pub fn leave_into(&self, to: &Cgroup) -> CgroupResult<()> {
        write(
            &to.dir.join("cgroup.procs"),
            &std::process::id().to_string(),
        )?;
        fs::remove_dir(&self.dir).map_err(|e| format!("removing {}: {e}", self.dir.display()))
    }

    /// The limit that applies to this cgroup: its own or the tightest of its
    /// ancestors'. `None` when unlimited.
    pub fn limit(&self) -> Option<u64> {
        match self.version {
            Version::V1 => {
                let stat = read(self.dir.join("memory.stat")).ok()?;
                let v = stat_value(&stat, "hierarchical_memory_limit")?;
                // v1 reports "unlimited" as a page-rounded i64::MAX.
                (v < 1 << 62).then_some(v)
            }
            Version::V2 => {
                let mut dir = self.dir.as_path();
                let mut tightest: Option<u64> = None;
                while dir.starts_with(&self.mount) && dir != self.mount {
                    if let Some(v) = read_u64(dir.join("memory.max")) {
                        tightest = Some(tightest.map_or(v, |t| t.min(v)));
                    }
                    dir = dir.parent()?;
                }
                tightest
            }
        }
    }

    /// Memory charged to the cgroup now (process memory and page cache).
    pub fn usage(&self) -> Option<u64> {
        read_u64(self.dir.join(match self.version {
            Version::V1 => "memory.usage_in_bytes",
            Version::V2 => "memory.current",
        }))
    }

    /// The most memory ever charged to the cgroup, where the kernel keeps it.
    pub fn peak(&self) -> Option<u64> {
        read_u64(self.dir.join(match self.version {
            Version::V1 => "memory.max_usage_in_bytes",
            Version::V2 => "memory.peak",
        }))
    }

    /// Processes the kernel killed for memory in this cgroup.
    pub fn oom_kills(&self) -> Option<u64> {
        let file = match self.version {
            Version::V1 => "memory.oom_control",
            Version::V2 => "memory.events",
        };
        stat_value(&read(self.dir.join(file)).ok()?, "oom_kill")
    }
}

/// The memory hierarchy in `mountinfo`: its version, mount point and the root of
/// the mounted sub-tree. v1's memory controller wins where both are mounted: on a
/// hybrid machine v2 then has no memory controller.
fn memory_mount(mountinfo: &str) -> Option<(Version, PathBuf, String)> {
    let mut v2 = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(point), Some(fstype)) = (left.get(3), left.get(4), right.first())
        else {
            continue;
        };
        let options = right.get(2).copied().unwrap_or("");
        if *fstype == "cgroup" && options.split(',').any(|o| o == "memory") {
            return Some((Version::V1, PathBuf::from(point), root.to_string()));
        }
        if *fstype == "cgroup2" {
            let controllers = read(Path::new(point).join("cgroup.controllers")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "memory") {
                v2 = Some((Version::V2, PathBuf::from(point), root.to_string()));
            }
        }
    }
    v2
}

/// The value of `key` in a "key value" per line file (memory.stat, memory.events).
fn stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.trim().parse().ok())
}

fn read_u64(path: PathBuf) -> Option<u64> {
    read(path).ok()?.trim().parse().ok()
}

fn read(path: impl AsRef<Path>) -> CgroupResult<String> {
    let path = path.as_ref();
    fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

fn write(path: &Path, text: &str) -> CgroupResult<()> {
    fs::write(path, text).map_err(|e| format!("writing {text:?} to {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_hierarchy_is_found_on_hybrid_and_unified_machines() {
        let hybrid = "30 25 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n\
                      34 25 0:30 /job /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        let (v, mount, root) = memory_mount(hybrid).expect("v1 memory");
        assert_eq!(
            (v, mount, root.as_str()),
            (Version::V1, "/sys/fs/cgroup/memory".into(), "/job")
        );
        assert!(memory_mount("1 2 0:1 / /proc rw - proc proc rw\n").is_none());
    }

    #[test]
    fn stat_values_are_read_by_key() {
        let events = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n";
        assert_eq!(stat_value(events, "oom_kill"), Some(1));
        assert_eq!(stat_value(events, "max"), Some(12));
        assert_eq!(stat_value(events, "absent"), None);
    }
}
