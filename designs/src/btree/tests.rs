use super::*;

/// splitmix64: a fixed-seed generator for tests (no dependency needed).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn small_cfg(node_bytes: usize) -> NodeConfig {
    NodeConfig {
        node_bytes,
        write_threshold_bytes: 512 - 48,
        ..NodeConfig::default()
    }
}

/// Per-sector oracle: cache pointer offset of every cached sector.
struct Oracle {
    inodes: u64,
    sectors: u64,
    map: Vec<Option<u64>>,
}
impl Oracle {
    fn new(inodes: u64, sectors: u64) -> Self {
        Self {
            inodes,
            sectors,
            map: vec![None; (inodes * sectors) as usize],
        }
    }
    fn insert(&mut self, k: &Bkey) {
        for s in k.start()..k.end {
            self.map[(k.inode * self.sectors + s) as usize] = Some(k.ptr.offset + (s - k.start()));
        }
    }
    fn get(&self, inode: u64, s: u64) -> Option<u64> {
        self.map[(inode * self.sectors + s) as usize]
    }
}

fn check_all(t: &BTree, o: &Oracle) {
    for inode in 0..o.inodes {
        for s in 0..o.sectors {
            let (k, _) = t.lookup(inode, s);
            let got = k.map(|k| k.ptr.offset + (s - k.start()));
            assert_eq!(got, o.get(inode, s), "inode {inode} sector {s}");
        }
    }
}

#[test]
fn random_inserts_match_oracle() {
    let mut rng = Rng(42);
    for node_bytes in [4096usize, 16 << 10] {
        let mut t: BTree = BTree::new(small_cfg(node_bytes)).unwrap();
        let mut o = Oracle::new(3, 6000);
        let mut next_ptr = 1u64;
        let mut total = InsertWork::default();
        for i in 0..stress_iters() {
            let inode = rng.below(3);
            let big = rng.below(4) == 0;
            let size = 1 + rng.below(if big { 64 } else { 8 });
            let start = rng.below(6000 - size);
            let k = Bkey::extent(
                inode,
                start,
                size,
                Ptr {
                    dev: 0,
                    offset: next_ptr,
                    gen: 1,
                },
            );
            next_ptr += size;
            total.add(&t.insert(k).unwrap());
            o.insert(&k);
            if i % 500 == 0 {
                t.check_invariants().unwrap();
            }
            if i % 97 == 0 {
                t.flush_writes();
            }
        }
        t.check_invariants().unwrap();
        check_all(&t, &o);
        assert!(
            total.splits > 0 && total.sorts > 0 && total.keys_trimmed > 0,
            "{total:?}"
        );
        assert!(t.stats().depth >= 2);
    }
}

#[test]
fn sequential_inserts_build_what_populate_builds() {
    let cfg = small_cfg(16 << 10);
    let n = 6000u64;
    let fill = SequentialFill {
        inode: 2,
        start_sector: 0,
        extent_sectors: 8,
        count: n,
        dev: 1,
        first_ptr_offset: 0,
        gen: 3,
    };
    let mut a: BTree = BTree::new(cfg).unwrap();
    a.populate_sequential(&fill).unwrap();
    let mut b: BTree = BTree::new(cfg).unwrap();
    for i in 0..n {
        b.insert(Bkey::extent(
            2,
            i * 8,
            8,
            Ptr {
                dev: 1,
                offset: i * 8,
                gen: 3,
            },
        ))
        .unwrap();
    }
    a.check_invariants().unwrap();
    b.check_invariants().unwrap();
    assert_eq!(a.live_keys(), b.live_keys());
    // Leaf sizes in key order: identical except the last leaf's bset layout.
    let leaves = |t: &BTree| {
        let mut v = Vec::new();
        let mut ids = Vec::new();
        fn walk(t: &BTree, id: u32, ids: &mut Vec<u32>) {
            let n = t.node(id);
            if n.level() == 0 {
                ids.push(id);
            } else {
                for k in n.sorted_live_keys() {
                    walk(t, k.ptr.offset as u32, ids);
                }
            }
        }
        walk(t, t.root(), &mut ids);
        for id in ids {
            v.push(t.node(id).sorted_live_keys().len());
        }
        v
    };
    let (la, lb) = (leaves(&a), leaves(&b));
    assert_eq!(la, lb);
    assert_eq!(la, leaf_plan(&cfg, n as usize));
    assert!(la.len() > 3);
    for s in (0..n * 8).step_by(7) {
        assert_eq!(a.lookup(2, s).0, b.lookup(2, s).0);
    }
}

