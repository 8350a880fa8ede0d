//! Which cores the worker pool pins its threads to: a [`Placement`].
//!
//! A placement is an ordered list of core ids (OS CPU numbers, as `taskset` and
//! `/proc/cpuinfo` number them). Pool worker `k` is pinned to `placement.core(k + 1)`,
//! leaving the first core to the calling thread, as before placements existed.
//!
//! # What is chosen, and why
//!
//! - **Without the `hwloc` feature**, [`Placement::default`] is every core this thread
//!   may run on (its affinity mask, via core_affinity) in the OS's order: exactly the
//!   pinning zring did before this module. No topology is read.
//! - **With `hwloc`**, the topology is loaded (libhwloc) and the placement is the
//!   cores of the NUMA node(s) holding the calling thread's memory: the nodes its
//!   memory policy binds it to (`numactl --membind`), or else the node it is running
//!   on, where Linux's first-touch policy puts what it allocates. Workers on those
//!   cores write the caller's destination buffers and read the page cache without
//!   crossing the socket interconnect. On a single-node machine that is every core.
//!   Within the node, one PU per physical core comes first and SMT siblings last: a
//!   sibling shares its core's execution units and caches with the first PU, so it
//!   adds far less decode throughput than a core of its own.
//! - [`Placement::near_path`] chooses the node of the block device holding a file
//!   (its `numa_node` in sysfs: `/sys/dev/block/MAJ:MIN/device/numa_node`, or the
//!   bus above it), so workers submitting and completing its reads sit next to the
//!   device's interrupts and DMA. The device lookup is plain sysfs and works without
//!   hwloc; the node's cores come from hwloc with the feature and from
//!   `/sys/devices/system/node/nodeN/cpulist` without it.
//! - The other allowed cores are kept as [`Placement::spill`], used (same order) only
//!   when more workers are asked for than the placement has cores
//!   (`ZRING_THREADS` above it), so extra workers never double up on a core while
//!   another sits idle.
//! - `ZRING_CORES=0,2,4` (kernel list syntax, ranges allowed: `0-3,8`) replaces the
//!   choice with exactly those cores, in that order, and nothing else (read once into
//!   [`Config`](crate::Config), then [`Placement::from_list_or_default`]).
//!
//! # Degrading
//!
//! Pinning is an optimisation, never a requirement. When the topology cannot be
//! loaded, one line on stderr says so and the placement is the no-feature one. When a
//! device's node is unknown (`numa_node` of -1, as on most VMs; tmpfs, overlayfs),
//! the placement is the default one. An invalid `ZRING_CORES` (bad syntax, a
//! duplicate, or a core this process may not run on) is ignored as a whole with one
//! line on stderr naming the problem: pinning to a silently trimmed subset would
//! hide the typo behind a slowdown.

#[cfg(feature = "hwloc")]
mod hwloc;
mod sysfs;

use std::fmt;
use std::path::Path;

pub use sysfs::{parse_core_list, MAX_CORE_ID};

/// The environment variable that lists the cores explicitly.
pub const CORES_ENV: &str = "ZRING_CORES";

/// What a [`Placement`]'s cores were chosen by.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Basis {
    /// Every core the process may run on; no locality information was used (no
    /// `hwloc` feature, topology unavailable, or the node unknown).
    AllCores,
    /// The cores of these NUMA nodes (OS indices).
    Nodes(Vec<usize>),
    /// An explicit list (`ZRING_CORES` or [`Placement::explicit`]).
    Explicit,
}

/// An ordered, duplicate-free, non-empty list of cores to pin pool workers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    cores: Vec<usize>,
    spill: Vec<usize>,
    basis: Basis,
}

/// Why a core list was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CoreListError {
    /// The list is empty.
    Empty,
    /// An entry is neither a core id nor an `a-b` range.
    BadEntry(String),
    /// A range ends before it starts.
    ReversedRange(String),
    /// A core id above 65536 (a bound that keeps a hostile range such as
    /// `0-4000000000` from allocating gigabytes).
    TooLarge(usize),
    /// A core listed twice.
    Duplicate(usize),
    /// A core this process may not run on (offline, or outside its affinity mask).
    NotAllowed {
        /// The core listed.
        core: usize,
        /// The cores the process may run on.
        allowed: Vec<usize>,
    },
}

