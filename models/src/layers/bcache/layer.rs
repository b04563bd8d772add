//! bcache as a [`Layer`]: a cache device and a backing device below it.
//!
//! [`crate::layers::bcache::Bcache`] decides what each bio does ([`Route`]) and
//! which background I/O it needs (cache fills, prio and journal writes,
//! writeback); this file turns those decisions into child requests and
//! their completions back into bcache's calls. The bio of a bypassed
//! request is remapped to the backing device and completes straight up.
//!
//! Tokens: two bits of kind, then the parent's origin (a hit, a miss, the
//! backing half of a writethrough write) or the index of a background I/O.

use blocksim_analysis::{StatsKept, Table};
use blocksim_sim::{Slab, SlotId, SymbolId};

use crate::devices::device::Dir;
use crate::layers::bcache::report::HitSeries;
use crate::layers::bcache::{Bcache, BgDev, Route};
use crate::layers::layer::{
    Child, ChildDone, Layer, LayerCx, LayerReq, Origin, Route as ChildRoute,
};
use crate::layers::layer::{ReportCx, Tokens, WorkCtx, TOKEN_BITS};

const CACHE: u8 = 0;
const BACKING: u8 = 1;
const KIND_SHIFT: u32 = TOKEN_BITS - 2;
const PAYLOAD_MASK: u32 = (1 << KIND_SHIFT) - 1;
/// A read hit, read from the cache device.
const HIT: u32 = 0;
/// A read miss, read from the backing device (then cached).
const MISS: u32 = 1;
/// The backing half of a writethrough write.
const JOIN: u32 = 2;
/// A background I/O of bcache's own (index into `background`).
const BACKGROUND: u32 = 3;
/// Bound on bcache's background I/Os in flight (a stated bound).
const BACKGROUND_BOUND: usize = 1 << 20;

/// Why bcache keeps no disk statistics.
pub const BCACHE_NO_STATS: &str =
    "2011 bcache does no block-layer accounting: seed 000's fio output shows bcache0: ios=0/0";

/// The symbols bcache's CPU work is charged to.
#[derive(Debug, Clone, Copy)]
pub struct BcacheSyms {
    pub bset_search: SymbolId,
    pub search_leaf: SymbolId,
    pub btree_insert: SymbolId,
}

impl BcacheSyms {
    /// Names them in `profile` (kernel symbols of bcache's B+tree).
    pub fn register(profile: &mut blocksim_sim::CpuProfile) -> BcacheSyms {
        use blocksim_sim::Mode;
        let k = "[kernel.kallsyms]";
        BcacheSyms {
            bset_search: profile.symbol("__bset_search", k, Mode::Kernel),
            search_leaf: profile.symbol("btree_search_leaf", k, Mode::Kernel),
            btree_insert: profile.symbol("bch_btree_insert", k, Mode::Kernel),
        }
    }
}

/// bcache over its cache and backing devices.
pub struct BcacheLayer {
    bc: Bcache,
    below: [String; 2],
    /// The backing device's size: what bcache presents.
    backing_sectors: u64,
    /// Bcache's tokens of the background I/Os in flight.
    background: Slab<u32>,
    /// The request of each parent whose miss is in flight, by parent id
    /// (dense: job I/O slots, [`BcacheLayer::parent_id`]).
    misses: Vec<Option<LayerReq>>,
    /// The requests from a layer above in flight (bcache under a layer):
    /// their parent ids are [`UPPER`] with their token here.
    uppers: Tokens<Origin>,
    /// The request of each such parent whose miss is in flight, by token.
    upper_misses: Vec<Option<LayerReq>>,
    /// Parents a failed child served, failed when they complete (a
    /// writethrough write whose other half is in flight, a writeback
    /// write's earlier piece).
    failed_parents: std::collections::BTreeSet<u32>,
    syms: BcacheSyms,
    /// Hits and misses per sample interval, for the report.
    hit_series: HitSeries,
    /// One of several sets: its report tables carry its name.
    labelled: bool,
}

