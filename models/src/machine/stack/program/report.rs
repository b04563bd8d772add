//! What the program jobs put in the machine's one report: their `[[job]]`
//! entries, their disks, the summary and metrics tables and the most
//! contended cache lines.

use super::*;

impl Programs {
    /// The clones of program group `g`.
    fn members(&self, g: usize) -> impl Iterator<Item = &PJob> + '_ {
        self.jobs.iter().filter(move |j| j.group == g)
    }

    /// The running totals of `[[job]]` `cfg` for the interval sampler.
    pub(in crate::machine::stack) fn totals(&self, cfg: usize) -> Option<JobTotals<'_>> {
        let g = self.group_of_cfg.get(cfg).copied().flatten()?;
        let (mut ios, mut bytes) = (0, 0);
        for j in self.members(g) {
            ios += j.ios;
            bytes += j.ios * j.bytes_per_io;
        }
        let grp = &self.groups[g];
        let d = usize::from(grp.dir == DDir::Write);
        let mut t = JobTotals {
            ios: [0; 2],
            bytes: [0; 2],
            clat: [self.empty.histogram(), self.empty.histogram()],
            end: None,
        };
        t.ios[d] = ios;
        t.bytes[d] = bytes;
        t.clat[d] = grp.hist.histogram();
        Some(t)
    }

    /// I/Os counted in the measured window, over every program job.
    pub(in crate::machine::stack) fn ios(&self) -> u64 {
        self.jobs.iter().map(|j| j.ios).sum()
    }

    /// fio's report of `[[job]]` `jc` (index `cfg`), if it ran as a program.
    pub(in crate::machine::stack) fn job_report(
        &self,
        cfg: usize,
        jc: &JobConfig,
    ) -> Option<JobReport> {
        let g = self.group_of_cfg.get(cfg).copied().flatten()?;
        let runtime_ns = self.end - self.ramp_end;
        let (mut ios, mut busy, mut user, mut bytes, mut n) = (0, 0, 0, 0, 0u32);
        for j in self.members(g) {
            ios += j.ios;
            busy += j.busy_ns;
            user += j.user_per_io_ns * j.ios;
            bytes += j.ios * j.bytes_per_io;
            n += 1;
        }
        let hist = LatencyHist::from_histogram(&self.groups[g].hist.histogram());
        let dr = DirReport {
            io_bytes: bytes,
            total_ios: ios,
            runtime_ns,
            clat: hist.clone(),
            lat: hist,
            ..DirReport::default()
        };
        let one_cpu = runtime_ns as f64 * f64::from(n) / 100.0;
        let mut jr = JobReport {
            name: jc.name.clone(),
            numjobs: jc.numjobs,
            rw: jc.rw.as_str().into(),
            bs_bytes: jc.bs_bytes_min,
            ioengine: "psync".into(),
            iodepth: 1,
            usr_cpu_pct: user as f64 / one_cpu,
            sys_cpu_pct: busy.saturating_sub(user) as f64 / one_cpu,
            runtime_ns,
            iodepth_level: [100.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            ..JobReport::default()
        };
        match self.groups[g].dir {
            DDir::Write => jr.write = dr,
            DDir::Read => jr.read = dr,
        }
        Some(jr)
    }

    /// The summary, metrics and contended-lines tables.
    pub(in crate::machine::stack) fn tables(&self, acct: &acct::Accounting) -> Vec<Table> {
        let runtime_ns = self.end - self.ramp_end;
        let mut summary = Table::new(
            "psync stack",
            &[
                "device",
                "accounting",
                "jobs",
                "iops",
                "ns_per_io_per_job",
                "contended_wait_pct",
            ],
        );
        for (g, grp) in self.groups.iter().enumerate() {
            let (mut ios, mut stalled, mut n) = (0, 0, 0u64);
            for j in self.members(g) {
                ios += j.ios;
                stalled += j.stalled_ns;
                n += 1;
            }
            let nf = n as f64;
            let per_io = if ios > 0 {
                nf * runtime_ns as f64 / ios as f64
            } else {
                0.0
            };
            let row = vec![
                Cell::Text(grp.filename.clone()),
                Cell::Text(grp.accounting.clone()),
                Cell::UInt(n),
                Cell::float(ios as f64 * 1e9 / runtime_ns as f64, 0),
                Cell::float(per_io, 1),
                Cell::float(stalled as f64 * 100.0 / (nf * runtime_ns as f64), 2),
            ];
            summary.push_row(row).expect("row shape");
        }
        let mut tables = vec![summary, self.metrics_table(runtime_ns)];
        tables.extend(self.contended_lines(acct));
        tables
    }

    /// (name, value) rows the `sim run` variant comparison shows as columns.
    fn metrics_table(&self, runtime_ns: u64) -> Table {
        let mut metrics = Table::new("metrics", &["metric", "value"]);
        let all_jobs = self.jobs.len() as f64;
        let stalled_all: u64 = self.jobs.iter().map(|j| j.stalled_ns).sum();
        let rows = [
            (
                "contended_wait_pct",
                stalled_all as f64 * 100.0 / (all_jobs * runtime_ns as f64),
            ),
            (
                "events_per_io",
                self.events as f64 / self.ios().max(1) as f64,
            ),
        ];
        for (name, v) in rows {
            metrics
                .push_row(vec![Cell::Text(name.into()), Cell::float(v, 2)])
                .expect("row shape");
        }
        metrics
    }

    /// The most contended cache lines of the run (at most six), named by
    /// the device whose design owns them.
    fn contended_lines(&self, acct: &acct::Accounting) -> Option<Table> {
        let coh = acct.coherence_ref();
        let mut lines: Vec<(u64, u32)> = (0..coh.line_count())
            .map(|l| {
                let s = coh.line_stats(LineId(l));
                (s.queued_ns + s.transfer_ns, l)
            })
            .filter(|&(ns, _)| ns > 0)
            .collect();
        lines.sort_by(|a, b| b.cmp(a));
        let mut t = Table::new(
            "contended cache lines",
            &[
                "line",
                "accesses",
                "transfers",
                "remote_pct",
                "transfer_ns_mean",
                "queued_ns_mean",
            ],
        );
        for &(_, l) in lines.iter().take(6) {
            let s = coh.line_stats(LineId(l));
            let name = self
                .inst_paths
                .iter()
                .find_map(|(i, dev)| acct.line_name(*i, LineId(l)).map(|n| format!("{dev} {n}")))
                .unwrap_or_else(|| format!("line {l}"));
            let per = |v: u64| v as f64 / s.transfers.max(1) as f64;
            t.push_row(vec![
                Cell::Text(name),
                Cell::UInt(s.accesses),
                Cell::UInt(s.transfers),
                Cell::float(per(s.remote_transfers * 100), 1),
                Cell::float(per(s.transfer_ns), 1),
                Cell::float(per(s.queued_ns), 1),
            ])
            .expect("row shape");
        }
        Some(t).filter(|t| !t.rows.is_empty())
    }

    /// The report's notes on how the program jobs were priced.
    pub(in crate::machine::stack) fn notes(&self) -> Vec<String> {
        match self.free_transfers {
            true => vec![
                "coherence: free_transfers = true (ablation: cache-line transfers cost nothing)"
                    .into(),
            ],
            false => Vec::new(),
        }
    }

    /// fio's logs of the program jobs that asked for them.
    pub(in crate::machine::stack) fn io_logs(&mut self) -> Vec<blocksim_analysis::fio_log::JobLog> {
        let runtime_ns = self.end - self.ramp_end;
        self.jobs
            .iter_mut()
            .filter_map(|j| j.log.take())
            .map(|r| r.finish(runtime_ns))
            .collect()
    }

    /// fio's disk stats of the devices program jobs use (the layer a job
    /// targets, dm, lists its pmem as member), and those devices' names: they count I/Os and
    /// sectors; ticks, in_queue and util are not simulated here, and a pmem
    /// queue with `iostat` off counts nothing.
    pub(in crate::machine::stack) fn disk_reports(&self) -> (Vec<DiskReport>, Vec<String>) {
        const NOT_SIMULATED: &str = "the psync stack does not simulate ticks, in_queue or util";
        const NO_IOSTAT: &str =
            "the pmem driver's queue has iostats off by default: QUEUE_FLAG_IO_STAT unset";
        let count = |d: &mut DiskReport, ios: u64, dir: DDir| match dir {
            DDir::Read => d.read_ios += ios,
            DDir::Write => d.write_ios += ios,
        };
        let mut top: Option<DiskReport> = None;
        let mut pmems: Vec<DiskReport> = Vec::new();
        let mut names = Vec::new();
        for (g, grp) in self.groups.iter().enumerate() {
            let ios: u64 = self.members(g).map(|j| j.ios).sum();
            if let Some((_, sysfs, path)) = &grp.top {
                let r = top.get_or_insert_with(|| DiskReport {
                    // fio names devices by their sysfs name (dm-0).
                    name: sysfs.clone(),
                    stats_kept: StatsKept::IosOnly,
                    stats_note: format!("{path}; {NOT_SIMULATED}"),
                    ..DiskReport::default()
                });
                count(r, ios, grp.dir);
            }
            let p = &grp.pmem;
            let slot = match pmems.iter().position(|r| r.name == p.name) {
                Some(i) => i,
                None => {
                    pmems.push(DiskReport {
                        name: p.name.clone(),
                        stats_kept: if p.iostat {
                            StatsKept::IosOnly
                        } else {
                            StatsKept::None
                        },
                        stats_note: if p.iostat { NOT_SIMULATED } else { NO_IOSTAT }.into(),
                        ..DiskReport::default()
                    });
                    names.push(p.name.clone());
                    pmems.len() - 1
                }
            };
            if p.iostat {
                count(&mut pmems[slot], ios, grp.dir);
            }
        }
        let reports = match top {
            // The layer's device first, its pmem as member (fio lists a
            // device's slaves after it).
            Some(mut d) => {
                names.extend(
                    self.groups
                        .iter()
                        .filter_map(|g| g.top.as_ref())
                        .map(|(name, ..)| name.clone())
                        .take(1),
                );
                d.members = pmems;
                vec![d]
            }
            None => pmems,
        };
        (reports, names)
    }
}