impl fmt::Display for CoreListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "the core list is empty"),
            Self::BadEntry(e) => write!(f, "{e:?} is not a core id or an a-b range"),
            Self::ReversedRange(e) => write!(f, "range {e:?} ends before it starts"),
            Self::TooLarge(c) => write!(f, "core {c} is above the limit of {MAX_CORE_ID}"),
            Self::Duplicate(c) => write!(f, "core {c} is listed twice"),
            Self::NotAllowed { core, allowed } => write!(
                f,
                "this process may not run on core {core} (it may run on {})",
                join(allowed)
            ),
        }
    }
}

impl std::error::Error for CoreListError {}

impl Placement {
    /// The cores to pin to, best first.
    pub fn cores(&self) -> &[usize] {
        &self.cores
    }

    /// The number of chosen cores (never 0).
    pub fn len(&self) -> usize {
        self.cores.len()
    }

    /// Always false: a placement has at least one core. Present for API symmetry.
    pub fn is_empty(&self) -> bool {
        self.cores.is_empty()
    }

    /// The other cores the process may run on, best first, used only past
    /// [`Placement::cores`] (empty for explicit lists and without topology).
    pub fn spill(&self) -> &[usize] {
        &self.spill
    }

    /// What chose the cores.
    pub fn basis(&self) -> &Basis {
        &self.basis
    }

    /// The core for the `k`-th thread: the chosen cores, then the spill, then round
    /// again.
    pub fn core(&self, k: usize) -> usize {
        let k = k % (self.cores.len() + self.spill.len());
        match self.cores.get(k) {
            Some(&c) => c,
            None => self.spill[k - self.cores.len()],
        }
    }

    /// The cores near the NUMA node of the block device holding `path` (see the
    /// module docs); [`Placement::default`] when that node is unknown.
    pub fn near_path(path: impl AsRef<Path>) -> Self {
        let sys = Path::new(sysfs::SYSFS);
        match sysfs::node_of_path(sys, path.as_ref()) {
            Some(node) => Self::near_node(node),
            None => Self::default(),
        }
    }

    /// The cores of NUMA node `node` (OS index), spilling to the others;
    /// [`Placement::default`] when the node has no core this process may run on.
    pub fn near_node(node: usize) -> Self {
        #[cfg(feature = "hwloc")]
        match hwloc::load() {
            Ok(topology) => {
                let p = hwloc::near_node(&topology, node);
                if p.basis != Basis::AllCores {
                    return p;
                }
                return hwloc::near_current_thread(&topology);
            }
            Err(e) => note_topology_unavailable(&e),
        }
        let allowed = allowed_cores();
        let Some(node_cpus) = sysfs::node_cpus(Path::new(sysfs::SYSFS), node) else {
            return Self::os_order(allowed);
        };
        let (cores, spill): (Vec<usize>, Vec<usize>) =
            allowed.iter().partition(|c| node_cpus.contains(c));
        if cores.is_empty() {
            return Self::os_order(allowed);
        }
        Self {
            cores,
            spill,
            basis: Basis::Nodes(vec![node]),
        }
    }

    /// Exactly the cores of `list` (kernel list syntax, e.g. `0,2,4` or `0-3,8`), in
    /// that order.
    ///
    /// # Errors
    /// A malformed list (empty, not numbers or `a-b` ranges, reversed, too large, or
    /// with a core listed twice: see [`CoreListError`]) or a core this process may not run
    /// on ([`CoreListError::NotAllowed`]).
    pub fn explicit(list: &str) -> Result<Self, CoreListError> {
        let cores = parse_core_list(list)?;
        let allowed = allowed_cores();
        if let Some(&core) = cores.iter().find(|c| !allowed.contains(c)) {
            return Err(CoreListError::NotAllowed { core, allowed });
        }
        Ok(Self {
            cores,
            spill: Vec::new(),
            basis: Basis::Explicit,
        })
    }

    /// The placement listed by `list` (kernel list syntax) when given and valid, else
    /// [`Placement::default`]; an invalid list is ignored with one line on stderr.
    pub fn from_list_or_default(list: Option<&str>) -> Self {
        match list.map(|l| (l, Self::explicit(l))) {
            Some((_, Ok(p))) => p,
            Some((l, Err(e))) => {
                eprintln!("zring: ignoring {CORES_ENV}={l:?}: {e}; using the default placement");
                Self::default()
            }
            None => Self::default(),
        }
    }

    fn os_order(cores: Vec<usize>) -> Self {
        Self {
            cores,
            spill: Vec::new(),
            basis: Basis::AllCores,
        }
    }
}