fn token(kind: u32, payload: u32) -> u32 {
    assert!(
        payload <= PAYLOAD_MASK,
        "bcache token payload {payload} beyond {KIND_SHIFT} bits"
    );
    kind << KIND_SHIFT | payload
}

/// The bit of a parent id that marks a request from a layer above (the
/// others are job I/O slots, below it).
const UPPER: u32 = 1 << (KIND_SHIFT - 1);

impl BcacheLayer {
    /// `bc` over its cache and backing devices: (name, size) each.
    pub fn new(bc: Bcache, cache: &str, backing: (&str, u64), syms: BcacheSyms) -> BcacheLayer {
        BcacheLayer {
            bc,
            below: [cache.to_string(), backing.0.to_string()],
            backing_sectors: backing.1,
            background: Slab::with_bound(BACKGROUND_BOUND),
            misses: Vec::new(),
            uppers: Tokens::default(),
            upper_misses: Vec::new(),
            failed_parents: std::collections::BTreeSet::new(),
            syms,
            hit_series: HitSeries::default(),
            labelled: false,
        }
    }

    /// The layer as one of several sets (`several`): its tables are
    /// labelled with its name (one set's report is as it always was).
    pub fn labelled(mut self, several: bool) -> BcacheLayer {
        self.labelled = several;
        self
    }

    /// The id bcache keys request `up` by while it serves it: a job I/O's
    /// slot, or [`UPPER`] with a token for a layer's request (its origin is
    /// no dense index).
    #[inline]
    fn parent_id(&mut self, up: Origin) -> u32 {
        if up.0 >> 30 == 0 {
            assert!(
                up.0 < UPPER,
                "job I/O slot {} beyond bcache's parent ids",
                up.0
            );
            return up.0;
        }
        UPPER | self.uppers.insert(up)
    }

    /// The in-flight miss slot of parent id `p`.
    fn miss_slot(&mut self, p: u32) -> &mut Option<LayerReq> {
        let (v, i) = match p & UPPER {
            0 => (&mut self.misses, p as usize),
            _ => (&mut self.upper_misses, (p & !UPPER) as usize),
        };
        if i >= v.len() {
            v.resize(i + 1, None);
        }
        &mut v[i]
    }

    /// Cache hits and misses so far.
    pub fn hits_misses(&self) -> Option<(u64, u64)> {
        Some((self.bc.hits, self.bc.misses))
    }

    pub fn bcache(&self) -> &Bcache {
        &self.bc
    }

    /// Issues bcache's pending background I/O and charges its background
    /// CPU work (inserts, GC, journal, writeback) to a kernel worker.
    #[inline]
    fn pump(&mut self, cx: &mut LayerCx) {
        if !self.bc.nothing_pending() {
            self.pump_pending(cx);
        }
    }

    #[inline(never)]
    fn pump_pending(&mut self, cx: &mut LayerCx) {
        for bg in self.bc.take_outbox() {
            let f = self.background.insert(bg.token).expect("background bound");
            cx.issue(Child {
                below: match bg.dev {
                    BgDev::Cache => CACHE,
                    BgDev::Backing => BACKING,
                },
                route: ChildRoute::Token(token(BACKGROUND, f.0)),
                dir: bg.dir,
                sector: bg.sector,
                sectors: bg.sectors,
                serves: None,
            });
        }
        let c = self.bc.take_cpu();
        cx.work(WorkCtx::Worker, Some(self.syms.btree_insert), c.insert_ns);
        let s = self.bc.symbols();
        cx.work(WorkCtx::Worker, s.map(|s| s.gc), c.gc_ns);
        cx.work(WorkCtx::Worker, s.map(|s| s.journal), c.journal_ns);
        cx.work(WorkCtx::Worker, s.map(|s| s.writeback), c.writeback_ns);
    }

