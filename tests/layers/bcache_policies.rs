//! bcache in the stack (issue 7): the replacement policies side by side,
//! and the mechanisms under them driven through `blocksim_models::layers::bcache`
//! (gens and stale pointers, GC, cache modes, bypass rules, writeback,
//! journal).

#[path = "../common/mod.rs"]
mod common;

use blocksim_models::cpu::costs::BtreeCosts;
use blocksim_models::devices::device::Dir;
use blocksim_models::layers::bcache::{Bcache, BcacheConfig, BgIo, Route};

/// A bcache on a 64 MiB cache of 64 KiB buckets (1024 buckets) over a 16 GiB
/// backing device, with `extra` TOML lines for `[bcache]`.
fn bcache(extra: &str) -> Bcache {
    let text = format!(
        "name = \"bcache0\"\ncache = \"ssd\"\nbacking = \"hdd\"\nbucket_size = \"64k\"\n{extra}"
    );
    let cfg: BcacheConfig = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut b =
        Bcache::new(cfg, 64 << 11, 16 << 21, BtreeCosts::default(), 1).expect("valid bcache");
    b.populate().unwrap();
    b
}

/// Plays the stack: completes every device I/O bcache asks for, 100 us
/// after the previous one.
struct Driver {
    b: Bcache,
    now_ns: u64,
    user: u32,
    cache_writes: u64,
    drains: u64,
}

impl Drop for Driver {
    /// Whatever a test did, the cache it leaves holds its invariants.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.check();
        }
    }
}

impl Driver {
    fn new(b: Bcache) -> Self {
        Driver {
            b,
            now_ns: 0,
            user: 0,
            cache_writes: 0,
            drains: 0,
        }
    }

    /// The cache's invariants (gens, free lists, capacity, dirty bookkeeping).
    fn check(&self) {
        if let Err(e) = self.b.check_invariants() {
            panic!("at {} ns: {e}", self.now_ns);
        }
    }

    fn drain(&mut self) -> Vec<u32> {
        let mut done = Vec::new();
        loop {
            let out: Vec<BgIo> = self.b.take_outbox();
            if out.is_empty() {
                // Drained states hold the cache's invariants; the check is
                // O(keys + buckets), so every 64th drain and at the end.
                self.drains += 1;
                if self.drains % 64 == 0 {
                    self.check();
                }
                return done;
            }
            for io in out {
                self.now_ns += 100_000;
                if io.dir == Dir::Write && io.dev == blocksim_models::layers::bcache::BgDev::Cache {
                    self.cache_writes += 1;
                }
                done.extend(self.b.bg_done(io.token, self.now_ns));
            }
        }
    }

    /// One bio from task 0; returns its route once everything completed.
    fn io(&mut self, dir: Dir, sector: u64, sectors: u32) -> Route {
        self.now_ns += 10_000;
        self.user += 1;
        let u = self.user;
        let (route, _) = self.b.submit(u, 0, dir, sector, sectors, self.now_ns);
        let mut done = self.drain();
        self.now_ns += 100_000;
        match route {
            Route::Miss => {
                // The bio completes with the backing read; the fill follows.
                self.b.read_miss_done(sector, sectors, 0, self.now_ns);
                done.push(u);
            }
            Route::BackingJoined => {
                if self.b.join_done(u) {
                    done.push(u);
                }
            }
            Route::CacheOnly { token, .. } => done.extend(self.b.bg_done(token, self.now_ns)),
            Route::CacheRead { .. } | Route::Backing => done.push(u),
        }
        done.extend(self.drain());
        assert!(done.contains(&u), "bio {u} ({route:?}) completed");
        route
    }

    fn read(&mut self, block: u64) -> Route {
        self.io(Dir::Read, block * 8, 8)
    }

    fn metric(&self, name: &str) -> String {
        let rows = self.b.metrics();
        let (_, v) = rows
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("metric {name}"));
        format!("{v:?}")
    }
}

fn hit(r: Route) -> bool {
    matches!(r, Route::CacheRead { .. })
}

/// A stride that keeps 4 KiB reads from looking sequential.
fn scatter(i: u64) -> u64 {
    (i * 7919) % (1 << 20)
}

#[test]
fn eviction_bumps_gens_so_old_keys_miss_and_gc_drops_them() {
    let mut d = Driver::new(bcache("replacement = \"fifo\""));
    assert_eq!(d.read(scatter(1)), Route::Miss);
    assert!(hit(d.read(scatter(1))), "a miss is cached");
    // Three cache sizes of distinct blocks: fifo reuses every bucket.
    for i in 0..3 * 16384 {
        d.read(scatter(i + 10));
    }
    let s = d.b.stats;
    let a = d.b.alloc_stats();
    assert!(a.evictions > 900, "{a:?}");
    assert!(s.gc_runs > 0 && s.gc_stale_keys > 10_000, "{s:?}");
    // The first block's bucket was invalidated: it misses.
    assert_eq!(d.read(scatter(1)), Route::Miss);
    // Recent blocks are still cached.
    assert!(hit(d.read(scatter(3 * 16384 + 5))));
}