impl Default for Placement {
    /// Near the calling thread's memory with `hwloc`; the OS's core order without it
    /// (see the module docs).
    fn default() -> Self {
        #[cfg(feature = "hwloc")]
        match hwloc::load() {
            Ok(topology) => return hwloc::near_current_thread(&topology),
            Err(e) => note_topology_unavailable(&e),
        }
        Self::os_order(allowed_cores())
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cores {}", join(&self.cores))?;
        match &self.basis {
            Basis::AllCores => write!(f, " (all)")?,
            Basis::Nodes(n) => write!(f, " (NUMA node {})", join(n))?,
            Basis::Explicit => write!(f, " ({CORES_ENV})")?,
        }
        if !self.spill.is_empty() {
            write!(f, ", then {}", join(&self.spill))?;
        }
        Ok(())
    }
}

/// The cores this thread may run on, in the OS's order; `0..available_cores()` when
/// the mask cannot be read (pinning will then fail harmlessly too).
pub fn allowed_cores() -> Vec<usize> {
    match core_affinity::get_core_ids() {
        Some(ids) if !ids.is_empty() => ids.into_iter().map(|c| c.id).collect(),
        _ => (0..crate::cpu::available_cores()).collect(),
    }
}

#[cfg(feature = "hwloc")]
fn note_topology_unavailable(reason: &str) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static NOTED: AtomicBool = AtomicBool::new(false);
    if !NOTED.swap(true, Ordering::Relaxed) {
        eprintln!("zring: {reason}; pinning workers in the OS's core order");
    }
}

