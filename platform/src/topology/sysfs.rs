//! What Linux sysfs says without hwloc: the NUMA node a file's block device hangs off,
//! the CPUs of a node, and the kernel's CPU-list syntax (`0-3,8,10-11`).
//!
//! Every lookup takes the sysfs root as an argument so tests can point it at a fake
//! tree; production passes [`SYSFS`].

use std::path::{Path, PathBuf};

use super::CoreListError;

/// Where sysfs is mounted.
pub(super) const SYSFS: &str = "/sys";

/// The largest CPU id a list may name. Linux's NR_CPUS tops out at 8192; the bound
/// keeps a hostile range such as `0-4000000000` from allocating gigabytes.
pub const MAX_CORE_ID: usize = 1 << 16;

/// How many stacked virtual devices (dm on md on a disk...) are followed down to a
/// physical one.
const MAX_STACK_DEPTH: usize = 8;

/// Parses a CPU list in the kernel's syntax: comma-separated ids and inclusive
/// `a-b` ranges, surrounding whitespace ignored. The order is kept as written, so
/// `ZRING_CORES=4,0` pins the first worker to core 4 and wraps to core 0 next.
///
/// # Errors
/// An empty list or entry, an entry that is not a number or range, a reversed range,
/// an id above [`MAX_CORE_ID`], or an id listed twice.
pub fn parse_core_list(text: &str) -> Result<Vec<usize>, CoreListError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(CoreListError::Empty);
    }
    let mut cores = Vec::new();
    for entry in text.split(',').map(str::trim) {
        let bad = || CoreListError::BadEntry(entry.to_owned());
        let (first, last) = match entry.split_once('-') {
            Some((a, b)) => (parse_id(a.trim(), entry)?, parse_id(b.trim(), entry)?),
            None if entry.is_empty() => return Err(bad()),
            None => {
                let id = parse_id(entry, entry)?;
                (id, id)
            }
        };
        if first > last {
            return Err(CoreListError::ReversedRange(entry.to_owned()));
        }
        for id in first..=last {
            if cores.contains(&id) {
                return Err(CoreListError::Duplicate(id));
            }
            cores.push(id);
        }
    }
    Ok(cores)
}

fn parse_id(text: &str, entry: &str) -> Result<usize, CoreListError> {
    let id: usize = text
        .parse()
        .map_err(|_| CoreListError::BadEntry(entry.to_owned()))?;
    if id > MAX_CORE_ID {
        return Err(CoreListError::TooLarge(id));
    }
    Ok(id)
}

/// The NUMA node of the block device that holds `path`, if sysfs tells. `None` for
/// files on devices with no node information (`numa_node` of -1, as on most VMs and
/// single-socket machines), on anonymous devices (tmpfs, overlayfs, btrfs subvolumes:
/// major 0), and off Linux.
pub(super) fn node_of_path(sys: &Path, path: &Path) -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(path).ok()?.dev();
        node_of_block_device(sys, libc::major(dev), libc::minor(dev))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (sys, path);
        None
    }
}

/// The NUMA node of block device `major:minor`: the first non-negative `numa_node`
/// found on the device (`device/numa_node`) or on the buses above it (a partition's
/// disk, a virtio device's PCI function, ...). A virtual device (device-mapper, md)
/// has the node of the devices under it (`slaves/`) when they all agree.
pub(super) fn node_of_block_device(sys: &Path, major: u32, minor: u32) -> Option<usize> {
    if major == 0 {
        return None;
    }
    let dir = sys.join(format!("dev/block/{major}:{minor}"));
    node_of_device_dir(sys, &dir, 0)
}

fn node_of_device_dir(sys: &Path, dir: &Path, depth: usize) -> Option<usize> {
    if depth > MAX_STACK_DEPTH {
        return None;
    }
    let dir = dir.canonicalize().ok()?;
    if let Some(node) = read_node(&dir.join("device/numa_node")) {
        return Some(node);
    }
    let devices = sys.canonicalize().ok()?.join("devices");
    let mut at: Option<&Path> = Some(&dir);
    while let Some(d) = at.filter(|d| d.starts_with(&devices) && *d != devices) {
        if let Some(node) =
            read_node(&d.join("numa_node")).or_else(|| read_node(&d.join("device/numa_node")))
        {
            return Some(node);
        }
        at = d.parent();
    }
    // A virtual device: follow what it is built on.
    let slaves = std::fs::read_dir(dir.join("slaves")).ok()?;
    let mut found = None;
    for slave in slaves.flatten() {
        let below = node_of_device_dir(sys, &slave.path(), depth + 1)?;
        match found {
            Some(node) if node != below => return None,
            _ => found = Some(below),
        }
    }
    found
}

/// A `numa_node` file's value when it names a node (the kernel writes -1 for "none").
fn read_node(file: &Path) -> Option<usize> {
    let text = std::fs::read_to_string(file).ok()?;
    usize::try_from(text.trim().parse::<i64>().ok()?).ok()
}

/// The CPUs of NUMA node `node` (`/sys/devices/system/node/nodeN/cpulist`), `None`
/// when the node does not exist or the list does not parse.
pub(super) fn node_cpus(sys: &Path, node: usize) -> Option<Vec<usize>> {
    let file: PathBuf = sys.join(format!("devices/system/node/node{node}/cpulist"));
    let text = std::fs::read_to_string(file).ok()?;
    if text.trim().is_empty() {
        // A memory-only node (CXL, HBM) has an empty list.
        return Some(Vec::new());
    }
    parse_core_list(&text).ok()
}

