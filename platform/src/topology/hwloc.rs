//! The `hwloc` feature: cores chosen from the hwloc topology (hwlocality bindings to
//! the system libhwloc).

use std::collections::HashMap;

use hwlocality::cpu::binding::CpuBindingFlags;
use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::memory::binding::{MemoryBindingFlags, MemoryBindingPolicy};
use hwlocality::memory::nodeset::NodeSet;
use hwlocality::object::types::ObjectType;
use hwlocality::Topology;

use super::{Basis, Placement};

/// Loads this machine's topology. Discovery takes a few milliseconds; it runs once
/// per placement, which the pool computes once per process.
/// A topology that hwloc was told to read from elsewhere (`HWLOC_XMLFILE`,
/// `HWLOC_SYNTHETIC`) does not describe the cores this process can pin to, so it is
/// refused like a failed load.
pub(super) fn load() -> Result<Topology, String> {
    let topology = Topology::new().map_err(|e| format!("hwloc topology load failed: {e}"))?;
    if !topology.is_this_system() {
        return Err("the hwloc topology does not describe this machine".to_owned());
    }
    Ok(topology)
}

/// The cores near the calling thread's memory: the nodes its memory policy binds it
/// to, or else the node it is running on (where first-touch puts its allocations).
pub(super) fn near_current_thread(topology: &Topology) -> Placement {
    let nodes = bound_nodes(topology).or_else(|| running_nodes(topology));
    match nodes {
        Some(nodes) => near_nodes(topology, &nodes),
        None => place(topology, &topology.cpuset(), Basis::AllCores),
    }
}

/// The cores of NUMA node `node` (by OS index); all cores if there is no such node.
pub(super) fn near_node(topology: &Topology, node: usize) -> Placement {
    let mut nodes = NodeSet::new();
    if node <= super::sysfs::MAX_CORE_ID {
        nodes.set(node);
    }
    near_nodes(topology, &nodes)
}

fn near_nodes(topology: &Topology, nodes: &NodeSet) -> Placement {
    let mut target = CpuSet::new();
    let mut found = Vec::new();
    for node in topology.nodes_from_nodeset(nodes) {
        if let (Some(cpus), Some(id)) = (node.cpuset(), node.os_index()) {
            target |= &*cpus;
            found.push(id);
        }
    }
    if found.is_empty() {
        return place(topology, &topology.cpuset(), Basis::AllCores);
    }
    place(topology, &target, Basis::Nodes(found))
}

/// The nodes the calling thread's memory is bound to, when its policy restricts it
/// to fewer than all of them.
fn bound_nodes(topology: &Topology) -> Option<NodeSet> {
    let (nodes, policy) = topology
        .memory_binding::<NodeSet>(MemoryBindingFlags::THREAD)
        .ok()?;
    let restricting = matches!(
        policy,
        Some(MemoryBindingPolicy::Bind | MemoryBindingPolicy::Interleave)
    );
    let all = topology.nodeset();
    (restricting && !nodes.is_empty() && nodes != *all).then_some(nodes)
}

/// The nodes whose CPUs the calling thread last ran on.
fn running_nodes(topology: &Topology) -> Option<NodeSet> {
    let here = topology.last_cpu_location(CpuBindingFlags::THREAD).ok()?;
    let mut nodes = NodeSet::new();
    for node in topology.objects_with_type(ObjectType::NUMANode) {
        if let (Some(cpus), Some(id)) = (node.cpuset(), node.os_index()) {
            if cpus.intersects(&here) {
                nodes.set(id);
            }
        }
    }
    (!nodes.is_empty()).then_some(nodes)
}

/// The CPUs this process may run on: its binding (the union over its threads) within
/// the topology's allowed set, or the topology's whole set when binding is unknown.
pub(super) fn allowed(topology: &Topology) -> CpuSet {
    let allowed = topology.allowed_cpuset().clone_target();
    match topology.cpu_binding(CpuBindingFlags::PROCESS) {
        Ok(bound) if bound.intersects(&allowed) => bound & &allowed,
        _ => allowed,
    }
}

/// `target`'s allowed cores, then the other allowed cores as spill; each part one PU
/// per physical core first.
fn place(topology: &Topology, target: &CpuSet, basis: Basis) -> Placement {
    place_within(topology, target, &allowed(topology), basis)
}

