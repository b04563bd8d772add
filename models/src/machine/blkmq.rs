//! blk-mq queues and their interrupts as data: which hardware queue each
//! CPU submits to, which CPU each queue's interrupt vector targets, and the
//! NVMe interrupt coalescing parameters.
//!
//! A device has one or more hardware queues ([`HostQueues`]), each a
//! [`Port`]: its tags, the requests waiting for a tag, and its interrupt
//! state. blk-mq gives every CPU a software queue mapped to one hardware
//! queue (`queue_of_cpu`); a request goes to the hardware queue of the CPU
//! that submits it.
//!
//! - AHCI (and md, pmem, ...): one hardware queue whose interrupt runs on
//!   the stack's IRQ CPU ([`HostQueues::single`]).
//! - NVMe: N submission/completion queue pairs of `depth` commands each,
//!   one MSI-X vector per completion queue ([`HostQueues::nvme`]). The
//!   default is Linux's managed affinity: `irq_create_affinity_masks`
//!   spreads the I/O vectors over the CPUs with [`group_cpus_evenly`]
//!   (kernel/irq/affinity.c, lib/group_cpus.c); `blk_mq_map_hw_queues`
//!   (formerly `blk_mq_pci_map_queues`, block/blk-mq-cpumap.c) maps each
//!   CPU of vector `q`'s mask to hardware queue `q`; the x86 vector matrix
//!   picks the CPU the vector targets inside that mask
//!   ([`VectorMatrix::alloc_managed`], kernel/irq/matrix.c). So a
//!   completion is handled on a CPU of the submitting CPU's group.
//!
//! [`group_cpus_evenly`] follows lib/group_cpus.c without the cluster pass
//! recent kernels added (on x86 parts whose L2 is per core a cluster is one
//! core's SMT siblings, and the cluster pass is skipped whenever there are
//! fewer groups than cores in a node). NUMA nodes are the sockets; every
//! possible CPU is present (no second stage).
//!
//! Interrupt coalescing is the NVMe Set Features Interrupt Coalescing
//! feature (08h, NVMe base specification 1.4 section 5.21.1.8): the
//! controller may delay a vector's interrupt until `threshold` entries are
//! posted or `time` has passed. Linux's nvme driver never sets it, so the
//! default is off.

use crate::machine::ahci::Port;

/// CPU topology as the affinity code sees it: sockets (one NUMA node each)
/// x cores x SMT threads, numbered as Linux numbers x86 CPUs (first one
/// thread of every core, then the second threads; see `topology.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuLayout {
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
}

impl CpuLayout {
    pub fn cpus(&self) -> u32 {
        self.sockets * self.cores_per_socket * self.threads_per_core
    }

    fn cores(&self) -> u32 {
        self.sockets * self.cores_per_socket
    }

    /// `cpu_to_node`.
    fn node_of(&self, cpu: u32) -> u32 {
        (cpu % self.cores()) / self.cores_per_socket
    }

    /// `topology_sibling_cpumask`, ascending (includes `cpu`).
    fn siblings(&self, cpu: u32) -> impl Iterator<Item = u32> {
        let core = cpu % self.cores();
        let cores = self.cores();
        (0..self.threads_per_core).map(move |t| t * cores + core)
    }
}

/// A CPU set as a sorted bitmap over `0..cpus`.
#[derive(Debug, Clone)]
struct Mask(Vec<bool>);

impl Mask {
    fn first(&self) -> Option<u32> {
        self.0.iter().position(|&b| b).map(|i| i as u32)
    }
    fn test_and_clear(&mut self, cpu: u32) -> bool {
        std::mem::replace(&mut self.0[cpu as usize], false)
    }
    fn weight(&self) -> u32 {
        self.0.iter().filter(|&&b| b).count() as u32
    }
}

/// lib/sort.c `sort()`: the kernel's bottom-up heapsort. Not stable; its
/// order of equal keys decides which NUMA node gets the larger share of
/// groups, so it is reproduced step by step.
fn linux_sort<T>(v: &mut [T], cmp: impl Fn(&T, &T) -> i64) {
    let num = v.len();
    let (mut n, mut a) = (num, num / 2);
    if a == 0 {
        return;
    }
    let parent = |i: usize| (i - 1) / 2;
    loop {
        if a > 0 {
            a -= 1;
        } else {
            n -= 1;
            if n == 0 {
                break;
            }
            v.swap(0, n);
        }
        let mut b = a;
        let (mut c, mut d);
        loop {
            c = 2 * b + 1;
            d = c + 1;
            if d >= n {
                break;
            }
            b = if cmp(&v[c], &v[d]) >= 0 { c } else { d };
        }
        if d == n {
            b = c;
        }
        while b != a && cmp(&v[a], &v[b]) >= 0 {
            b = parent(b);
        }
        let c = b;
        while b != a {
            b = parent(b);
            v.swap(b, c);
        }
    }
}

