//! Ramp, sampling and the end-of-run report and profile.

use super::*;

/// Logs one reaped I/O of a job that asked for fio logs (not during its
/// ramp_time; times count from its end).
pub(super) fn log_io(
    rec: &mut LogRecorder,
    file_start_bytes: u64,
    ramp_ns: u64,
    io: &Io,
    now: SimTime,
) {
    let Some(t_ns) = now.as_ns().checked_sub(ramp_ns) else {
        return;
    };
    rec.record(
        t_ns,
        IoLogEntry {
            time_ms: t_ns / 1_000_000,
            dir: match io.dir {
                Dir::Read => blocksim_analysis::Dir::Read,
                Dir::Write => blocksim_analysis::Dir::Write,
                Dir::Discard => blocksim_analysis::Dir::Trim,
                // fio logs no sync latencies.
                Dir::Flush => return,
            },
            bs_bytes: io.sectors * 512,
            offset_bytes: (io.sector * 512).saturating_sub(file_start_bytes),
            slat_ns: io.t_submitted.since(io.t_prep),
            clat_ns: now.since(io.t_submitted),
        },
    );
}

/// A DiskReport of a device's counters over `elapsed_ns`.
pub(super) fn disk_report(
    name: &str,
    s: &DiskStats,
    elapsed_ns: u64,
    kept: (StatsKept, &str),
) -> DiskReport {
    DiskReport {
        name: name.to_string(),
        read_ios: s.ios[0],
        write_ios: s.ios[1],
        read_merges: s.merges[0],
        write_merges: s.merges[1],
        read_ticks_ms: s.ticks_ns[0] / 1_000_000,
        write_ticks_ms: s.ticks_ns[1] / 1_000_000,
        in_queue_ms: s.in_queue_ns / 1_000_000,
        util_pct: s.busy_ns as f64 * 100.0 / elapsed_ns as f64,
        stats_kept: kept.0,
        stats_note: kept.1.to_string(),
        members: Vec::new(),
        queue: None,
    }
}

impl<const OBS: bool> AsyncStack<OBS> {
    /// Describes which jobs still have I/O in flight when no event is left:
    /// a completion was lost somewhere below them.
    pub(super) fn conservation_report(&self, now: SimTime) -> String {
        let mut parts = Vec::new();
        for (i, th) in self.threads.iter().enumerate() {
            if th.state != JobState::Done {
                parts.push(format!(
                    "job {} clone {i}: submitted {}, in flight {} (ready to reap {}), state {:?}",
                    self.jobs_cfg[th.group].name,
                    th.issued,
                    th.in_flight,
                    th.ready.len(),
                    th.state
                ));
            }
        }
        format!(
            "I/O conservation at {now}: no event is pending but jobs are not done (a completion was lost): \
             stack submitted {} I/Os, reaped {}, {} still in flight; {}",
            self.submitted_total,
            self.reaped_total,
            self.submitted_total - self.reaped_total,
            parts.join("; ")
        )
    }

    /// The stacking layers' invariants at the end of a run (see
    /// [`Layer::check_invariants`]).
    pub(super) fn check_cache_invariants(&self) -> Result<(), ModelError> {
        for l in &self.layers {
            l.layer.check_invariants().map_err(ModelError::Invariant)?;
        }
        for d in &self.devs {
            d.dev.check_invariants().map_err(ModelError::Invariant)?;
        }
        Ok(())
    }

    pub(super) fn job_ramp_end(&mut self, group: usize, now: SimTime) {
        if let Some(mut iv) = self.intervals.take() {
            iv.restart(group, &self.group_totals(group), now);
            self.intervals = Some(iv);
        }
        let g = &mut self.groups[group];
        // Only the statistics restart; a size-bound job that already
        // finished during its ramp keeps its end and finished clones.
        let (end, clones_done, first_error) = (g.end, g.clones_done, g.first_error);
        *g = GroupStats::new();
        g.end = end;
        g.clones_done = clones_done;
        g.first_error = first_error;
        g.measure_start = now;
    }

    pub(super) fn ramp_end(&mut self, now: SimTime) {
        self.measure_start = now;
        self.profile.reset();
        if let Some(a) = &mut self.acct {
            a.reset_stats();
        }
        for l in &mut self.layers {
            l.layer.reset_stats(now);
        }
        for d in &mut self.devs {
            d.dev.reset_stats(now);
            d.records.reset(now);
        }
    }

