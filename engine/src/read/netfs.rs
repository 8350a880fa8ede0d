//! Whether a file lies on a network (or user-space) file system, where another
//! machine or process can shrink it under a mapping: `Auto` never maps such a file.
//!
//! Linux only, from `/proc/self/mountinfo` (the mount whose mount point is the
//! longest prefix of the file's canonical path); elsewhere, or when that cannot be
//! read, the answer is "no", and `Auto` decides by page-cache residency as before.

use std::path::Path;

/// File system types whose files may change size without this machine knowing.
fn is_network_type(fstype: &str) -> bool {
    matches!(
        fstype,
        "nfs"
            | "nfs4"
            | "cifs"
            | "smb3"
            | "smbfs"
            | "ncpfs"
            | "ceph"
            | "9p"
            | "afs"
            | "lustre"
            | "glusterfs"
            | "gpfs"
            | "beegfs"
            | "fuse"
    ) || fstype.starts_with("fuse.")
}

/// Undoes mountinfo's octal escapes (`\040` for a space, and so on).
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut k = 0;
    while k < b.len() {
        let octal = b
            .get(k + 1..k + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[k], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                k += 4;
            }
            (c, _) => {
                out.push(c);
                k += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The type of the file system holding `path` (canonical) per `mountinfo`.
fn fs_type(path: &Path, mountinfo: &str) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    for line in mountinfo.lines() {
        let Some((head, tail)) = line.split_once(" - ") else {
            continue;
        };
        let (Some(mount_point), Some(fstype)) = (head.split(' ').nth(4), tail.split(' ').next())
        else {
            continue;
        };
        let mount_point = unescape(mount_point);
        let depth = mount_point.len();
        if path.starts_with(&mount_point) && best.as_ref().is_none_or(|(d, _)| depth >= *d) {
            best = Some((depth, fstype.to_string()));
        }
    }
    best.map(|(_, t)| t)
}

/// Whether the file at `path` is on a network or FUSE file system.
pub(crate) fn is_network(path: &Path) -> bool {
    if !cfg!(target_os = "linux") {
        return false;
    }
    let (Ok(canonical), Ok(info)) = (
        std::fs::canonicalize(path),
        std::fs::read_to_string("/proc/self/mountinfo"),
    ) else {
        return false;
    };
    fs_type(&canonical, &info).is_some_and(|t| is_network_type(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:35 / /mnt/data rw,relatime shared:20 - nfs4 server:/export rw,vers=4.2
41 22 0:36 / /mnt/data/local rw shared:21 - xfs /dev/sdb1 rw
42 22 0:37 / /mnt/my\\040bucket rw shared:22 - fuse.s3fs s3fs rw
43 22 0:38 / /mnt/nfsish rw shared:23 - tmpfs tmpfs rw
";

    #[test]
    fn the_longest_mount_point_prefix_decides() {
        let t = |p: &str| fs_type(Path::new(p), INFO);
        assert_eq!(t("/var/x.zr").as_deref(), Some("ext4"));
        assert_eq!(t("/mnt/data/x.zr").as_deref(), Some("nfs4"));
        assert_eq!(t("/mnt/data/local/x.zr").as_deref(), Some("xfs"));
        assert_eq!(t("/mnt/my bucket/x.zr").as_deref(), Some("fuse.s3fs"));
        // A path component prefix is not a mount point prefix.
        assert_eq!(t("/mnt/nfsish2/x.zr").as_deref(), Some("ext4"));
    }

    #[test]
    fn network_and_fuse_types_are_recognised() {
        for t in [
            "nfs",
            "nfs4",
            "cifs",
            "smb3",
            "ceph",
            "9p",
            "fuse",
            "fuse.sshfs",
        ] {
            assert!(is_network_type(t), "{t}");
        }
        for t in ["ext4", "xfs", "btrfs", "tmpfs", "overlay", "fuseblk"] {
            assert!(!is_network_type(t), "{t}");
        }
    }

    #[test]
    fn a_local_temporary_file_is_not_on_a_network_file_system() {
        let f = tempfile::NamedTempFile::new().expect("tempfile");
        // The test machine's temporary directory is local (tmpfs or a disk).
        assert!(!is_network(f.path()));
    }
}