/// `struct node_groups`: a node and its CPU count, then its group count.
#[derive(Debug, Clone, Copy)]
struct NodeGroups {
    id: u32,
    ncpus: u32,
    ngroups: u32,
}

/// `alloc_groups_to_nodes` (every node has CPUs here): sorts the nodes by
/// CPU count and gives each `max(1, numgrps * ncpus / remaining_ncpus)`.
fn alloc_groups_to_nodes(mut numgrps: u32, numcpus: u32, nodes: &mut [NodeGroups]) {
    linux_sort(nodes, |l, r| i64::from(l.ncpus) - i64::from(r.ncpus));
    let mut remaining = numcpus;
    for n in nodes.iter_mut() {
        let ngroups = (numgrps * n.ncpus / remaining).max(1);
        assert!(ngroups <= n.ncpus, "a node got more groups than CPUs");
        n.ngroups = ngroups;
        remaining -= n.ncpus;
        numgrps -= ngroups;
    }
}

/// `grp_spread_init_one`: takes `cpus_per_grp` CPUs from `nmsk` into
/// `group`, each CPU followed by its free SMT siblings.
fn grp_spread_init_one(layout: &CpuLayout, group: &mut Vec<u32>, nmsk: &mut Mask, mut n: u32) {
    while n > 0 {
        let Some(cpu) = nmsk.first() else { return };
        nmsk.test_and_clear(cpu);
        group.push(cpu);
        n -= 1;
        for sibl in layout.siblings(cpu) {
            if n == 0 {
                break;
            }
            if nmsk.test_and_clear(sibl) {
                group.push(sibl);
                n -= 1;
            }
        }
    }
}

/// `group_cpus_evenly(numgrps)`: `numgrps` groups of CPUs, close CPUs
/// (same node, SMT siblings) together. Every CPU is in exactly one group;
/// with more groups than CPUs the extra groups are empty. Each group is
/// returned sorted.
pub fn group_cpus_evenly(layout: &CpuLayout, numgrps: u32) -> Vec<Vec<u32>> {
    assert!(numgrps > 0 && layout.cpus() > 0);
    let mut masks: Vec<Vec<u32>> = vec![Vec::new(); numgrps as usize];
    let node_mask = |n: u32| Mask((0..layout.cpus()).map(|c| layout.node_of(c) == n).collect());
    let nodes = layout.sockets;
    let mut curgrp = 0usize;
    if numgrps <= nodes {
        // Fewer groups than nodes: whole nodes per group, round robin.
        for n in 0..nodes {
            masks[curgrp].extend((0..layout.cpus()).filter(|&c| layout.node_of(c) == n));
            curgrp = (curgrp + 1) % numgrps as usize;
        }
    } else {
        let mut ng: Vec<NodeGroups> = (0..nodes)
            .map(|id| NodeGroups {
                id,
                ncpus: node_mask(id).weight(),
                ngroups: 0,
            })
            .collect();
        let numcpus = layout.cpus();
        alloc_groups_to_nodes(numgrps.min(numcpus), numcpus, &mut ng);
        for nv in &ng {
            // assign_cpus_to_groups
            let mut nmsk = node_mask(nv.id);
            let ncpus = nmsk.weight();
            let mut extra = ncpus - nv.ngroups * (ncpus / nv.ngroups);
            for _ in 0..nv.ngroups {
                let mut per = ncpus / nv.ngroups;
                if extra > 0 {
                    per += 1;
                    extra -= 1;
                }
                if curgrp >= numgrps as usize {
                    curgrp = 0;
                }
                grp_spread_init_one(layout, &mut masks[curgrp], &mut nmsk, per);
                curgrp += 1;
            }
        }
    }
    for m in &mut masks {
        m.sort_unstable();
    }
    masks
}

/// `blk_mq_map_hw_queues`: every CPU of group `q` submits to hardware
/// queue `q`.
pub fn queue_of_cpu(groups: &[Vec<u32>], cpus: u32) -> Vec<u16> {
    let mut map = vec![u16::MAX; cpus as usize];
    for (q, g) in groups.iter().enumerate() {
        for &c in g {
            map[c as usize] = q as u16;
        }
    }
    assert!(
        map.iter().all(|&q| q != u16::MAX),
        "every CPU maps to a queue"
    );
    map
}