    /// The child carrying a bio from above, routed as bcache decided.
    fn route_child(&mut self, (up, p): (Origin, u32), req: LayerReq, route: Route) -> Child {
        // A writeback write's data goes to the cache as bcache's own write
        // (its token is bcache's); every other child carries the parent's.
        let serves = Some(up);
        let (below, route, sector, serves) = match route {
            Route::CacheRead { cache_sector } => {
                (CACHE, ChildRoute::Token(token(HIT, p)), cache_sector, serves)
            }
            Route::Miss => {
                let slot = self.miss_slot(p);
                debug_assert!(slot.is_none(), "two misses of one parent");
                *slot = Some(req);
                (BACKING, ChildRoute::Token(token(MISS, p)), req.sector, serves)
            }
            Route::BackingJoined => (
                BACKING,
                ChildRoute::Token(token(JOIN, p)),
                req.sector,
                serves,
            ),
            Route::Backing => {
                // (Its completion goes straight up: bcache holds nothing
                // of it.)
                if p & UPPER != 0 {
                    self.uppers.take(p & !UPPER);
                }
                (BACKING, ChildRoute::Remap, req.sector, serves)
            }
            Route::CacheOnly {
                cache_sector,
                token: t,
            } => {
                let f = self.background.insert(t).expect("background bound");
                (
                    CACHE,
                    ChildRoute::Token(token(BACKGROUND, f.0)),
                    cache_sector,
                    None,
                )
            }
        };
        Child {
            below,
            route,
            dir: req.dir,
            sector,
            sectors: req.sectors,
            serves,
        }
    }
}

impl BcacheLayer {
    /// A child failed (an I/O error below): nothing it carried is taken as
    /// done, and the request from above it served fails. A failed cache
    /// read fails the read (2011 bcache's retry from the backing device,
    /// `cached_dev_read_error`, is not modelled); a failed miss read is
    /// not cached; a writethrough write fails once both halves are back.
    fn child_failed(&mut self, kind: u32, payload: u32, cx: &mut LayerCx) {
        let now_ns = cx.now_ns;
        let up = match kind {
            HIT => Some(payload),
            MISS => {
                self.miss_slot(payload)
                    .take()
                    .expect("a miss completes once");
                Some(payload)
            }
            JOIN => {
                self.failed_parents.insert(payload);
                self.bc.join_done(payload).then_some(payload)
            }
            _ => {
                let t = self.background.remove(SlotId(payload));
                let (served, done) = self.bc.bg_failed(t, now_ns);
                if let Some(u) = served {
                    self.failed_parents.insert(u);
                }
                done
            }
        };
        self.pump(cx);
        if let Some(p) = up {
            self.failed_parents.insert(p);
            self.complete_parent(p, cx);
        }
    }

    /// Completes parent id `p`: failed if a child it was served by failed.
    fn complete_parent(&mut self, p: u32, cx: &mut LayerCx) {
        let up = match p & UPPER {
            0 => Origin(p),
            _ => self.uppers.take(p & !UPPER),
        };
        if !self.failed_parents.is_empty() && self.failed_parents.remove(&p) {
            cx.fail(up);
        } else {
            cx.complete(up);
        }
    }
}

impl Layer for BcacheLayer {
    fn name(&self) -> &str {
        &self.bc.cfg.name
    }

    fn below(&self) -> &[String] {
        &self.below
    }

    fn capacity_sectors(&self) -> u64 {
        self.backing_sectors
    }

    fn runs_request_path(&self) -> bool {
        true
    }

    fn submit(&mut self, up: Origin, req: LayerReq, cx: &mut LayerCx) -> Child {
        let p = self.parent_id(up);
        let (route, lc) = self
            .bc
            .submit(p, req.task, req.dir, req.sector, req.sectors, cx.now_ns);
        cx.work(
            WorkCtx::Submitter,
            Some(self.syms.bset_search),
            lc.bset_search_ns,
        );
        cx.work(
            WorkCtx::Submitter,
            Some(self.syms.search_leaf),
            lc.search_leaf_ns,
        );
        let child = self.route_child((up, p), req, route);
        self.pump(cx);
        child
    }