// The fake sysfs trees need unix symlinks.
#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn core_lists_parse_ids_and_ranges_in_written_order() {
        assert_eq!(parse_core_list("0,2,4"), Ok(vec![0, 2, 4]));
        assert_eq!(parse_core_list(" 4 , 0-2\n"), Ok(vec![4, 0, 1, 2]));
        assert_eq!(parse_core_list("7"), Ok(vec![7]));
        assert_eq!(parse_core_list("3-3"), Ok(vec![3]));
    }

    #[test]
    fn malformed_core_lists_are_rejected_with_the_offending_entry() {
        assert_eq!(parse_core_list(""), Err(CoreListError::Empty));
        assert_eq!(parse_core_list("  "), Err(CoreListError::Empty));
        assert_eq!(
            parse_core_list("0,,2"),
            Err(CoreListError::BadEntry(String::new()))
        );
        assert_eq!(
            parse_core_list("0,x"),
            Err(CoreListError::BadEntry("x".into()))
        );
        assert_eq!(
            parse_core_list("-1"),
            Err(CoreListError::BadEntry("-1".into()))
        );
        assert_eq!(
            parse_core_list("1-"),
            Err(CoreListError::BadEntry("1-".into()))
        );
        assert_eq!(
            parse_core_list("5-3"),
            Err(CoreListError::ReversedRange("5-3".into()))
        );
        assert_eq!(
            parse_core_list("0-4000000000"),
            Err(CoreListError::TooLarge(4_000_000_000))
        );
        assert_eq!(parse_core_list("0-3,2"), Err(CoreListError::Duplicate(2)));
    }

    /// A fake sysfs: disk vda (254:0) with partition vda1 (254:1) on a virtio device
    /// under PCI function 0000:00:02.0 of node `pci_node`, and dm-0 (253:0) on vda1.
    fn fake_sysfs(pci_node: &str) -> tempfile::TempDir {
        let root = tempfile::tempdir().expect("tempdir");
        let sys = root.path();
        let pci = sys.join("devices/pci0000:00/0000:00:02.0");
        let vda = pci.join("virtio1/block/vda");
        fs::create_dir_all(vda.join("vda1")).expect("mkdir");
        fs::write(pci.join("numa_node"), pci_node).expect("write");
        std::os::unix::fs::symlink("../../../virtio1", vda.join("device")).expect("link");
        let dm = sys.join("devices/virtual/block/dm-0");
        fs::create_dir_all(dm.join("slaves")).expect("mkdir");
        fs::create_dir_all(sys.join("dev/block")).expect("mkdir");
        fs::create_dir_all(sys.join("class/block")).expect("mkdir");
        let up = "../../devices/pci0000:00/0000:00:02.0/virtio1/block/vda";
        std::os::unix::fs::symlink(up, sys.join("dev/block/254:0")).expect("link");
        std::os::unix::fs::symlink(format!("{up}/vda1"), sys.join("dev/block/254:1"))
            .expect("link");
        std::os::unix::fs::symlink(
            "../../devices/virtual/block/dm-0",
            sys.join("dev/block/253:0"),
        )
        .expect("link");
        let vda1 = "../../../../pci0000:00/0000:00:02.0/virtio1/block/vda/vda1";
        std::os::unix::fs::symlink(vda1, dm.join("slaves/vda1")).expect("link");
        let node1 = sys.join("devices/system/node/node1");
        fs::create_dir_all(&node1).expect("mkdir");
        fs::write(node1.join("cpulist"), "2-3,6\n").expect("write");
        root
    }

    #[test]
    fn a_disk_its_partition_and_a_mapper_on_it_share_the_pci_devices_node() {
        let root = fake_sysfs("1\n");
        let sys = root.path();
        assert_eq!(node_of_block_device(sys, 254, 0), Some(1));
        assert_eq!(node_of_block_device(sys, 254, 1), Some(1));
        assert_eq!(node_of_block_device(sys, 253, 0), Some(1));
    }

    #[test]
    fn unknown_nodes_and_missing_or_anonymous_devices_give_none() {
        let root = fake_sysfs("-1\n");
        let sys = root.path();
        assert_eq!(node_of_block_device(sys, 254, 0), None);
        assert_eq!(node_of_block_device(sys, 253, 0), None);
        assert_eq!(node_of_block_device(sys, 8, 0), None);
        assert_eq!(node_of_block_device(sys, 0, 42), None);
    }

    #[test]
    fn node_cpus_reads_the_nodes_cpulist() {
        let root = fake_sysfs("1");
        assert_eq!(node_cpus(root.path(), 1), Some(vec![2, 3, 6]));
        assert_eq!(node_cpus(root.path(), 0), None);
    }

    #[test]
    fn a_real_file_resolves_without_error() {
        // Whatever this machine's sysfs says, the lookup must not fail loudly, and a
        // node it names must exist.
        if let Some(node) = node_of_path(Path::new(SYSFS), Path::new("Cargo.toml")) {
            assert!(node_cpus(Path::new(SYSFS), node).is_some());
        }
    }
}
