//! A replica of a preference list as the machines see it.

/// A replica: a primary or a fallback, and the physical node that holds
/// it (any numbering; replicas with the same `node` are on one machine),
/// which `node_confirms` counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replica {
    pub primary: bool,
    pub node: u32,
}

impl Replica {
    /// Replicas each on a node of its own, primary or not as `primaries`
    /// says.
    pub fn each_on_own_node(primaries: &[bool]) -> Vec<Replica> {
        primaries
            .iter()
            .enumerate()
            .map(|(i, &primary)| Replica {
                primary,
                node: i as u32,
            })
            .collect()
    }
}

/// Distinct nodes among `replicas` whose index `counted` holds.
pub(crate) fn distinct_nodes(replicas: &[Replica], counted: impl Fn(usize) -> bool) -> u32 {
    let mut nodes: Vec<u32> = (0..replicas.len())
        .filter(|&i| counted(i))
        .map(|i| replicas[i].node)
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes.len() as u32
}