#[test]
fn populate_rejects_bad_input() {
    let mut t: BTree = BTree::new(NodeConfig::default()).unwrap();
    let p = Ptr::default();
    let err = t
        .populate([Bkey::extent(1, 0, 8, p), Bkey::extent(1, 4, 8, p)])
        .unwrap_err();
    assert!(matches!(err, BtreeError::Unsorted { index: 1, .. }));
    t.populate([Bkey::extent(1, 0, 8, p)]).unwrap();
    assert!(matches!(
        t.populate([Bkey::extent(1, 0, 8, p)]),
        Err(BtreeError::NotEmpty(1))
    ));
    assert!(BTree::<crate::backend::StdBackend>::new(NodeConfig {
        bset_cacheline_bytes: 12,
        ..NodeConfig::default()
    })
    .is_err());
}

#[test]
fn aux_tree_search_equals_linear_search_per_bset() {
    // A node with several written bsets of varied sizes; every position's
    // search result must equal a brute-force scan.
    let cfg = NodeConfig {
        node_bytes: 64 << 10,
        write_threshold_bytes: 2048,
        ..NodeConfig::default()
    };
    let mut t: BTree = BTree::new(cfg).unwrap();
    let mut rng = Rng(7);
    let mut o = Oracle::new(2, 30_000);
    for _ in 0..1500 {
        let inode = rng.below(2);
        let size = 1 + rng.below(16);
        let start = rng.below(30_000 - size);
        let k = Bkey::extent(
            inode,
            start,
            size,
            Ptr {
                dev: 0,
                offset: rng.below(1 << 40),
                gen: 0,
            },
        );
        t.insert(k).unwrap();
        o.insert(&k);
    }
    t.check_invariants().unwrap();
    let live = t.live_keys();
    for inode in 0..2 {
        for s in (0..30_000).step_by(3) {
            let (k, w) = t.search(inode, s);
            let want = live.iter().find(|k| k.pos() > (inode, s));
            // The tree answers within the covering leaf; the brute force over
            // all keys agrees whenever the answer lies in that leaf.
            if let Some(k) = k {
                assert_eq!(Some(&k), want, "inode {inode} sector {s}");
            }
            assert!(w.bsets_searched >= 1);
            assert_eq!(
                t.lookup(inode, s).0.map(|k| k.ptr.offset + s - k.start()),
                o.get(inode, s)
            );
        }
    }
}

#[test]
fn work_grows_logarithmically() {
    let mut avg = Vec::new();
    for count in [1_000u64, 16_000, 256_000] {
        let mut t: BTree = BTree::new(NodeConfig::default()).unwrap();
        t.populate_sequential(&SequentialFill {
            inode: 1,
            start_sector: 0,
            extent_sectors: 8,
            count,
            dev: 0,
            first_ptr_offset: 0,
            gen: 0,
        })
        .unwrap();
        let mut rng = Rng(count);
        let mut sum = SearchWork::default();
        let lookups = 4000;
        for _ in 0..lookups {
            let s = rng.below(count * 8);
            let (k, w) = t.lookup(1, s);
            assert!(k.unwrap().contains(1, s));
            sum.add(&w);
        }
        let per = |x: u32| f64::from(x) / lookups as f64;
        avg.push((
            per(sum.aux_levels),
            per(sum.cachelines_touched),
            per(sum.key_compares),
            per(sum.full_key_compares),
            per(sum.nodes_visited),
        ));
    }
    // 16x more keys: a few more aux levels, not 16x the work.
    for w in avg.windows(2) {
        let (a, b) = (w[0], w[1]);
        assert!(b.0 > a.0, "aux levels grow: {avg:?}");
        assert!(b.0 < a.0 + 8.0, "aux levels grow ~log: {avg:?}");
        assert!(
            b.1 < a.1 * 3.0 && b.2 < a.2 * 3.0,
            "bounded growth: {avg:?}"
        );
    }
    // Ambiguous floats are rare (bcache: about 1%).
    assert!(avg[2].3 < 0.2 * avg[2].0, "{avg:?}");
}