/// The x86 vector matrix's count of managed vectors per CPU
/// (`cpumap::managed_allocated`), shared by every device of the machine.
#[derive(Debug, Clone)]
pub struct VectorMatrix {
    managed_allocated: Vec<u32>,
}

impl VectorMatrix {
    pub fn new(cpus: u32) -> VectorMatrix {
        VectorMatrix {
            managed_allocated: vec![0; cpus as usize],
        }
    }

    /// `irq_matrix_alloc_managed` via `matrix_find_best_cpu_managed`: the
    /// CPU of `mask` with the fewest managed vectors; on a tie the last one
    /// (the kernel compares with `>`).
    pub fn alloc_managed(&mut self, mask: &[u32]) -> u32 {
        let mut best: Option<(u32, u32)> = None;
        for &c in mask {
            let a = self.managed_allocated[c as usize];
            if best.is_some_and(|(_, b)| a > b) {
                continue;
            }
            best = Some((c, a));
        }
        let (cpu, _) = best.expect("a vector's mask holds a CPU");
        self.managed_allocated[cpu as usize] += 1;
        cpu
    }
}

/// NVMe interrupt coalescing (Set Features 08h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Coalescing {
    /// Aggregation time: the longest an interrupt is delayed (TIME, in
    /// 100 us units in the command; here in ns).
    pub time_ns: u64,
    /// Completion entries that trigger the interrupt at once (THR + 1:
    /// the command's field is 0's based).
    pub threshold_entries: u32,
}

impl Coalescing {
    /// From the Set Features fields: TIME in 100 us units, THR 0's based.
    pub fn from_feature(time_100us: u8, thr: u8) -> Coalescing {
        Coalescing {
            time_ns: u64::from(time_100us) * 100_000,
            threshold_entries: u32::from(thr) + 1,
        }
    }

    /// Whether interrupts may be delayed at all (a zero time or a one-entry
    /// threshold signals every completion at once).
    pub fn is_on(&self) -> bool {
        self.time_ns > 0 && self.threshold_entries > 1
    }

    /// Whether `pending` posted entries signal the interrupt now.
    pub fn fires(&self, pending: usize) -> bool {
        !self.is_on() || pending >= self.threshold_entries as usize
    }
}

/// What one hardware queue did (for the report).
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueStats {
    pub commands: u64,
    pub interrupts: u64,
    /// CPU time of its interrupt handler.
    pub handler_ns: u64,
    /// The CPU its handler last ran on.
    pub handler_cpu: Option<usize>,
}

/// How an NVMe device's queues are set up.
#[derive(Debug, Clone, Copy)]
pub struct NvmeQueues {
    /// I/O queue pairs (one MSI-X vector each).
    pub queues: u32,
    /// Commands per queue.
    pub depth: u32,
    pub coalescing: Coalescing,
}

/// A device's hardware queues.
#[derive(Debug)]
pub struct HostQueues {
    pub hw: Vec<Port>,
    /// Tags per queue: the device sees tag `q * depth + tag`.
    depth: u32,
    /// Hardware queue of each CPU (empty: one queue for all).
    cpu_queue: Vec<u16>,
    /// CPUs of each queue's group (empty for a single queue).
    groups: Vec<Vec<u32>>,
    /// CPU each queue's vector targets (`None`: the stack's IRQ CPU).
    vector_cpu: Vec<Option<usize>>,
    pub coalescing: Coalescing,
    pub stats: Vec<QueueStats>,
}

impl HostQueues {
    /// One queue of `tags` tags, interrupting the stack's IRQ CPU (AHCI).
    pub fn single(tags: u32, waiting_max: usize) -> HostQueues {
        HostQueues {
            hw: vec![Port::new(tags, waiting_max)],
            depth: tags,
            cpu_queue: Vec::new(),
            groups: Vec::new(),
            vector_cpu: vec![None],
            coalescing: Coalescing::default(),
            stats: vec![QueueStats::default()],
        }
    }

    /// NVMe queue pairs with managed affinity on `layout`.
    pub fn nvme(
        layout: &CpuLayout,
        q: NvmeQueues,
        matrix: &mut VectorMatrix,
        waiting_max: usize,
    ) -> HostQueues {
        assert!(q.queues >= 1 && q.depth >= 1);
        let groups = group_cpus_evenly(layout, q.queues);
        let cpu_queue = queue_of_cpu(&groups, layout.cpus());
        let vector_cpu = groups
            .iter()
            .map(|g| (!g.is_empty()).then(|| matrix.alloc_managed(g) as usize))
            .collect::<Vec<_>>();
        HostQueues {
            hw: (0..q.queues)
                .map(|_| Port::new(q.depth, waiting_max))
                .collect(),
            depth: q.depth,
            cpu_queue,
            groups,
            vector_cpu,
            coalescing: q.coalescing,
            stats: vec![QueueStats::default(); q.queues as usize],
        }
    }