    pub(super) fn sample(&mut self, now: SimTime, ctx: &mut Ctx<'_, Ev>) {
        for l in &mut self.layers {
            l.layer.sample(now.as_ns());
        }
        if let Some(mut iv) = self.intervals.take() {
            for gi in 0..self.groups.len() {
                iv.sample(gi, &self.group_totals(gi), now);
            }
            self.intervals = Some(iv);
        }
        // Keep sampling while anything else is pending; if only the sampler
        // is left, the run must drain so a lost completion is reported.
        let running = self.threads_running > 0 || self.replay.is_some() || self.programs_running();
        if running && ctx.pending_events() > 0 {
            ctx.schedule_in(self.sample_interval_ns, Ev::Sample);
        }
    }

    /// fio's report of each `[[job]]` (all its clones), up to `end`.
    fn job_reports(&self, end: SimTime) -> Vec<JobReport> {
        let mut jobs = Vec::new();
        let group_ids = super::pace::report_group_ids(&self.jobs_cfg);
        for (gi, jc) in self.jobs_cfg.iter().enumerate() {
            if let Some(jr) = self.programs.as_ref().and_then(|p| p.job_report(gi, jc)) {
                jobs.push(JobReport {
                    groupid: group_ids[gi],
                    ..jr
                });
                continue;
            }
            let g = &self.groups[gi];
            let run_end = g.end.unwrap_or(end);
            let runtime_ns = run_end.since(g.measure_start).max(1);
            let dir_report = |d: usize| g.dir_report(d, runtime_ns);
            let pct = |a: &[u64; 7]| {
                let total: u64 = a.iter().sum();
                let mut out = [0.0; 7];
                if total > 0 {
                    for (o, v) in out.iter_mut().zip(a) {
                        *o = *v as f64 * 100.0 / total as f64;
                    }
                }
                out
            };
            let per_job_cpu = runtime_ns as f64 * jc.numjobs as f64;
            jobs.push(JobReport {
                error: match g.first_error {
                    Some(IoError {
                        latency_ns: Some(_),
                        ..
                    }) => ETIMEDOUT,
                    Some(_) => EIO,
                    None => 0,
                },
                name: jc.name.clone(),
                groupid: group_ids[gi],
                numjobs: jc.numjobs,
                rw: jc.rw.as_str().to_string(),
                bs_bytes: jc.bs_bytes_min,
                ioengine: jc.engine_name().to_string(),
                iodepth: jc.iodepth,
                pid: 1000 + gi as u32,
                read: dir_report(0),
                write: dir_report(1),
                trim: dir_report(2),
                sync: SyncReport {
                    total_ios: g.sync_ios,
                    lat: LatencyHist::from_histogram(&g.sync_lat.histogram()),
                },
                usr_cpu_pct: g.usr_ns as f64 * 100.0 / per_job_cpu,
                sys_cpu_pct: g.sys_ns as f64 * 100.0 / per_job_cpu,
                ctx: g.ctx_switches,
                majf: 0,
                minf: 0,
                iodepth_level: pct(&g.depth),
                iodepth_submit: pct(&g.submit),
                iodepth_complete: pct(&g.complete),
                runtime_ns,
                cpu_modelled: true,
            });
        }
        jobs
    }

    /// Builds the report at the end of the run.
    pub fn report(&mut self, end: SimTime, with_profile: bool) -> RunReport {
        assert_eq!(
            self.submitted_total,
            self.reaped_total + self.threads.iter().map(|t| t.in_flight as u64).sum::<u64>(),
            "I/O conservation violated: submitted != reaped + in flight"
        );
        let mut jobs = self.job_reports(end);
        let elapsed = end.since(self.measure_start).max(1);
        let disks = self.disk_reports(end, elapsed);
        let (intervals, io_logs) = self.finish_series(end);
        let mut extra_tables = Vec::new();
        let mut notes = self.error_notes();
        self.mark_cpu_not_modelled(&mut jobs, &mut notes);
        if let (Some(p), Some(a)) = (&self.programs, &self.acct) {
            extra_tables.extend(p.tables(a));
            notes.extend(p.notes());
        }
        for li in 0..self.layers.len() {
            let cx = LayerReportCx {
                m: self,
                layer: li,
                end,
            };
            extra_tables.extend(self.layers[li].layer.report_tables(&cx));
        }
        notes.extend(self.layers.iter().flat_map(|l| l.layer.report_notes()));
        notes.extend(self.devs.iter().flat_map(|d| d.dev.notes()));
        self.buffered_notes(&mut notes);
        if let Some(a) = &self.acct {
            let mut ios: u64 = self.groups.iter().map(|g| g.ios[0] + g.ios[1]).sum();
            if let Some(p) = &self.programs {
                ios += p.ios();
            }
            extra_tables.extend(a.lines_table(ios));
        }
        self.queue_tables(&mut extra_tables);
        // What each SSD's flash did (nothing from a drive that saw no write).
        for d in &self.devs {
            extra_tables.extend(d.dev.report_tables(end));
        }
        let profile = with_profile.then(|| self.build_profile(elapsed));
        RunReport {
            seed: self.seed,
            scenario_name: self.name.clone(),
            jobs,
            disks,
            profile,
            extra_tables,
            notes,
            intervals,
            io_logs,
            steadystate: self
                .groups
                .iter()
                .enumerate()
                .filter_map(|(i, g)| g.steady.as_ref().map(|t| t.report(i)))
                .collect(),
        }
    }

