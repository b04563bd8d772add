//! Routing of the bios bcache issues to its cache and backing devices.

use super::*;

impl AsyncStack {
    /// Where a bio bcache routed goes: (device, piece, device sector).
    pub(super) fn bcache_route(
        &mut self,
        b: usize,
        io: SlotId,
        sector: u64,
        route: Route,
    ) -> (usize, Piece, u64) {
        let (_, cache, backing) = self.bcaches[b];
        match route {
            Route::CacheRead { cache_sector } => (cache, Piece::BackingRead(io), cache_sector),
            Route::Miss | Route::BackingJoined => (backing, Piece::BackingRead(io), sector),
            Route::Backing => (backing, Piece::User(io), sector),
            Route::CacheOnly {
                cache_sector,
                token,
            } => {
                let f = self
                    .fills
                    .insert(Fill { bcache: b, token })
                    .expect("fill slab bound");
                (cache, Piece::Fill(f), cache_sector)
            }
        }
    }

    /// Submits the device I/Os bcache issued and charges its background CPU
    /// work (inserts, GC, journal, writeback) to a kworker on the IRQ CPU.
    pub(super) fn bcache_pump(&mut self, b: usize, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        if self.bcaches[b].0.nothing_pending() {
            return;
        }
        let (_, cache, backing) = self.bcaches[b];
        for bg in self.bcaches[b].0.take_outbox() {
            let f = self
                .fills
                .insert(Fill {
                    bcache: b,
                    token: bg.token,
                })
                .expect("fill slab bound");
            let dev = match bg.dev {
                BgDev::Cache => cache,
                BgDev::Backing => backing,
            };
            self.block_submit(
                dev,
                Queued {
                    origin: Piece::Fill(f).encode(),
                    dir: bg.dir,
                    sector: bg.sector,
                    sectors: bg.sectors,
                },
                ctx,
            );
        }
        let c = self.bcaches[b].0.take_cpu();
        let total = c.insert_ns + c.gc_ns + c.journal_ns + c.writeback_ns;
        if total == 0 {
            return;
        }
        let cpu = self.irq_cpu_for(cache);
        let k = self.ctxs.kworker;
        self.profile
            .charge(cpu, k, self.syms.btree_insert, c.insert_ns);
        if let Some(s) = self.bcaches[b].0.symbols() {
            self.profile.charge(cpu, k, s.gc, c.gc_ns);
            self.profile.charge(cpu, k, s.journal, c.journal_ns);
            self.profile.charge(cpu, k, s.writeback, c.writeback_ns);
        }
        let (start, _) = self.cpus.start(cpu, now);
        self.cpus.occupy(cpu, start, total);
    }
}