#[test]
fn stale_pointer_is_a_miss_until_gc() {
    // No GC by volume for a long time: sectors_to_gc is a 16th of the cache.
    let mut d = Driver::new(bcache("replacement = \"fifo\""));
    for i in 0..16384 + 4000 {
        d.read(scatter(i));
    }
    // Some early blocks sit in invalidated buckets whose keys GC has not
    // dropped yet, or dropped: either way a miss, and some were stale.
    let misses = (0..200).filter(|&i| !hit(d.read(scatter(i)))).count();
    assert!(misses > 150, "{misses}");
    assert!(d.b.stats.stale_misses + d.b.stats.gc_stale_keys > 0);
}

/// A hot set read between every cold miss: lru keeps its buckets (their
/// prio is reset by hits), fifo sweeps them out.
fn hot_set_hits(policy: &str) -> usize {
    let mut d = Driver::new(bcache(&format!("replacement = \"{policy}\"")));
    let hot: Vec<u64> = (0..256).map(|i| scatter(500_000 + i)).collect();
    for &h in &hot {
        d.read(h);
    }
    let mut hits = 0;
    for i in 0..40_000u64 {
        d.read(scatter(i));
        if i % 4 == 0 {
            let h = hot[(i / 4) as usize % hot.len()];
            if hit(d.read(h)) {
                hits += 1;
            }
        }
    }
    hits
}

#[test]
fn lru_keeps_a_hot_set_that_fifo_and_random_evict() {
    let (lru, fifo, random) = (
        hot_set_hits("lru"),
        hot_set_hits("fifo"),
        hot_set_hits("random"),
    );
    assert!(lru > 9_500, "lru {lru} of 10000");
    assert!(fifo < lru - 500, "fifo {fifo} lru {lru}");
    assert!(random < lru - 500, "random {random} lru {lru}");
}

#[test]
fn cache_modes_route_writes() {
    // writethrough: both devices, joined; the data is then cached.
    let mut d = Driver::new(bcache("sequential_cutoff = 0"));
    assert_eq!(d.io(Dir::Write, 800, 8), Route::BackingJoined);
    assert!(hit(d.read(100)));
    // writearound: the write goes around and invalidates the cached copy.
    let mut d = Driver::new(bcache("cache_mode = \"writearound\""));
    d.read(100);
    assert!(hit(d.read(100)));
    assert_eq!(d.io(Dir::Write, 800, 8), Route::Backing);
    assert_eq!(d.read(100), Route::Miss, "invalidated");
    assert_eq!(d.b.stats.bypass_mode, 1);
    // none: nothing is cached.
    let mut d = Driver::new(bcache("cache_mode = \"none\""));
    assert_eq!(d.read(100), Route::Backing);
    assert_eq!(d.read(100), Route::Backing);
    assert_eq!(d.io(Dir::Write, 800, 8), Route::Backing);
    // writeback: the write lands in the cache only, dirty.
    let mut d = Driver::new(bcache("cache_mode = \"writeback\""));
    assert!(matches!(d.io(Dir::Write, 800, 8), Route::CacheOnly { .. }));
    // Dirty, or already being written back (writeback starts at once).
    assert_eq!(d.b.dirty_sectors() + d.b.stats.writeback_sectors, 8);
    assert!(hit(d.read(100)));
}

#[test]
fn sequential_streams_over_the_cutoff_bypass() {
    let mut d = Driver::new(bcache(""));
    let routes: Vec<Route> = (0..1100).map(|i| d.read(1_000_000 + i)).collect();
    // 4 MiB = 1024 blocks of 4 KiB: the 1024th and later bypass.
    assert!(routes[..1023].iter().all(|r| *r == Route::Miss));
    assert!(
        routes[1024..].iter().all(|r| *r == Route::Backing),
        "{:?}",
        &routes[1020..1030]
    );
    assert_eq!(d.b.stats.bypass_sequential, 1100 - 1023);
    // Random reads from the same task start new streams; the task's moving
    // average (1/8 of the last stream) is under the cutoff.
    assert_eq!(d.read(scatter(3)), Route::Miss);
    // With the cutoff off, the stream is cached.
    let mut d = Driver::new(bcache("sequential_cutoff = 0"));
    assert!((0..1100).all(|i| d.read(1_000_000 + i) == Route::Miss));
}

