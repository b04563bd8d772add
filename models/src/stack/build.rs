//! Assembly of the machine from a scenario.

use super::*;

pub(super) fn add_dev(
    devs: &mut Vec<DevNode>,
    names: &mut BTreeMap<String, usize>,
    name: &str,
    dev: Box<dyn BlockDevice>,
    tags: u32,
    fault: Option<Fault>,
) -> Result<(), ModelError> {
    if names.insert(name.to_string(), devs.len()).is_some() {
        return Err(cfg_err(format!("device name {name:?} is used twice")));
    }
    if devs.len() >= u16::MAX as usize {
        return Err(cfg_err("too many devices"));
    }
    let dev = Fault::wrap(fault, name, tags, dev);
    devs.push(DevNode {
        name: name.to_string(),
        inline: dev.completes_inline(),
        dev,
        port: Port::new(tags, PORT_WAIT_BOUND),
        records: DevRecords::default(),
        acct: acct::NO_ACCT,
    });
    Ok(())
}

impl AsyncStack {
    /// Builds the stack for a scenario whose jobs use an asynchronous engine.
    pub fn build(sc: &Scenario, opts: &RunOptions) -> Result<AsyncStack, ModelError> {
        let seed = sc.simulation.seed;
        let ncpu = sc.cpu.logical_cpus() as usize;
        if ncpu == 0 || ncpu > 4096 {
            return Err(cfg_err("[cpu] needs 1..=4096 logical CPUs"));
        }
        let irq_cpu = match sc.cpu.irq_cpu {
            Some(c) if (c as usize) < ncpu => Some(c as usize),
            Some(c) => {
                return Err(cfg_err(format!(
                    "[cpu] irq_cpu = {c} but the machine has {ncpu} logical CPUs (0..{})",
                    ncpu - 1
                )))
            }
            None => None,
        };
        let mut profile = CpuProfile::new(ncpu);
        let ctxs = Contexts {
            fio: profile.context("fio"),
            swapper: profile.context("swapper"),
            kworker: profile.context("kworker/u:1"),
        };
        let resolved = sc.costs.resolve(&mut profile).map_err(cfg_err)?;
        profile.set_enabled(opts.profile);
        let get = |n: &str| resolved.get(n).cloned().unwrap_or_default();
        let paths = Paths {
            fio_prep: get("fio_prep"),
            fio_complete: get("fio_complete"),
            io_submit_call: get("io_submit_call"),
            submit_io: get("submit_io"),
            fs_lookup: get("fs_lookup"),
            make_request: get("make_request"),
            bcache_request: get("bcache_request"),
            issue_cmd: get("issue_cmd"),
            getevents_call: get("getevents_call"),
            reap_event: get("reap_event"),
            sleep: get("sleep"),
            wakeup_target: get("wakeup_target"),
            irq_entry: get("irq_entry"),
            irq_per_cmd: get("irq_per_cmd"),
            wake_remote: get("wake_remote"),
            idle_exit: get("idle_exit"),
            submit_bundles: Vec::new(),
            reap_one: Path::default(),
        }
        .with_bundles();
        let syms = Symbols {
            bset_search: profile.symbol("__bset_search", "[kernel.kallsyms]", Mode::Kernel),
            search_leaf: profile.symbol("btree_search_leaf", "[kernel.kallsyms]", Mode::Kernel),
            btree_insert: profile.symbol("bch_btree_insert", "[kernel.kallsyms]", Mode::Kernel),
            idle: {
                let total: f64 = sc.costs.idle_symbols.iter().map(|s| s.share).sum();
                if !(total > 0.0 && sc.costs.idle_symbols.iter().all(|s| s.share >= 0.0)) {
                    return Err(cfg_err(
                        "[costs] idle_symbols shares must be >= 0 with a positive sum",
                    ));
                }
                sc.costs
                    .idle_symbols
                    .iter()
                    .map(|s| {
                        (
                            profile.symbol(&s.sym, "[kernel.kallsyms]", Mode::Idle),
                            s.share / total,
                        )
                    })
                    .collect()
            },
        };
        if !(0.0..=1.0).contains(&sc.costs.perf_idle_weight) {
            return Err(cfg_err("[costs] perf_idle_weight must be within 0..=1"));
        }

        // Devices. Each gets a port: AHCI NCQ tags, or unbounded for md.
        let ncq_tags = sc.ahci.as_ref().map(|a| a.ncq_tags).unwrap_or(31);
        if ncq_tags == 0 || ncq_tags > 32 {
            return Err(cfg_err("[ahci] ncq_tags must be 1..=32"));
        }
        let mut devs: Vec<DevNode> = Vec::new();
        let mut names: BTreeMap<String, usize> = BTreeMap::new();
        // The device graph: names, what sits on what, no cycles.
        let graph = crate::graph::Graph::of(sc).map_err(|e| cfg_err(e.to_string()))?;
        let in_array = crate::backing::array_members(sc);
        for s in sc.ssd.iter().filter(|s| !in_array.contains(&s.name)) {
            s.validate().map_err(cfg_err)?;
            let tags = if s.interface == "nvme" {
                s.queue_depth
            } else {
                ncq_tags.min(s.queue_depth)
            };
            add_dev(
                &mut devs,
                &mut names,
                &s.name,
                Box::new(Ssd::new(s.clone(), component_rng(seed, &s.name))),
                tags,
                opts.fault,
            )?;
        }
        crate::backing::add_backing_devices(sc, seed, ncq_tags, &mut |name, dev, tags| {
            add_dev(&mut devs, &mut names, name, dev, tags, opts.fault)
        })?;
        for p in &sc.pmem {
            p.validate().map_err(cfg_err)?;
            let dev = Box::new(crate::pmem::Pmem::new(p.clone()));
            let tags = crate::backing::BIO_BASED_TAGS;
            add_dev(&mut devs, &mut names, &p.name, dev, tags, opts.fault)?;
        }

        let mut bcaches = Vec::new();
        // In-flight accounting designs (none in most scenarios).
        let wanted = acct::wanted(sc)?;
        let acct_index = acct::index_by_name(&wanted);
        let accounting = match wanted.is_empty() {
            true => None,
            false => Some(acct::Accounting::new(sc, wanted, &mut profile)?),
        };
        for d in &mut devs {
            d.acct = acct_index.get(&d.name).copied().unwrap_or(acct::NO_ACCT);
        }
        let bcache_acct: Vec<u8> = sc
            .bcache
            .iter()
            .map(|b| acct_index.get(&b.name).copied().unwrap_or(acct::NO_ACCT))
            .collect();
        // Index 0: no layers (most jobs).
        let mut bio_layers = vec![layers::BioLayers::default()];
        let mut targets: BTreeMap<String, Target> = names
            .iter()
            .map(|(n, &i)| (n.clone(), Target::Dev(i)))
            .collect();
        if let Some(b) = &sc.bcache {
            let cache = *names.get(&b.cache).ok_or_else(|| {
                cfg_err(format!("[bcache] cache = {:?} names no [[ssd]]", b.cache))
            })?;
            let backing = *names.get(&b.backing).ok_or_else(|| {
                cfg_err(format!(
                    "[bcache] backing = {:?} names no [[raid10]], [[hdd]] or [[ssd]]",
                    b.backing
                ))
            })?;
            if cache == backing {
                return Err(cfg_err("[bcache] cache and backing must differ"));
            }
            let mut bc = Bcache::new(
                b.clone(),
                devs[cache].dev.capacity_sectors(),
                devs[backing].dev.capacity_sectors(),
                sc.costs.btree.clone(),
                seed,
            )
            .map_err(cfg_err)?;
            bc.populate().map_err(cfg_err)?;
            bc.register_symbols(&mut profile);
            // Its counters restart with the job statistics after ramp_time.
            bc.set_measure_start(sc.jobs.iter().map(|j| j.ramp_time_ns).max().unwrap_or(0));
            if targets.contains_key(&b.name) {
                return Err(cfg_err(format!(
                    "[bcache] name {:?} is already a device",
                    b.name
                )));
            }
            targets.insert(b.name.clone(), Target::Bcache(bcaches.len()));
            bcaches.push((bc, cache, backing));
        }

        let target_size = |t: Target, devs: &[DevNode], bcaches: &[(Bcache, usize, usize)]| match t
        {
            Target::Dev(i) => devs[i].dev.capacity_sectors(),
            Target::Bcache(i) => devs[bcaches[i].2].dev.capacity_sectors(),
        };

        // Jobs.
        let mut threads = Vec::new();
        let mut groups = Vec::new();
        let mut logs = Vec::new();
        let mut next_cpu = 0usize;
        for (gi, j) in sc.jobs.iter().enumerate() {
            if j.ioengine != IoEngine::Libaio {
                return Err(cfg_err(format!(
                    "job `{}`: ioengine {} on this stack is not modelled; use libaio (or io_uring), or target a pmem/dm device for psync",
                    j.name,
                    j.ioengine.as_str()
                )));
            }
            if !j.direct {
                return Err(cfg_err(format!(
                    "job `{}`: buffered I/O (direct=0) is not modelled: the page cache is out of scope; set direct=1",
                    j.name
                )));
            }
            let (target_name, on_file, file_start) = match &sc.filesystem {
                Some(fs) if fs.holds(&j.filename) => (fs.device.clone(), true, fs.file_start.0),
                _ => (crate::graph::device_name(&j.filename).to_string(), false, 0),
            };
            let resolver = layers::Resolver {
                sc,
                graph: &graph,
                targets: &targets,
                make_request: &paths.make_request,
                acct: &acct_index,
            };
            let resolved = match graph.node(&target_name) {
                Some(_) => Some(layers::resolve(&resolver, &mut profile, &target_name)?),
                None => None,
            };
            let (target, bio) = resolved.ok_or_else(|| {
                let known: Vec<&str> = graph.bottom_up().map(|n| n.name.as_str()).collect();
                cfg_err(format!(
                    "job `{}`: filename {:?} is not a device of the stack (known: {}{})",
                    j.name,
                    j.filename,
                    known.join(", "),
                    sc.filesystem
                        .as_ref()
                        .map(|f| format!("; or a file under {}", f.mount))
                        .unwrap_or_default()
                ))
            })?;
            let size_sectors = target_size(target, &devs, &bcaches);
            let start_bytes = file_start + j.offset_bytes;
            let region_bytes = j
                .size_bytes
                .unwrap_or((size_sectors * 512).saturating_sub(start_bytes));
            if start_bytes + region_bytes > size_sectors * 512 || region_bytes < j.bs_bytes_max {
                return Err(cfg_err(format!(
                    "job `{}`: region offset {} + size {} does not fit {} ({} bytes) or is smaller than bs",
                    j.name,
                    start_bytes,
                    region_bytes,
                    target_name,
                    size_sectors * 512
                )));
            }
            let (ios_limit, bytes_limit) = match (j.time_based, j.bs_split.is_empty()) {
                (true, _) => (None, None),
                (false, true) => (Some(j.io_limit_bytes(region_bytes) / j.bs_bytes_min), None),
                // fio ends a job after io_size bytes: with a bssplit mix
                // that is no fixed number of I/Os.
                (false, false) => (None, Some(j.io_limit_bytes(region_bytes))),
            };
            let nothing = ios_limit == Some(0) || bytes_limit.is_some_and(|b| b < j.bs_bytes_min);
            if !j.time_based && j.runtime_ns.is_none() && nothing {
                return Err(cfg_err(format!(
                    "job `{}` has nothing to do (size/io_size below bs)",
                    j.name
                )));
            }
            let layers_index = match bio.is_empty() {
                true => 0,
                false => {
                    bio_layers.push(bio);
                    u16::try_from(bio_layers.len() - 1)
                        .map_err(|_| cfg_err("too many jobs with dm/pmem layers"))?
                }
            };
            for clone in 0..j.numjobs {
                let cpu = match &j.cpus_allowed {
                    Some(list) => {
                        let c = list[clone as usize % list.len()] as usize;
                        if c >= ncpu {
                            return Err(cfg_err(format!(
                                "job `{}`: cpus_allowed names CPU {c} but the machine has {ncpu}",
                                j.name
                            )));
                        }
                        c
                    }
                    None => {
                        // Like the scheduler's wake-affine placement: spread
                        // over CPUs, keeping the IRQ CPU for interrupts.
                        let mut c = next_cpu % ncpu;
                        if Some(c) == irq_cpu && ncpu > 1 {
                            c = (c + 1) % ncpu;
                        }
                        next_cpu = c + 1;
                        c
                    }
                };
                // fio numbers log files by thread over all jobs, from 1.
                logs.push(j.logs.any().then(|| {
                    let index = u32::try_from(logs.len() + 1).unwrap_or(u32::MAX);
                    (LogRecorder::new(index, j.logs.clone(), true), file_start)
                }));
                let seed_j = j.randseed.unwrap_or(seed);
                let mut rng = component_rng(seed_j, &format!("job/{}/{}", j.name, clone));
                let offsets = Offsets::new(j, region_bytes, &mut rng);
                threads.push(JobThread {
                    group: gi,
                    cpu,
                    rng,
                    offsets,
                    target,
                    layers: layers_index,
                    on_file,
                    region_sector: start_bytes / 512,
                    ios_limit,
                    bytes_limit,
                    stop_issue_at: j.runtime_ns.map(|r| SimTime(j.ramp_time_ns + r)),
                    issued: 0,
                    in_flight: 0,
                    ready: VecDeque::new(),
                    state: JobState::Running,
                    action: Action::None,
                    woken_mark: 0,
                });
            }
            groups.push(GroupStats::new());
        }
        if threads.is_empty() && !opts.replay {
            return Err(cfg_err("the scenario has no [[job]]"));
        }
        if threads.len() > u16::MAX as usize {
            return Err(cfg_err("too many job threads (max 65535)"));
        }
        let threads_running = threads.len();
        Ok(AsyncStack {
            seed,
            name: sc.simulation.name.clone(),
            jobs_cfg: sc.jobs.clone(),
            threads,
            groups,
            devs,
            bcaches,
            ios: Slab::with_bound(IO_SLAB_BOUND),
            fills: Slab::with_bound(IO_SLAB_BOUND),
            cpus: Cpus::new(ncpu),
            irq_cpu,
            irq_delivery_ns: sc.ahci.as_ref().map(|a| a.irq_delivery.0).unwrap_or(0),
            profile,
            paths,
            syms,
            ctxs,
            perf_idle_weight: sc.costs.perf_idle_weight,
            measure_start: SimTime::ZERO,
            threads_running,
            sample_interval_ns: sc.simulation.report_interval.0.max(1_000),
            intervals: Some(IntervalSampler::new(sc)),
            logs,
            hit_series: Vec::new(),
            last_sample: (0, 0),
            scratch_timers: Vec::with_capacity(16),
            scratch_done: Vec::with_capacity(16),
            submitted_total: 0,
            reaped_total: 0,
            wake_epoch: 0,
            fault: opts.fault,
            retired_total: 0,
            replay: None,
            acct: accounting,
            bcache_acct,
            completing_cpu: 0,
            bio_layers,
        })
    }
}