fn join(ids: &[usize]) -> String {
    ids.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The invariants every placement keeps, whatever chose it.
    fn assert_sound(p: &Placement) {
        let allowed = allowed_cores();
        assert!(!p.is_empty(), "{p}");
        assert_eq!(p.len(), p.cores().len());
        let all: Vec<usize> = p.cores().iter().chain(p.spill()).copied().collect();
        for (i, c) in all.iter().enumerate() {
            assert!(
                allowed.contains(c),
                "core {c} of {p} is outside {allowed:?}"
            );
            assert!(!all[..i].contains(c), "core {c} of {p} is listed twice");
        }
    }

    #[test]
    fn the_default_placement_is_nonempty_allowed_and_duplicate_free() {
        let p = Placement::default();
        assert_sound(&p);
        // Every allowed core is either chosen or spill: none is lost.
        assert_eq!(p.cores().len() + p.spill().len(), allowed_cores().len());
        #[cfg(not(feature = "hwloc"))]
        {
            assert_eq!(p.cores(), allowed_cores());
            assert_eq!(p.basis(), &Basis::AllCores);
        }
    }

    #[test]
    fn near_path_on_a_real_file_gives_a_sound_placement() {
        let p = Placement::near_path(env!("CARGO_MANIFEST_PATH"));
        assert_sound(&p);
        let q = Placement::near_path("/definitely/not/a/file");
        assert_sound(&q);
    }

    #[test]
    fn an_unknown_node_falls_back_to_the_default() {
        let p = Placement::near_node(MAX_CORE_ID);
        assert_sound(&p);
        // The default: the calling thread's node(s) with hwloc, all cores without.
        assert!(
            !matches!(p.basis(), Basis::Nodes(n) if n.contains(&MAX_CORE_ID)),
            "{p}"
        );
        assert_eq!(p.cores().len() + p.spill().len(), allowed_cores().len());
    }

    #[test]
    fn node_zero_holds_only_its_own_cores() {
        // Node 0 exists on every Linux machine; its cores may still all be outside
        // this process's mask, in which case the default is used.
        let p = Placement::near_node(0);
        assert_sound(&p);
        if let (Basis::Nodes(nodes), Some(cpus)) =
            (p.basis(), sysfs::node_cpus(Path::new(sysfs::SYSFS), 0))
        {
            assert_eq!(nodes, &vec![0]);
            assert!(p.cores().iter().all(|c| cpus.contains(c)), "{p}");
        }
    }

    #[test]
    fn an_explicit_list_is_kept_exactly_in_its_order() {
        let allowed = allowed_cores();
        let reversed: Vec<usize> = allowed.iter().rev().copied().collect();
        let p = Placement::explicit(&join(&reversed)).expect("allowed cores");
        assert_eq!(p.cores(), reversed);
        assert!(p.spill().is_empty());
        assert_eq!(p.basis(), &Basis::Explicit);
        assert_sound(&p);
    }

    #[test]
    fn an_explicit_list_naming_a_forbidden_core_is_refused() {
        let allowed = allowed_cores();
        let outside = (0..=MAX_CORE_ID)
            .find(|c| !allowed.contains(c))
            .expect("some core id is not allowed");
        let err = Placement::explicit(&format!("{},{outside}", allowed[0]))
            .expect_err("core outside the mask");
        assert_eq!(
            err,
            CoreListError::NotAllowed {
                core: outside,
                allowed: allowed.clone()
            }
        );
        assert!(
            err.to_string().contains(&format!("core {outside}")),
            "{err}"
        );
    }

    #[test]
    fn invalid_zring_cores_is_ignored_for_the_default_and_valid_is_obeyed() {
        for list in [
            None,
            Some(""),
            Some("0,,1"),
            Some("x"),
            Some("3-1"),
            Some("0,0"),
        ] {
            let p = Placement::from_list_or_default(list);
            assert_sound(&p);
            assert_ne!(p.basis(), &Basis::Explicit, "{list:?}");
        }
        let first = allowed_cores()[0];
        let p = Placement::from_list_or_default(Some(&format!(" {first} ")));
        assert_eq!(p.cores(), &[first]);
    }

    #[test]
    fn threads_past_the_chosen_cores_spill_then_wrap() {
        let p = Placement {
            cores: vec![4, 6],
            spill: vec![0, 2],
            basis: Basis::Nodes(vec![1]),
        };
        let order: Vec<usize> = (0..6).map(|k| p.core(k)).collect();
        assert_eq!(order, vec![4, 6, 0, 2, 4, 6]);
        assert_eq!(p.to_string(), "cores 4,6 (NUMA node 1), then 0,2");
        let e = Placement {
            cores: vec![3],
            spill: Vec::new(),
            basis: Basis::Explicit,
        };
        assert_eq!((e.core(0), e.core(5)), (3, 3));
        assert_eq!(e.to_string(), "cores 3 (ZRING_CORES)");
    }

    /// With hwloc: a topology that cannot be loaded costs one line on stderr and
    /// leaves the no-feature placement. Run in a child process, because the failure
    /// is provoked through hwloc's environment (no discovery component allowed).
    #[cfg(feature = "hwloc")]
    #[test]
    fn a_topology_load_failure_falls_back_to_the_os_order_with_one_note() {
        const CHILD: &str = "ZRING_TOPOLOGY_TEST_CHILD";
        if std::env::var_os(CHILD).is_some() {
            let p = Placement::default();
            assert_eq!(p.cores(), allowed_cores());
            assert_eq!(p.basis(), &Basis::AllCores);
            let _ = Placement::near_path(env!("CARGO_MANIFEST_PATH"));
            return;
        }
        let out = zring_testkit::rerun_test(
            "topology::tests::a_topology_load_failure_falls_back_to_the_os_order_with_one_note",
        )
        .env(CHILD, "1")
        .env("HWLOC_COMPONENTS", "-linux,-x86,-no_os")
        .output()
        .expect("run the child test");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
        assert!(
            stdout.contains("1 passed"),
            "the child ran no test:\n{stdout}"
        );
        let notes = stderr.matches("zring: hwloc topology load failed").count();
        assert_eq!(notes, 1, "stderr:\n{stderr}");
    }

    /// With hwloc: the placement lies in the machine's cpuset, and once an SMT
    /// sibling appears among the chosen cores, only siblings follow.
    #[cfg(feature = "hwloc")]
    #[test]
    fn hwloc_cores_lie_in_the_machines_cpuset_with_smt_siblings_last() {
        use hwlocality::object::types::ObjectType;
        let topology = hwloc::load().expect("hwloc loads on this machine");
        let p = Placement::default();
        assert_sound(&p);
        assert!(matches!(p.basis(), Basis::Nodes(_)), "{p}");
        let machine = topology.cpuset();
        let mut seen_cores = Vec::new();
        let mut sibling_seen = false;
        for &c in p.cores() {
            assert!(machine.is_set(c), "core {c} is not in the machine's cpuset");
            let pu = topology.pu_with_os_index(c).expect("a PU per core id");
            let core = pu
                .first_ancestor_with_type(ObjectType::Core)
                .unwrap_or(pu)
                .global_persistent_index();
            let is_sibling = seen_cores.contains(&core);
            assert!(
                is_sibling || !sibling_seen,
                "a first PU after a sibling in {p}"
            );
            sibling_seen |= is_sibling;
            seen_cores.push(core);
        }
    }
}