#[test]
fn lazy_sort_and_max_bsets() {
    let cfg = NodeConfig {
        node_bytes: 256 << 10,
        ..NodeConfig::default()
    };
    let mut t: BTree = BTree::new(cfg).unwrap();
    let mut rng = Rng(3);
    let mut max_sets = 0;
    let mut iw = InsertWork::default();
    for _ in 0..20_000 {
        let s = rng.below(1 << 30);
        iw.add(&t.insert(Bkey::extent(1, s, 8, Ptr::default())).unwrap());
        let root = t.node(t.root());
        if root.level() == 0 {
            max_sets = max_sets.max(root.nsets());
        }
    }
    assert!((2..=MAX_BSETS).contains(&max_sets), "{max_sets}");
    assert!(iw.sorts > 0 && iw.bset_writes > 0, "{iw:?}");
    t.check_invariants().unwrap();
}

fn stress_iters() -> u64 {
    // BTREE_STRESS=<n> runs a longer randomized comparison locally.
    std::env::var("BTREE_STRESS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2500)
}

/// Real threads (std atomics): lookups run while one writer overwrites
/// halves of cached extents, which trims keys, writes bsets and splits
/// leaves. Every sector stays cached throughout, so every lookup must find
/// a key containing it whose pointer is consistent with its start. The
/// threads share the tree through a std `RwLock`'s read side; the writer
/// takes the write side only to provide a reserve an insert asked for.
/// A reader that fails aborts the process: it may die holding a six lock,
/// and the writer would then wait for it forever.
#[test]
fn real_threads_look_up_during_inserts_and_splits() {
    use std::sync::atomic::{AtomicBool, Ordering as O};
    use std::sync::{Arc, Barrier, RwLock};
    const GEN: u64 = 1 << 20;
    let extents = 3000u64;
    let mut t: BTree = BTree::new(small_cfg(4096)).unwrap();
    t.populate_sequential(&SequentialFill {
        inode: 1,
        start_sector: 0,
        extent_sectors: 8,
        count: extents,
        dev: 0,
        first_ptr_offset: 0,
        gen: 0,
    })
    .unwrap();
    let leaves_before = t.stats().leaves;
    let tree = Arc::new(RwLock::new(t));
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(3));
    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let (tree, done, start) = (Arc::clone(&tree), Arc::clone(&done), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                let run = || {
                    let mut rng = Rng(100 + r);
                    let mut lookups = 0u64;
                    while !done.load(O::Acquire) {
                        let s = rng.below(extents * 8);
                        let t = tree.read().unwrap_or_else(|p| p.into_inner());
                        let k = t.lookup(1, s).0.expect("every sector stays cached");
                        assert!(k.contains(1, s), "{k:?} for sector {s}");
                        assert_eq!((k.ptr.offset - k.start()) % GEN, 0, "torn key {k:?}");
                        lookups += 1;
                    }
                    lookups
                };
                match std::panic::catch_unwind(run) {
                    Ok(n) => n,
                    Err(_) => {
                        eprintln!("reader {r} failed (message above); aborting");
                        std::process::abort()
                    }
                }
            })
        })
        .collect();
    start.wait();
    let mut rng = Rng(9);
    for i in 1..=20_000u64 {
        let s = rng.below(extents * 2) * 4;
        let k = Bkey::extent(
            1,
            s,
            4,
            Ptr {
                dev: 0,
                offset: s + i * GEN,
                gen: 1,
            },
        );
        loop {
            let r = tree.read().unwrap().insert_shared(k, &mut NoTrace);
            match r {
                Ok(_) => break,
                Err(BtreeError::Reserve(need)) => tree.write().unwrap().reserve(need),
                Err(e) => panic!("{e}"),
            }
        }
    }
    done.store(true, O::Release);
    let lookups: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    let t = tree.read().unwrap();
    t.check_invariants().unwrap();
    assert!(t.stats().leaves > leaves_before, "the inserts split leaves");
    assert!(lookups > 0);
}