    fn child_done(&mut self, done: ChildDone, cx: &mut LayerCx) {
        let (kind, payload) = (done.token >> KIND_SHIFT, done.token & PAYLOAD_MASK);
        let now_ns = cx.now_ns;
        if done.failed {
            return self.child_failed(kind, payload, cx);
        }
        let up = match kind {
            HIT => {
                self.bc.cache_read_done(done.since_dispatch_ns, now_ns);
                Some(payload)
            }
            MISS => {
                let r = self
                    .miss_slot(payload)
                    .take()
                    .expect("a miss completes once");
                debug_assert_eq!(r.dir, Dir::Read);
                self.bc.read_miss_done(r.sector, r.sectors, r.task, now_ns);
                Some(payload)
            }
            JOIN => self.bc.join_done(payload).then_some(payload),
            _ => {
                let t = self.background.remove(SlotId(payload));
                self.bc.bg_done(t, now_ns)
            }
        };
        self.pump(cx);
        if let Some(p) = up {
            self.complete_parent(p, cx);
        }
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.uppers.check()?;
        self.bc.check_invariants()
    }

    /// A discard invalidates the range and goes on to the backing device.
    fn discard_below(&self) -> Option<usize> {
        Some(BACKING as usize)
    }

    fn stats_kept(&self) -> (StatsKept, &'static str) {
        (StatsKept::None, BCACHE_NO_STATS)
    }

    fn report_note(&self) -> Option<String> {
        Some(self.bc.report_note())
    }

    fn sample(&mut self, now_ns: u64) {
        self.hit_series.sample(now_ns, self.bc.hits, self.bc.misses);
    }

    /// The hit ratio over time, then the metrics table; labelled with the
    /// set's name when it is one of several.
    fn report_tables(&self, cx: &dyn ReportCx) -> Vec<Table> {
        let set = self.labelled.then_some(self.bc.cfg.name.as_str());
        let metrics = super::report::metrics_table(self.bc.metrics(), CACHE as usize, cx, set);
        self.hit_series
            .table(set)
            .into_iter()
            .chain([metrics])
            .collect()
    }

    fn token_label(&self, token: u32) -> &'static str {
        match token >> KIND_SHIFT {
            HIT => "bcache hit",
            MISS => "bcache miss",
            JOIN => "bcache writethrough",
            _ => {
                let f = blocksim_sim::SlotId(token & PAYLOAD_MASK);
                self.bc.bg_label(*self.background.get(f))
            }
        }
    }

    fn gauges(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("dirty_sectors", self.bc.dirty_sectors() as f64),
            ("in_use_pct", self.bc.in_use_pct() as f64),
        ]
    }
}

#[cfg(test)]
mod tests_support {
    use super::*;
    use crate::cpu::costs::BtreeCosts;
    use crate::layers::bcache::BcacheConfig;
    use blocksim_sim::{CpuProfile, Mode};

    /// bcache over 64 MiB of cache, the first 16 MiB of 16 GiB cached.
    pub(super) fn layer(mode: &str) -> BcacheLayer {
        let text = format!(
            "name = \"bcache0\"\ncache = \"ssd\"\nbacking = \"md0\"\nbucket_size = \"64k\"\n\
             cache_mode = \"{mode}\"\n\
             [populate]\noffset = \"0\"\nlength = \"16m\"\nextent_size = \"64k\"\n"
        );
        let cfg: BcacheConfig = toml::from_str(&text).unwrap();
        let mut bc = Bcache::new(cfg, 64 << 11, 16 << 21, BtreeCosts::default(), 1).unwrap();
        bc.populate().unwrap();
        let mut p = CpuProfile::new(1);
        let mut sym = |s: &str| p.symbol(s, "[kernel.kallsyms]", Mode::Kernel);
        let syms = BcacheSyms {
            bset_search: sym("__bset_search"),
            search_leaf: sym("btree_search_leaf"),
            btree_insert: sym("bch_btree_insert"),
        };
        BcacheLayer::new(bc, "ssd", ("md0", 16 << 21), syms)
    }