    /// Whether the queues need the submitting CPU (more than one).
    pub fn is_multi(&self) -> bool {
        !self.cpu_queue.is_empty() && self.hw.len() > 1
    }

    /// The hardware queue a request submitted on `cpu` goes to.
    pub fn queue_for_cpu(&self, cpu: usize) -> usize {
        self.cpu_queue.get(cpu).map_or(0, |&q| q as usize)
    }

    /// The device-level tag of a queue's tag.
    pub fn device_tag(&self, q: usize, tag: u32) -> u32 {
        q as u32 * self.depth + tag
    }

    /// (queue, queue tag) of a device-level tag.
    #[inline]
    pub fn split_tag(&self, device_tag: u32) -> (usize, u32) {
        if self.hw.len() == 1 {
            return (0, device_tag);
        }
        ((device_tag / self.depth) as usize, device_tag % self.depth)
    }

    /// Commands the device may hold at once.
    pub fn commands_max(&self) -> u32 {
        self.depth * self.hw.len() as u32
    }

    /// Whether a request from `cpu` would be issued at once.
    pub fn can_issue_now(&self, cpu: usize) -> bool {
        self.hw[self.queue_for_cpu(cpu)].can_issue_now()
    }

    /// The CPU queue `q`'s vector targets (`None`: the stack's IRQ CPU).
    pub fn vector_cpu(&self, q: usize) -> Option<usize> {
        self.vector_cpu[q]
    }