#[test]
fn insert_shared_reports_a_missing_reserve_and_changes_nothing() {
    let fill = SequentialFill {
        inode: 1,
        start_sector: 0,
        extent_sectors: 8,
        count: 400,
        dev: 0,
        first_ptr_offset: 0,
        gen: 0,
    };
    let mut shared: BTree = BTree::new(small_cfg(4096)).unwrap();
    shared.populate_sequential(&fill).unwrap();
    let mut owned: BTree = BTree::new(small_cfg(4096)).unwrap();
    owned.populate_sequential(&fill).unwrap();
    let mut rng = Rng(5);
    let mut asked = 0;
    for i in 0..1500u64 {
        // Half an extent: one piece, within one leaf.
        let s = rng.below(800) * 4;
        let k = Bkey::extent(
            1,
            s,
            4,
            Ptr {
                dev: 0,
                offset: 5000 + i,
                gen: 1,
            },
        );
        loop {
            let before = shared.live_keys();
            match shared.insert_shared(k, &mut NoTrace) {
                Ok(_) => break,
                Err(BtreeError::Reserve(r)) => {
                    assert_eq!(shared.live_keys(), before, "nothing changed");
                    shared.reserve(r);
                    asked += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
        owned.insert(k).unwrap();
    }
    assert!(asked > 0, "splits needed spare nodes");
    assert_eq!(shared.live_keys(), owned.live_keys());
    assert_eq!(shared.stats(), owned.stats());
    shared.check_invariants().unwrap();
}

/// The simulator's backend runs the same operations: same answers, same
/// work, same shape as on std atomics.
#[test]
fn serial_backend_runs_the_same_operations() {
    use crate::backend::SerialBackend;
    let cfg = small_cfg(4096);
    let mut a: BTree = BTree::new(cfg).unwrap();
    let mut b: BTree<SerialBackend> = BTree::new(cfg).unwrap();
    let mut rng = Rng(11);
    for i in 0..3000u64 {
        let size = 1 + rng.below(16);
        let k = Bkey::extent(
            1,
            rng.below(20_000),
            size,
            Ptr {
                dev: 0,
                offset: i << 8,
                gen: 1,
            },
        );
        assert_eq!(a.insert(k).unwrap(), b.insert(k).unwrap());
    }
    for s in (0..20_016).step_by(5) {
        assert_eq!(a.lookup(1, s), b.lookup(1, s));
    }
    assert_eq!(a.stats(), b.stats());
    b.check_invariants().unwrap();
}

/// On the serial backend a lock left held is caught by the next operation
/// that needs it (it cannot wait for another thread).
#[test]
#[should_panic(expected = "a lock was left held")]
fn serial_backend_panics_on_a_leaked_lock() {
    use crate::backend::SerialBackend;
    let mut t: BTree<SerialBackend> = BTree::new(small_cfg(4096)).unwrap();
    t.insert(Bkey::extent(1, 0, 8, Ptr::default())).unwrap();
    t.node(t.root()).lock.intent_lock();
    let _ = t.insert(Bkey::extent(1, 8, 8, Ptr::default()));
}

#[test]
fn plan_sizes_skips_periods_and_matches_leaf_plan() {
    for node_bytes in [2048usize, 4096, 16 << 10] {
        let cfg = small_cfg(node_bytes);
        for n in [0usize, 1, 7, 100, 1000, 5000, 33_333] {
            let want: Vec<u64> = leaf_plan(&cfg, n).into_iter().map(|x| x as u64).collect();
            assert_eq!(plan_sizes(&cfg, n as u64), want, "node {node_bytes} n {n}");
        }
    }
    // A billion keys of the default geometry plans in a moment (periods).
    let sizes = plan_sizes(&NodeConfig::default(), 1 << 30);
    assert_eq!(sizes.iter().sum::<u64>(), 1 << 30);
}

fn fill(count: u64) -> SequentialFill {
    SequentialFill {
        inode: 1,
        start_sector: 64,
        extent_sectors: 8,
        count,
        dev: 0,
        first_ptr_offset: 4096,
        gen: 3,
    }
}

/// A lazy fill looks up, inserts and reports exactly as the eager one: the
/// same keys, search work and insert work, and the same tree in the end.
#[test]
fn lazy_fill_runs_as_the_eager_one() {
    let cfg = small_cfg(4096);
    let f = fill(20_000);
    let mut eager: BTree = BTree::new(cfg).unwrap();
    eager.populate_sequential(&f).unwrap();
    let mut lazy: BTree = BTree::new(cfg).unwrap();
    let st = lazy.populate_lazy(&f).unwrap();
    assert_eq!(st, eager.stats().clone_with_resident(st.resident_bytes));
    assert!(st.leaves > 50 && lazy.lazy_leaves() as u64 == st.leaves);
    assert!(st.resident_bytes * 4 < st.heap_bytes, "{st:?}");
    assert_eq!(lazy.live_keys(), eager.live_keys());
    lazy.check_invariants().unwrap();
    let mut rng = Rng(11);
    let end = 64 + 8 * 20_000;
    for i in 0..400u64 {
        let s = rng.below(end + 100);
        if i % 3 == 0 {
            let len = 1 + rng.below(40);
            let k = Bkey::extent(
                1,
                s,
                len,
                Ptr {
                    dev: 0,
                    offset: 900_000 + i * 64,
                    gen: 4,
                },
            );
            assert_eq!(
                lazy.insert(k).unwrap(),
                eager.insert(k).unwrap(),
                "insert {i}"
            );
        } else {
            lazy.materialize((1, s), (1, s));
            assert_eq!(lazy.lookup(1, s), eager.lookup(1, s), "lookup {i} at {s}");
        }
    }
    assert!(lazy.lazy_leaves() > 0, "some leaves were never touched");
    assert_eq!(lazy.live_keys(), eager.live_keys());
    let (a, b) = (lazy.stats(), eager.stats());
    assert_eq!(a, b.clone_with_resident(a.resident_bytes));
    lazy.check_invariants().unwrap();
    let mut n = 0u64;
    lazy.for_each_live_key(&mut |_| n += 1);
    assert_eq!(n, b.live_keys);
}

/// The search's work counts are the cost model's input (`--profile`
/// prints their ns): a change to how the walk counts must not move them.
/// The totals of a fixed mix of lookups, over written bsets of every size
/// (a sequential fill, then random inserts that write and sort sets),
/// pinned (and the exclusive lookup's, the same).
#[test]
fn search_work_totals_are_pinned() {
    let mut t: BTree = BTree::new(NodeConfig::default()).unwrap();
    t.populate_sequential(&SequentialFill {
        inode: 1,
        start_sector: 0,
        extent_sectors: 8,
        count: 256_000,
        dev: 0,
        first_ptr_offset: 0,
        gen: 0,
    })
    .unwrap();
    let mut rng = Rng(29);
    let mut sum = SearchWork::default();
    for round in 0..4 {
        for _ in 0..2000 {
            let s = rng.below(256_000 * 8);
            let (k, w) = t.lookup(1, s);
            // The exclusive lookup: the same key and work, without locks.
            assert_eq!(t.lookup_exclusive(1, s), (k, w));
            sum.add(&w);
        }
        for _ in 0..3000 {
            let s = rng.below(256_000 * 8) & !7;
            t.insert(Bkey::extent(1, s + 8, 8 + round, Ptr::default()))
                .unwrap();
        }
    }
    let got = [
        sum.nodes_visited,
        sum.bsets_searched,
        sum.aux_levels,
        sum.cachelines_touched,
        sum.key_compares,
        sum.full_key_compares,
        sum.linear_scan_keys,
    ];
    assert_eq!(got, [16000, 24270, 139596, 180984, 176130, 11239, 76698]);
}