    pub(super) fn read(sector: u64) -> LayerReq {
        LayerReq {
            dir: Dir::Read,
            sector,
            sectors: 8,
            task: 0,
        }
    }

    pub(super) fn write(sector: u64) -> LayerReq {
        LayerReq {
            dir: Dir::Write,
            ..read(sector)
        }
    }

    /// Submits `req` for `up` at 1 us: the bio handed down and the call's
    /// effects.
    pub(super) fn submit(l: &mut BcacheLayer, up: Origin, req: LayerReq) -> (Child, LayerCx) {
        let mut cx = LayerCx::default();
        cx.begin(1_000);
        let c = l.submit(up, req, &mut cx);
        (c, cx)
    }

    /// Child `c` (routed back to bcache) completes at `now_ns`, `failed` or
    /// not, 1 us after its dispatch: the call's effects.
    pub(super) fn finish(l: &mut BcacheLayer, c: &Child, now_ns: u64, failed: bool) -> LayerCx {
        crate::layers::layer::complete_child(l, c, (now_ns, 1_000), failed)
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::*;
    use super::*;
    use crate::layers::layer::{Owner, Route as R};

    #[test]
    fn a_hit_goes_to_the_cache_and_completes_its_parent_once() {
        let mut l = layer("writethrough");
        let up = Origin::job(42);
        let (c, cx) = submit(&mut l, up, read(0));
        assert_eq!((c.below, c.serves), (CACHE, Some(up)));
        assert!(cx.completed().is_empty());
        let cx = finish(&mut l, &c, 2_000, false);
        assert_eq!(cx.completed(), &[(up, false)]);
        assert_eq!(l.hits_misses(), Some((1, 0)));
        l.check_invariants().unwrap();
    }

    #[test]
    fn a_miss_reads_the_backing_device_then_fills_the_cache() {
        let mut l = layer("writethrough");
        let up = Origin::job(7);
        // 1 GiB in: beyond the populated 16 MiB.
        let (c, _) = submit(&mut l, up, read(2 << 20));
        assert_eq!(c.below, BACKING);
        let cx = finish(&mut l, &c, 5_000_000, false);
        assert_eq!(cx.completed(), &[(up, false)]);
        // The data read is written to the cache as bcache's own I/O, which
        // comes back to it and serves no request from above.
        let fills: Vec<&Child> = cx
            .children()
            .iter()
            .filter(|c| c.below == CACHE && c.dir == Dir::Write)
            .collect();
        assert!(!fills.is_empty(), "{:?}", cx.children());
        for f in fills {
            assert!(
                matches!(f.route, R::Token(_)),
                "a fill comes back to bcache"
            );
            assert_eq!(f.serves, None);
        }
        assert_eq!(l.hits_misses(), Some((0, 1)));
    }

    #[test]
    fn a_bypassed_write_is_remapped_and_completes_straight_up() {
        let mut l = layer("none");
        let up = Origin::job(3);
        let (c, _) = submit(&mut l, up, write(64));
        assert_eq!((c.below, c.route), (BACKING, R::Remap));
        assert_eq!(c.serves, Some(up));
        assert_eq!(up.owner(), Owner::Job(3));
    }

    #[test]
    fn a_writeback_write_is_bcaches_own_write_to_the_cache() {
        let mut l = layer("writeback");
        let up = Origin::job(5);
        let (c, _) = submit(&mut l, up, write(64));
        assert_eq!((c.below, c.dir), (CACHE, Dir::Write));
        // It serves no request from above: bcache completes the write when
        // its own write (and the journal) are done.
        assert_eq!(c.serves, None);
        finish(&mut l, &c, 2_000, false);
        l.check_invariants().unwrap();
    }
}

#[cfg(test)]
mod flush_discard_tests {
    use super::tests_support::*;
    use super::*;
    use crate::layers::layer::Route as R;