    /// A run that charged no CPU time: its jobs' CPU figures and slat are
    /// not modelled, and a note says so.
    fn mark_cpu_not_modelled(&self, jobs: &mut [JobReport], notes: &mut Vec<String>) {
        if !jobs.is_empty() && !self.cpu_charged(jobs) {
            for j in jobs.iter_mut() {
                j.cpu_modelled = false;
            }
            notes.push(blocksim_analysis::CPU_NOT_MODELLED_NOTE.to_string());
        }
    }

    /// True when the run charged CPU time: some CPU was occupied or some
    /// job was charged user or system time.
    pub(super) fn cpu_charged(&self, jobs: &[JobReport]) -> bool {
        self.cpus.busy_ns() > 0 || jobs.iter().any(|j| j.usr_cpu_pct + j.sys_cpu_pct > 0.0)
    }

    /// fio's line for each job a failed I/O ended.
    fn error_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for (g, jc) in self.groups.iter().zip(&self.jobs_cfg) {
            if let Some(e) = g.first_error {
                let dir = match e.dir {
                    Dir::Read => "read",
                    Dir::Write => "write",
                    Dir::Discard => "trim",
                    Dir::Flush => "sync",
                };
                notes.push(match e.latency_ns {
                    // fio's lat_fatal.
                    Some((lat, max)) => format!(
                        "fio: latency of {lat} nsec exceeds specified max ({max} nsec): {} {dir} {} {}",
                        jc.filename, e.offset_bytes, e.len_bytes
                    ),
                    None => format!(
                        "fio: io_u error on file {}: Input/output error: {dir} offset={}, buflen={}",
                        jc.filename, e.offset_bytes, e.len_bytes
                    ),
                });
            }
        }
        notes
    }

    /// fio's disk stats: every stacking layer an I/O can pass (2011 bcache
    /// keeps none), then every device, a layer that lists its members (md
    /// with its disks) in the place of its first member whether or not an
    /// I/O passes it (as every device is listed).
    pub(super) fn disk_reports(&self, end: SimTime, elapsed: u64) -> Vec<DiskReport> {
        let (mut disks, covered) = match &self.programs {
            Some(p) => p.disk_reports(),
            None => (Vec::new(), Vec::new()),
        };
        let shown = |name: &str| covered.iter().any(|c| c == name);
        let reached = self.layers_reached();
        // A layer that lists its members (md) stands where its first
        // member device would.
        let mut holder = vec![None; self.devs.len()];
        for (i, l) in self.layers.iter().enumerate() {
            let unused = !reached[i] && !l.layer.report_members();
            if l.holds_requests || unused || shown(l.layer.name()) {
                // Above the block layer (no block device of its own), under
                // no job's file, or a program's.
                continue;
            }
            if !l.layer.report_members() {
                disks.push(self.layer_disk_report(i, end, elapsed));
                continue;
            }
            for (k, b) in l.below.iter().enumerate() {
                if let Target::Dev(d) = b.target() {
                    holder[d] = Some((i, k == 0));
                }
            }
        }
        for (i, d) in self
            .devs
            .iter()
            .enumerate()
            .filter(|(_, d)| !shown(&d.name))
        {
            match holder[i] {
                Some((l, true)) => disks.push(self.layer_disk_report(l, end, elapsed)),
                Some((_, false)) => {}
                None => {
                    let stats = d.dev.disk_stats(end);
                    let mut r = disk_report(&d.name, &stats, elapsed, d.dev.stats_kept());
                    r.queue = Some(d.records.report(end, d.dev.in_flight_integral_ns(end)));
                    disks.push(r);
                }
            }
        }
        disks
    }

    /// Which layers a queued job's or a replayed I/O can pass (fio lists
    /// the devices under the jobs' files): those a job targets and every
    /// node under them; all of them under a replay. Bounded: the graph is
    /// acyclic.
    fn layers_reached(&self) -> Vec<bool> {
        let mut reached = vec![self.replay.is_some(); self.layers.len()];
        let mut stack: Vec<Target> = self.threads.iter().map(|t| t.target).collect();
        stack.extend(
            self.threads
                .iter()
                .filter_map(|t| t.buffered.as_ref())
                .map(|b| Target::Layer(usize::from(b.layer))),
        );
        while let Some(t) = stack.pop() {
            if let Target::Layer(l) = t {
                if !std::mem::replace(&mut reached[l], true) {
                    stack.extend(self.layers[l].below.iter().map(|b| b.target()));
                }
            }
        }
        reached
    }

    /// Layer `l`'s disk statistics, with its member devices' under it when
    /// it lists them ([`crate::layers::layer::Layer::report_members`]).
    fn layer_disk_report(&self, l: usize, end: SimTime, elapsed: u64) -> DiskReport {
        let node = &self.layers[l];
        let layer = &node.layer;
        let stats = layer.disk_stats(end).unwrap_or_default();
        let mut r = disk_report(layer.name(), &stats, elapsed, layer.stats_kept());
        r.queue = layer.queue_records(end);
        if layer.report_members() {
            for b in &node.below {
                if let Target::Dev(d) = b.target() {
                    let dev = &self.devs[d];
                    let kept = (dev.dev.stats_kept().0, "");
                    r.members.push(disk_report(
                        &dev.name,
                        &dev.dev.disk_stats(end),
                        elapsed,
                        kept,
                    ));
                }
            }
        }
        r
    }

    /// The per-interval report (None without jobs) and the fio logs.
    pub(super) fn finish_series(
        &mut self,
        end: SimTime,
    ) -> (
        Option<blocksim_analysis::IntervalReport>,
        Vec<blocksim_analysis::fio_log::JobLog>,
    ) {
        let intervals = self.intervals.take().map(|iv| {
            let totals: Vec<JobTotals<'_>> = (0..self.groups.len())
                .map(|g| self.group_totals(g))
                .collect();
            iv.finish(&totals, end)
        });
        let mut io_logs = Vec::new();
        for (t, log) in self.logs.iter_mut().enumerate() {
            if let Some((rec, _)) = log.take() {
                let g = &self.groups[self.threads[t].group];
                let run_end = g.end.unwrap_or(end);
                io_logs.push(rec.finish(run_end.since(g.measure_start)));
            }
        }
        if let Some(p) = self.programs.as_deref_mut() {
            io_logs.extend(p.io_logs());
        }
        (intervals.filter(|iv| !iv.rows.is_empty()), io_logs)
    }

    /// `[[job]]` `g`'s running totals, whichever way it runs.
    fn group_totals(&self, g: usize) -> JobTotals<'_> {
        self.programs
            .as_ref()
            .and_then(|p| p.totals(g))
            .unwrap_or_else(|| self.groups[g].totals())
    }

    pub(super) fn build_profile(&mut self, elapsed: u64) -> Profile {
        // Idle time on every CPU, sampled at perf_idle_weight.
        let ncpu = self.cpus.count();
        let swapper = self.ctxs.swapper;
        for cpu in 0..ncpu {
            let busy = self.profile.cpu_mode_ns(cpu, Mode::User)
                + self.profile.cpu_mode_ns(cpu, Mode::Kernel);
            let idle = elapsed.saturating_sub(busy);
            let sampled = idle as f64 * self.perf_idle_weight;
            for i in 0..self.syms.idle.len() {
                let (sym, share) = self.syms.idle[i];
                self.profile
                    .charge(cpu, swapper, sym, (sampled * share).round() as u64);
            }
        }
        crate::cpu::profile::finish(crate::cpu::profile::rows(&self.profile), None)
    }
}

/// What a layer reads of the run for its report tables: the machine at the
/// end of the run, seen from layer `layer`.
struct LayerReportCx<'a, const OBS: bool> {
    m: &'a AsyncStack<OBS>,
    layer: usize,
    end: SimTime,
}

impl<const OBS: bool> crate::layers::layer::ReportCx for LayerReportCx<'_, OBS> {
    fn disk_below(&self, below: usize) -> DiskStats {
        let m = self.m;
        let dev = m.first_dev(m.layers[self.layer].below[below].target());
        m.devs[dev].dev.disk_stats(self.end)
    }

    fn jobs_clat(&self, dir: usize) -> LatencyHist {
        let mut clat = LatencyHist::default();
        for g in &self.m.groups {
            clat.merge(&LatencyHist::from_histogram(&g.clat[dir].histogram()));
        }
        clat
    }

    fn jobs_wrote(&self) -> bool {
        self.m.groups.iter().any(|g| g.ios[1] != 0)
    }
}