    /// The CPUs mapped to queue `q` as a Linux cpulist ("0-3,8").
    pub fn cpulist(&self, q: usize) -> String {
        let Some(g) = self.groups.get(q) else {
            return "all".into();
        };
        let mut out: Vec<String> = Vec::new();
        let mut i = 0;
        while i < g.len() {
            let mut j = i;
            while j + 1 < g.len() && g[j + 1] == g[j] + 1 {
                j += 1;
            }
            out.push(if i == j {
                g[i].to_string()
            } else {
                format!("{}-{}", g[i], g[j])
            });
            i = j + 1;
        }
        out.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(sockets: u32, cores: u32, threads: u32) -> CpuLayout {
        CpuLayout {
            sockets,
            cores_per_socket: cores,
            threads_per_core: threads,
        }
    }

    fn range(a: u32, b: u32) -> Vec<u32> {
        (a..b).collect()
    }

    #[test]
    fn eight_cpus_four_queues() {
        // One node of 8 CPUs, no SMT. numgrps 4 > nodes 1, so
        // alloc_groups_to_nodes gives the node max(1, 4*8/8) = 4 groups;
        // assign_cpus_to_groups: 8/4 = 2 CPUs per group, no extra; each
        // grp_spread_init_one takes the 2 lowest free CPUs (siblings are
        // the CPU itself). Groups {0,1} {2,3} {4,5} {6,7}.
        let g = group_cpus_evenly(&layout(1, 8, 1), 4);
        assert_eq!(g, vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        assert_eq!(queue_of_cpu(&g, 8), vec![0, 0, 1, 1, 2, 2, 3, 3]);
    }

    // Two nodes with equal CPU counts: lib/sort.c's heapsort of the two
    // equal keys [n0, n1] builds the heap without moving anything, then its
    // one extraction swaps root and last: [n1, n0]. __group_cpus_evenly
    // walks node_groups in that sorted order, so node 1 gets the first
    // groups.

    #[test]
    fn two_sockets_smt_64_queues() {
        // 2 x 16 x 2: CPUs 0-15 socket 0 thread 0, 16-31 socket 1 thread 0,
        // 32-47 socket 0 thread 1, 48-63 socket 1 thread 1. 64 groups over 2
        // nodes of 32: node 1 (sorted first) gets max(1, 64*32/64) = 32,
        // node 0 gets 32*32/32 = 32. One CPU per group, first free CPU
        // first (a sibling is taken only while cpus_per_grp > 1): groups
        // 0-15 = CPUs 16-31, 16-31 = CPUs 48-63, then node 0: groups 32-47
        // = CPUs 0-15, 48-63 = CPUs 32-47.
        let g = group_cpus_evenly(&layout(2, 16, 2), 64);
        let flat: Vec<u32> = g
            .iter()
            .map(|v| {
                assert_eq!(v.len(), 1);
                v[0]
            })
            .collect();
        let mut want = range(16, 32);
        want.extend(range(48, 64));
        want.extend(range(0, 16));
        want.extend(range(32, 48));
        assert_eq!(flat, want);
    }

    #[test]
    fn two_sockets_smt_16_queues_pairs_siblings() {
        // 16 groups: each node max(1, 16*32/64) = 8 groups of 32/8 = 4 CPUs.
        // grp_spread_init_one takes the first free CPU, then its free
        // sibling, then the next CPU and its sibling: node 1 first, group 0
        // = {16, 48, 17, 49}, ..., group 7 = {30, 62, 31, 63}; node 0's
        // groups 8..15 the same over CPUs 0-15 and their siblings 32-47.
        let g = group_cpus_evenly(&layout(2, 16, 2), 16);
        for (q, grp) in g.iter().enumerate() {
            let q = q as u32;
            let base = if q < 8 { 16 + 2 * q } else { 2 * (q - 8) };
            assert_eq!(
                grp,
                &vec![base, base + 1, base + 32, base + 33],
                "group {q}"
            );
        }
        let map = queue_of_cpu(&g, 64);
        assert_eq!(map[0], map[32], "SMT siblings share a queue");
        assert_eq!(map[17], 0);
        assert_eq!(map[0], 8);
    }

    #[test]
    fn fewer_groups_than_nodes_and_uneven_split() {
        // 1 group on 2 nodes: the whole machine.
        let g = group_cpus_evenly(&layout(2, 2, 1), 1);
        assert_eq!(g, vec![vec![0, 1, 2, 3]]);
        // 3 groups over 2 nodes of 4 CPUs (sorted order n1, n0): node 1
        // gets max(1, 3*4/8) = 1 group of 4, node 0 then 2*4/4 = 2 groups
        // of 2.
        let g = group_cpus_evenly(&layout(2, 4, 1), 3);
        assert_eq!(g, vec![range(4, 8), vec![0, 1], vec![2, 3]]);
        // 3 groups on one node of 8: extra = 8 - 3*2 = 2, so 3, 3, 2 CPUs.
        let g = group_cpus_evenly(&layout(1, 8, 1), 3);
        assert_eq!(g, vec![range(0, 3), range(3, 6), range(6, 8)]);
    }

    #[test]
    fn more_queues_than_cpus_leaves_queues_empty() {
        let g = group_cpus_evenly(&layout(1, 2, 1), 4);
        assert_eq!(g, vec![vec![0], vec![1], vec![], vec![]]);
    }

    #[test]
    fn linux_sort_sorts_and_keeps_its_order_of_equals() {
        let mut v = vec![5, 3, 9, 1, 1, 7];
        linux_sort(&mut v, |a, b| i64::from(*a) - i64::from(*b));
        assert_eq!(v, vec![1, 1, 3, 5, 7, 9]);
        // Three equal keys: heapify moves nothing; extracting swaps the
        // root with the last element each time: [a,b,c] -> [c,b,a] (then
        // sift: b's key equals c's, c stays) -> [b,c,a].
        let mut v = vec![(1, 'a'), (1, 'b'), (1, 'c')];
        linux_sort(&mut v, |x, y| i64::from(x.0) - i64::from(y.0));
        assert_eq!(v.iter().map(|x| x.1).collect::<String>(), "bca");
    }

    #[test]
    fn vector_matrix_spreads_devices_and_prefers_the_last_cpu() {
        let mut m = VectorMatrix::new(4);
        assert_eq!(m.alloc_managed(&[0, 1]), 1, "tie: the last CPU");
        assert_eq!(m.alloc_managed(&[0, 1]), 0, "then the less loaded");
        assert_eq!(m.alloc_managed(&[2]), 2);
    }

    #[test]
    fn coalescing_fields_follow_the_feature() {
        let c = Coalescing::from_feature(0, 0);
        assert!(!c.is_on() && c.fires(1));
        let c = Coalescing::from_feature(2, 7);
        assert_eq!((c.time_ns, c.threshold_entries), (200_000, 8));
        assert!(!c.fires(7) && c.fires(8));
    }

    #[test]
    fn tags_split_per_queue() {
        let hq = HostQueues::nvme(
            &layout(1, 4, 1),
            NvmeQueues {
                queues: 4,
                depth: 8,
                coalescing: Coalescing::default(),
            },
            &mut VectorMatrix::new(4),
            16,
        );
        assert_eq!(hq.device_tag(3, 5), 29);
        assert_eq!(hq.split_tag(29), (3, 5));
        assert_eq!(hq.queue_for_cpu(2), 2);
        assert_eq!(hq.vector_cpu(2), Some(2));
        assert_eq!(hq.cpulist(1), "1");
        assert_eq!(hq.commands_max(), 32);
    }
}