    /// A discard of cached data drops it from the cache (a read of it
    /// then misses) and goes on to the backing device, completing there.
    #[test]
    fn a_discard_invalidates_the_range_and_goes_to_the_backing_device() {
        let mut l = layer("writethrough");
        let up = Origin::job(4);
        let discard = LayerReq {
            dir: Dir::Discard,
            ..read(0)
        };
        let (c, _) = submit(&mut l, up, discard);
        assert_eq!((c.below, c.route, c.dir), (BACKING, R::Remap, Dir::Discard));
        assert_eq!((c.sector, c.sectors, c.serves), (0, 8, Some(up)));
        let (c, _) = submit(&mut l, Origin::job(5), read(0));
        assert_eq!(c.below, BACKING, "a read of discarded data misses");
        assert_eq!(l.hits_misses(), Some((0, 1)));
        l.check_invariants().unwrap();
    }

    /// A flush goes to both devices and completes once, after both.
    #[test]
    fn a_flush_goes_to_cache_and_backing_and_completes_after_both() {
        let mut l = layer("writeback");
        let up = Origin::job(6);
        let flush = LayerReq {
            dir: Dir::Flush,
            sector: 0,
            sectors: 0,
            task: 0,
        };
        let (c, cx) = submit(&mut l, up, flush);
        assert_eq!((c.below, c.dir, c.sectors), (BACKING, Dir::Flush, 0));
        let cache: Vec<Child> = cx
            .children()
            .iter()
            .filter(|c| c.below == CACHE)
            .copied()
            .collect();
        assert_eq!(cache.len(), 1, "{:?}", cx.children());
        assert_eq!((cache[0].dir, cache[0].sectors), (Dir::Flush, 0));
        let cx = finish(&mut l, &c, 3_000, false);
        assert!(cx.completed().is_empty(), "done before the cache's flush");
        let cx = finish(&mut l, &cache[0], 4_000, false);
        assert_eq!(cx.completed(), &[(up, false)]);
        l.check_invariants().unwrap();
    }
}

#[cfg(test)]
mod failure_tests {
    use super::tests_support::*;
    use super::*;

    #[test]
    fn a_failed_miss_fails_its_read_and_caches_nothing() {
        let mut l = layer("writethrough");
        let up = Origin::job(7);
        let (c, _) = submit(&mut l, up, read(2 << 20));
        let cx = finish(&mut l, &c, 5_000_000, true);
        assert_eq!(cx.completed(), &[(up, true)]);
        // No fill of data that was never read.
        assert!(
            cx.children().iter().all(|c| c.below != CACHE),
            "{:?}",
            cx.children()
        );
        l.check_invariants().unwrap();
    }

    #[test]
    fn a_failed_cache_read_fails_its_read() {
        let mut l = layer("writethrough");
        let up = Origin::job(9);
        let (c, _) = submit(&mut l, up, read(0));
        let cx = finish(&mut l, &c, 2_000, true);
        assert_eq!(cx.completed(), &[(up, true)]);
    }

    #[test]
    fn a_writeback_write_whose_cache_write_fails_fails() {
        let mut l = layer("writeback");
        let up = Origin::job(5);
        let (c, _) = submit(&mut l, up, write(64));
        let cx = finish(&mut l, &c, 2_000, true);
        assert_eq!(cx.completed(), &[(up, true)]);
        l.check_invariants().unwrap();
        assert!(l
            .report_note()
            .unwrap()
            .contains("1 of its own I/Os failed"));
    }
}