pub(super) fn place_within(
    topology: &Topology,
    target: &CpuSet,
    allowed: &CpuSet,
    basis: Basis,
) -> Placement {
    let near = target & allowed;
    if allowed.is_empty() {
        // Nothing in the topology matches what this process may run on: trust the
        // OS's affinity mask instead, so a placement is never empty.
        return Placement::os_order(super::allowed_cores());
    }
    if near.is_empty() {
        // The node's cores are all off limits (a cgroup cpuset elsewhere): locality
        // cannot be had, so use what the process may run on.
        return Placement {
            cores: physical_first(topology, allowed),
            spill: Vec::new(),
            basis: Basis::AllCores,
        };
    }
    Placement {
        cores: physical_first(topology, &near),
        spill: physical_first(topology, &(allowed - &near)),
        basis,
    }
}

/// The PUs of `set` (OS indices): the first PU of every physical core in topology
/// order, then every core's second PU, and so on. A PU with no Core above it counts
/// as a core of its own.
pub(super) fn physical_first(topology: &Topology, set: &CpuSet) -> Vec<usize> {
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    let mut seen_per_core: HashMap<u64, usize> = HashMap::new();
    for pu in topology.pus_from_cpuset(set) {
        let Some(id) = pu.os_index() else { continue };
        let core = pu
            .first_ancestor_with_type(ObjectType::Core)
            .unwrap_or(pu)
            .global_persistent_index();
        let rank = seen_per_core.entry(core).or_insert(0);
        if rounds.len() <= *rank {
            rounds.push(Vec::new());
        }
        rounds[*rank].push(id);
        *rank += 1;
    }
    rounds.concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two NUMA nodes of two cores with two PUs each: PUs 0,1 on core 0, 2,3 on
    /// core 1 (node 0); 4,5 and 6,7 on node 1.
    fn two_nodes() -> Topology {
        Topology::builder()
            .from_synthetic("numa:2 core:2 pu:2")
            .expect("synthetic description")
            .build()
            .expect("synthetic topology")
    }

    fn cpus(ids: &[usize]) -> CpuSet {
        let mut set = CpuSet::new();
        for &id in ids {
            set.set(id);
        }
        set
    }

    #[test]
    fn one_pu_per_physical_core_comes_before_smt_siblings() {
        let t = two_nodes();
        assert_eq!(
            physical_first(&t, &t.cpuset()),
            vec![0, 2, 4, 6, 1, 3, 5, 7]
        );
        assert_eq!(physical_first(&t, &cpus(&[1, 2, 3])), vec![1, 2, 3]);
    }

    #[test]
    fn a_node_placement_holds_its_cores_and_spills_to_the_others() {
        let t = two_nodes();
        let p = place_within(&t, &cpus(&[4, 5, 6, 7]), &t.cpuset(), Basis::Nodes(vec![1]));
        assert_eq!(p.cores(), &[4, 6, 5, 7]);
        assert_eq!(p.spill(), &[0, 2, 1, 3]);
        assert_eq!(p.basis(), &Basis::Nodes(vec![1]));
    }

    #[test]
    fn cores_outside_the_allowed_set_are_never_chosen() {
        let t = two_nodes();
        let p = place_within(
            &t,
            &cpus(&[0, 1, 2, 3]),
            &cpus(&[1, 3, 4]),
            Basis::Nodes(vec![0]),
        );
        assert_eq!(p.cores(), &[1, 3]);
        assert_eq!(p.spill(), &[4]);
        // A node whose cores are all off limits falls back to the allowed ones.
        let p = place_within(&t, &cpus(&[4, 5]), &cpus(&[0, 1]), Basis::Nodes(vec![1]));
        assert_eq!(p.cores(), &[0, 1]);
        assert_eq!(p.basis(), &Basis::AllCores);
    }

    #[test]
    fn synthetic_nodes_resolve_by_os_index() {
        let t = two_nodes();
        let mut nodes = NodeSet::new();
        nodes.set(1);
        let near: Vec<usize> = t
            .nodes_from_nodeset(&nodes)
            .filter_map(|n| n.os_index())
            .collect();
        assert_eq!(near, vec![1]);
    }
}