#[test]
fn unaligned_io_bypasses() {
    let mut d = Driver::new(bcache("block_size = \"4k\""));
    assert_eq!(d.io(Dir::Read, 1, 8), Route::Backing);
    assert_eq!(d.io(Dir::Read, 8, 1), Route::Backing);
    assert_eq!(d.b.stats.bypass_unaligned, 2);
    assert_eq!(d.io(Dir::Read, 8, 8), Route::Miss);
}

#[test]
fn writes_are_journaled_and_miss_fills_are_not() {
    let mut d = Driver::new(bcache("sequential_cutoff = 0"));
    for i in 0..50 {
        d.read(scatter(i));
    }
    d.b.tick(d.now_ns + 1_000_000_000);
    d.drain();
    assert_eq!(
        d.b.stats.journal_writes, 0,
        "cache-miss inserts are replace inserts"
    );
    for i in 0..50 {
        d.io(Dir::Write, scatter(i) * 8, 8);
    }
    d.now_ns += 200_000_000;
    d.b.tick(d.now_ns);
    d.drain();
    assert!(d.b.stats.journal_writes >= 1, "journal_delay elapsed");
}

#[test]
fn writeback_controller_writes_dirty_data_back() {
    let mut d = Driver::new(bcache("cache_mode = \"writeback\"\nwriteback_percent = 1"));
    // 8 MiB dirty, 1% of 64 MiB is the target: the PD controller speeds up.
    for i in 0..2048 {
        assert!(matches!(
            d.io(Dir::Write, scatter(i) * 8, 8),
            Route::CacheOnly { .. }
        ));
    }
    let dirty0 = d.b.dirty_sectors();
    assert!(dirty0 > 2000 * 8, "{dirty0}");
    for _ in 0..600 {
        d.now_ns += 100_000_000;
        d.b.tick(d.now_ns);
        d.drain();
    }
    let s = d.b.stats;
    assert!(
        s.writeback_writes > 0 && d.b.dirty_sectors() < dirty0,
        "{s:?} dirty {}",
        d.b.dirty_sectors()
    );
    let log = d.b.writeback_rate_log();
    assert!(log.len() >= 10, "{log:?}");
    // The proportional term: (dirty - target) / 40 sectors/s, target 1% of
    // 64 MiB; the integral only adds.
    for &(_, rate, dirty) in log {
        if dirty > 1310 + 40 * 8 {
            assert!(rate >= (dirty as i64 - 1310) / 40, "{log:?}");
        }
    }
    // Writeback follows the rate: it empties most of the dirty data.
    assert!(d.b.dirty_sectors() < dirty0 / 2, "{log:?}");
    // Written-back data is still cached, now clean.
    assert!(hit(d.read(scatter(0))));
    let _ = d.metric("writeback_mib");
}

#[test]
fn scenario_shows_the_three_policies_side_by_side() {
    let out = common::sim_cmd()
        .args([
            "run",
            "scenarios/bcache_policies.toml",
            "--set",
            "job.ramp_time=10s",
            "--set",
            "job.runtime=4s",
        ])
        .args([
            "--set",
            "bcache.cache_size=64m",
            "--set",
            "bcache.bucket_size=64k",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run sim");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The variants table is printed transposed (it is too wide for 100
    // columns): one line per metric, one column per variant.
    let table: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("variants"))
        .collect();
    assert!(table.iter().all(|l| l.len() <= 100), "{stdout}");
    let header: Vec<&str> = table[1].split_whitespace().collect();
    let col = |v: &str| {
        header
            .iter()
            .position(|h| *h == v)
            .unwrap_or_else(|| panic!("{v} in {header:?}"))
    };
    let row = |metric: &str| -> Vec<&str> {
        table
            .iter()
            .find(|l| l.split_whitespace().next() == Some(metric))
            .unwrap_or_else(|| panic!("row {metric}\n{stdout}"))
            .split_whitespace()
            .collect()
    };
    let num = |v: &str, c: &str| -> f64 { row(c)[col(v)].parse().unwrap() };
    for v in ["lru", "fifo", "random"] {
        assert!(num(v, "evictions") > 0.0, "{v} evicts");
        assert!(num(v, "cache_write_ios") > 0.0);
        assert!(num(v, "read_clat_p99_us") > num(v, "read_clat_p50_us"));
        assert!(num(v, "hit_ratio_pct") > 10.0, "{v}");
    }
    assert!(
        num("lru", "hit_ratio_pct") > num("fifo", "hit_ratio_pct"),
        "{stdout}"
    );
    assert!(
        num("lru", "hit_ratio_pct") > num("random", "hit_ratio_pct"),
        "{stdout}"
    );
}
