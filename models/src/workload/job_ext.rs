//! fio options beyond the core set of `job`: zoned random distributions
//! (`random_distribution=zoned:` / `zoned_abs:`), `blockalign`, the
//! verify family, and the value checks of options accepted without
//! effect (I/O priorities, NUMA placement).

use blocksim_sim::units::{parse_duration_ns, parse_size_bytes};

use crate::workload::opt::{parse_cpu_list, OptValue};

/// fio's ZONESPLIT_MAX: entries in one zone list.
pub const ZONES_MAX: usize = 256;

/// One entry of a `zoned` / `zoned_abs` list: `access_pct` of the random
/// I/Os land in this zone. `size` is a percentage of the region
/// (`zoned`) or bytes (`zoned_abs`); zones follow each other from the
/// region's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ZoneSplit {
    pub access_pct: u32,
    pub size: u64,
}

/// A parsed `random_distribution=zoned...`: one list per direction
/// (read, write, trim), as fio's `str_split_parse` fills them (one list
/// serves all three; two lists: the second also serves trims).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZonedLists {
    pub absolute: bool,
    pub lists: [Vec<ZoneSplit>; 3],
}

/// `Some` when `s` is a zoned distribution (then parsed), `None` when it
/// is another distribution.
pub fn parse_zoned(s: &str) -> Option<Result<ZonedLists, String>> {
    let s = s.trim();
    let (absolute, rest) = if let Some(r) = s.strip_prefix("zoned_abs:") {
        (true, r)
    } else if let Some(r) = s.strip_prefix("zoned:") {
        (false, r)
    } else if s == "zoned" || s == "zoned_abs" {
        return Some(Err(format!(
            "{s}:ACCESS/SIZE:... with at least one zone, e.g. \"zoned:60/10:30/20:10/70\""
        )));
    } else {
        return None;
    };
    Some(parse_zoned_lists(absolute, rest))
}

fn parse_zoned_lists(absolute: bool, rest: &str) -> Result<ZonedLists, String> {
    let parts: Vec<&str> = rest.split(',').collect();
    if parts.len() > 3 {
        return Err("at most three `,`-separated lists (reads, writes, trims)".into());
    }
    let mut lists: [Vec<ZoneSplit>; 3] = Default::default();
    for (d, list) in lists.iter_mut().enumerate() {
        // fio: one list serves all directions; the write list also trims.
        let text = parts.get(d).or(parts.last()).copied().unwrap_or("");
        *list = parse_zone_list(absolute, text)?;
    }
    if lists.iter().all(|l| l.is_empty()) {
        return Err("at least one ACCESS/SIZE zone".into());
    }
    Ok(ZonedLists { absolute, lists })
}

/// One direction's list, fio's `zone_split_ddir`: `ACCESS/SIZE:...`;
/// a missing size (`20/`) takes an equal share of what the others leave.
fn parse_zone_list(absolute: bool, text: &str) -> Result<Vec<ZoneSplit>, String> {
    let mut zones: Vec<(u32, Option<u64>)> = Vec::new();
    for part in text.split(':').take_while(|p| !p.trim().is_empty()) {
        let (access, size) = part.split_once('/').unwrap_or((part, ""));
        let access: u32 = access
            .trim()
            .parse()
            .ok()
            .filter(|a| *a <= 100)
            .ok_or_else(|| format!("an access percentage 0..=100 before `/` (not {part:?})"))?;
        let size = size.trim();
        let size = match (absolute, size) {
            (_, "") => None,
            (true, s) => Some(parse_size_bytes(s).map_err(|e| e.hint.to_string())?),
            (false, s) => match s.parse::<u64>() {
                Ok(0) => None,
                Ok(p) => Some(p.min(100)),
                Err(_) => return Err(format!("ACCESS/SIZE_PERCENT entries (not {part:?})")),
            },
        };
        zones.push((access, size));
        if zones.len() > ZONES_MAX {
            return Err(format!("at most {ZONES_MAX} zones in a list"));
        }
    }
    if zones.is_empty() {
        return Ok(Vec::new());
    }
    let access: u32 = zones.iter().map(|z| z.0).sum();
    if access != 100 {
        return Err(format!(
            "access percentages that add up to 100 (they add up to {access})"
        ));
    }
    fill_zone_sizes(absolute, zones)
}

fn fill_zone_sizes(
    absolute: bool,
    zones: Vec<(u32, Option<u64>)>,
) -> Result<Vec<ZoneSplit>, String> {
    if absolute {
        if zones.iter().any(|z| z.1.is_none_or(|b| b == 0)) {
            return Err(
                "a size after every `/` of zoned_abs, e.g. \"zoned_abs:60/2g:40/6g\"".into(),
            );
        }
        return Ok(zones
            .into_iter()
            .map(|(access_pct, size)| ZoneSplit {
                access_pct,
                size: size.unwrap_or(0),
            })
            .collect());
    }
    let given: u64 = zones.iter().filter_map(|z| z.1).sum();
    if given > 100 {
        return Err(format!(
            "zone sizes that add up to at most 100% (they add up to {given})"
        ));
    }
    let missing = zones.iter().filter(|z| z.1.is_none()).count() as u64;
    let fill = (100 - given).checked_div(missing).unwrap_or(0);
    Ok(zones
        .into_iter()
        .map(|(access_pct, size)| ZoneSplit {
            access_pct,
            size: size.unwrap_or(fill),
        })
        .collect())
}

/// The list a job uses: its direction's. A job that both reads and writes
/// draws its offsets before the direction, so its read and write lists
/// must agree.
pub fn zones_for_job(z: &ZonedLists, read_pct: u32, trims: bool) -> Result<Vec<ZoneSplit>, String> {
    if trims {
        return Ok(z.lists[2].clone());
    }
    match read_pct {
        100 => Ok(z.lists[0].clone()),
        0 => Ok(z.lists[1].clone()),
        _ if z.lists[0] != z.lists[1] => Err(
            "one zone list for reads and writes on a job that does both (blocksim draws the offset before the direction; per-direction lists that differ are not modelled)"
                .into(),
        ),
        _ => Ok(z.lists[0].clone()),
    }
}

/// fio's `blockalign` / `ba`: one alignment, or per-direction values that
/// agree; a positive multiple of 512 bytes.
pub fn parse_block_align(v: &OptValue) -> Result<u64, String> {
    let text = match v {
        OptValue::Int(i) if *i > 0 => return check_align(*i as u64),
        OptValue::Str(s) => s.trim().to_string(),
        _ => return Err("a positive multiple of 512 bytes, e.g. \"4k\"".into()),
    };
    let mut value = None;
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let b = check_align(parse_size_bytes(part).map_err(|e| e.hint.to_string())?)?;
        if value.is_some_and(|v| v != b) {
            return Err("one alignment for all directions (per-direction values that differ are not modelled)".into());
        }
        value = Some(b);
    }
    value.ok_or_else(|| "a positive multiple of 512 bytes, e.g. \"4k\"".into())
}

fn check_align(b: u64) -> Result<u64, String> {
    if b == 0 || b % 512 != 0 {
        return Err("a positive multiple of 512 bytes, e.g. \"4k\"".into());
    }
    Ok(b)
}

/// fio's verify options that shape the I/O: after the writes, or every
/// `backlog` writes, the written blocks are read back. Data contents are
/// not modelled, so nothing is compared.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct VerifyOptions {
    /// fio `verify=TYPE` (None: no verify; fio's `verify=0`/`none`).
    pub kind: Option<String>,
    /// fio `do_verify` (default true): the read-back phase after the writes.
    pub do_verify: bool,
    /// fio `verify_backlog=N`: read back after every N writes (0: only at
    /// the end).
    pub backlog: u64,
    /// fio `verify_backlog_batch` (None: `backlog`): blocks read back each
    /// time.
    pub backlog_batch: Option<u64>,
}

impl VerifyOptions {
    pub fn new() -> VerifyOptions {
        VerifyOptions {
            do_verify: true,
            ..VerifyOptions::default()
        }
    }

    /// Whether the job reads back what it wrote.
    pub fn active(&self) -> bool {
        self.kind.is_some() && (self.do_verify || self.backlog > 0)
    }

    /// Blocks read back per backlog check.
    pub fn batch(&self) -> u64 {
        self.backlog_batch.unwrap_or(self.backlog)
    }
}

/// The note for a verify job: what is issued, and that nothing is
/// compared.
pub fn verify_note(name: &str, v: &VerifyOptions) -> Option<String> {
    let kind = v.kind.as_deref()?;
    let when = match (v.backlog, v.do_verify) {
        (0, false) => return Some(format!(
            "job `{name}`: verify={kind} with do_verify=0 and no verify_backlog: nothing is read back"
        )),
        (0, true) => "after the writes".to_string(),
        (n, true) => format!("{} after every {n} writes and the rest after the writes", v.batch()),
        (n, false) => format!("{} after every {n} writes", v.batch()),
    };
    Some(format!(
        "job `{name}`: verify={kind}: the blocks written are read back ({when}) and timed as reads; no data are compared (data contents are not modelled)"
    ))
}

/// fio's `verify=` types.
pub const VERIFY_KINDS: &[&str] = &[
    "md5",
    "crc64",
    "crc32c",
    "crc32c-intel",
    "crc32",
    "crc16",
    "crc7",
    "xxhash",
    "sha512",
    "sha384",
    "sha256",
    "sha1",
    "sha3-224",
    "sha3-256",
    "sha3-384",
    "sha3-512",
    "meta",
    "pattern",
    "null",
];

/// The verify options blocksim takes; those that only change what is
/// checked in the data are validated and have no further effect.
pub const VERIFY_OPTIONS: &[&str] = &[
    "verify",
    "do_verify",
    "verify_backlog",
    "verify_backlog_batch",
    "verify_interval",
    "verify_offset",
    "verify_pattern",
    "verify_pattern_interval",
    "verify_fatal",
    "verify_dump",
    "verify_async",
    "verify_async_cpus",
    "verify_state_save",
    "verify_state_load",
    "verify_write_sequence",
    "verify_header_seed",
    "experimental_verify",
];

/// Takes one verify option; `Err(expected)` for a bad value.
pub fn apply_verify(o: &mut VerifyOptions, key: &str, v: &OptValue) -> Result<(), String> {
    let text = v.text_trimmed();
    match key {
        "verify" => {
            o.kind = match text.as_str() {
                "0" | "none" => None,
                k if VERIFY_KINDS.contains(&k) => Some(k.to_string()),
                _ => return Err(format!("0, none or one of {}", VERIFY_KINDS.join(", "))),
            }
        }
        "do_verify" => o.do_verify = flag(&text)?,
        "verify_backlog" => o.backlog = count(&text)?,
        "verify_backlog_batch" => o.backlog_batch = Some(count(&text)?),
        "verify_interval" | "verify_offset" | "verify_pattern_interval" => {
            parse_size_bytes(&text).map_err(|e| e.hint.to_string())?;
        }
        "verify_pattern" if text.is_empty() => {
            return Err("a pattern such as 0xaa555aa5, \"abcd\" or %o".into())
        }
        "verify_async" => {
            count(&text)?;
        }
        "verify_async_cpus" => {
            parse_cpu_list(&text).ok_or("a CPU list such as \"0-5,12\"")?;
        }
        "verify_pattern" => {}
        _ => {
            flag(&text)?;
        }
    }
    Ok(())
}

fn flag(s: &str) -> Result<bool, String> {
    match s {
        "1" | "true" | "" => Ok(true),
        "0" | "false" => Ok(false),
        _ => Err("0, 1, true or false".into()),
    }
}

fn count(s: &str) -> Result<u64, String> {
    s.parse::<u64>()
        .map_err(|_| "a non-negative integer".to_string())
}

/// What fio's steady-state detection measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum SsMetric {
    #[default]
    Iops,
    Bw,
    Lat,
}

/// fio's steady-state options (`steadystate`/`ss`, `ss_dur`, `ss_ramp`,
/// `ss_interval`): every `interval_ns` the job's IOPS, bandwidth and mean
/// completion latency since the last check are sampled; once `dur_ns` of
/// samples after `ramp_ns` meet the criterion the job ends.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SteadyState {
    pub metric: SsMetric,
    /// Least-squares slope (else the largest deviation from the mean).
    pub slope: bool,
    /// `limit` is a percentage of the mean.
    pub pct: bool,
    /// The threshold: IOPS, bytes/s, ns, or % of the mean.
    pub limit: f64,
    /// The window (0: no detection, fio's default).
    pub dur_ns: u64,
    pub ramp_ns: u64,
    pub interval_ns: u64,
}

impl Default for SteadyState {
    /// fio's defaults: `ss=iops_slope:0.01%`, a 1 s check interval, off.
    fn default() -> Self {
        SteadyState {
            metric: SsMetric::Iops,
            slope: true,
            pct: true,
            limit: 0.01,
            dur_ns: 0,
            ramp_ns: 0,
            interval_ns: 1_000_000_000,
        }
    }
}

impl SteadyState {
    pub fn active(&self) -> bool {
        self.dur_ns > 0
    }

    /// Samples in the window.
    pub fn samples(&self) -> u64 {
        self.dur_ns / self.interval_ns.max(1)
    }
}

/// The steady-state options and their aliases.
pub const STEADY_OPTIONS: &[&str] = &[
    "steadystate",
    "ss",
    "steadystate_duration",
    "ss_dur",
    "steadystate_ramp_time",
    "ss_ramp",
    "steadystate_check_interval",
    "ss_interval",
];

/// Takes one steady-state option; `Err(expected)` for a bad value.
pub fn apply_steady(ss: &mut SteadyState, key: &str, v: &OptValue) -> Result<(), String> {
    let text = v.text_trimmed();
    let secs = |t: &str| {
        parse_duration_ns(t, 1_000_000_000)
            .map_err(|e| format!("a duration (bare numbers are seconds): {}", e.hint))
    };
    match key {
        "steadystate" | "ss" => parse_criterion(ss, &text)?,
        "steadystate_duration" | "ss_dur" => ss.dur_ns = secs(&text)?,
        "steadystate_ramp_time" | "ss_ramp" => ss.ramp_ns = secs(&text)?,
        _ => {
            let ns = secs(&text)?;
            if ns < 1_000_000 {
                return Err("a check interval of at least 1ms".into());
            }
            ss.interval_ns = ns;
        }
    }
    Ok(())
}

/// `iops:10%`, `bw_slope:1%`, `iops:2`, `bw:10m` (bytes/s), `lat:5%`,
/// `lat:100us` (a bare latency is microseconds, as fio's time options).
fn parse_criterion(ss: &mut SteadyState, text: &str) -> Result<(), String> {
    let expected = "CRITERION:LIMIT with CRITERION iops, iops_slope, bw, bw_slope, lat or lat_slope and LIMIT a number or a percentage, e.g. \"iops:10%\" or \"bw_slope:1%\"";
    let (name, limit) = text.split_once(':').ok_or(expected)?;
    let (metric, slope) = match name.trim() {
        "iops" => (SsMetric::Iops, false),
        "iops_slope" => (SsMetric::Iops, true),
        "bw" => (SsMetric::Bw, false),
        "bw_slope" => (SsMetric::Bw, true),
        "lat" => (SsMetric::Lat, false),
        "lat_slope" => (SsMetric::Lat, true),
        _ => return Err(expected.into()),
    };
    let limit = limit.trim();
    let (pct, value) = match limit.strip_suffix('%') {
        Some(p) => (true, p.trim().parse::<f64>().ok()),
        None => match metric {
            SsMetric::Iops => (false, limit.parse::<f64>().ok()),
            SsMetric::Bw => (false, parse_size_bytes(limit).ok().map(|b| b as f64)),
            SsMetric::Lat => (
                false,
                parse_duration_ns(limit, 1_000).ok().map(|n| n as f64),
            ),
        },
    };
    let value = value
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or(expected)?;
    *ss = SteadyState {
        metric,
        slope,
        pct,
        limit: value,
        ..*ss
    };
    Ok(())
}

/// fio's strided zone options (`zonemode=strided`).
pub const ZONE_OPTIONS: &[&str] = &["zonemode", "zonesize", "zonerange", "zoneskip"];

/// fio's strided zones (io_u.c `setup_strided_zone_mode`): a job does
/// `size_bytes` of I/O in a zone of `range_bytes` starting at the zone's
/// start (repeating the zone when `size_bytes` > `range_bytes`), then the
/// next zone starts `range_bytes + skip_bytes` further on, wrapping to the
/// start past the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Strided {
    pub size_bytes: u64,
    pub range_bytes: u64,
    pub skip_bytes: u64,
}

/// The zone options of one job as written, resolved when all are read.
#[derive(Debug, Clone, Default)]
pub struct ZoneOptions {
    /// `zonemode`: None if not given.
    mode: Option<String>,
    size: Option<(u64, String)>,
    range: Option<(u64, String)>,
    skip: Option<(u64, String)>,
}

/// Takes one of [`ZONE_OPTIONS`].
pub fn apply_zone_option(z: &mut ZoneOptions, key: &str, v: &OptValue) -> Result<(), String> {
    let text = v.text_trimmed();
    if key == "zonemode" {
        return match text.as_str() {
            "none" | "strided" => {
                z.mode = Some(text);
                Ok(())
            }
            "zbd" => Err("none or strided (zonemode=zbd, fio's host-managed zoned block device mode, is not modelled: blocksim's devices have no zones)".into()),
            _ => Err("none, strided or zbd".into()),
        };
    }
    let bytes = match v {
        OptValue::Int(i) if *i >= 0 => *i as u64,
        _ => parse_size_bytes(&text).map_err(|e| e.hint.to_string())?,
    };
    let slot = match key {
        "zonesize" => &mut z.size,
        "zonerange" => &mut z.range,
        _ => &mut z.skip,
    };
    *slot = Some((bytes, text));
    Ok(())
}

impl ZoneOptions {
    /// The value of `key` as written (for an error).
    pub fn written(&self, key: &str) -> String {
        let slot = match key {
            "zonemode" => return self.mode.clone().unwrap_or_default(),
            "zonesize" => &self.size,
            "zonerange" => &self.range,
            _ => &self.skip,
        };
        slot.as_ref().map(|(_, t)| t.clone()).unwrap_or_default()
    }

    /// fio's init.c `fixup_options`: a zonesize without zonemode means
    /// strided; zonerange defaults to zonesize. `Err((option, expected))`.
    pub fn resolve(&self, random: bool) -> Result<Option<Strided>, (&'static str, String)> {
        let size = self.size.as_ref().map(|s| s.0).filter(|&b| b > 0);
        let strided = match (self.mode.as_deref(), size) {
            (Some("none"), Some(_)) => {
                return Err((
                    "zonesize",
                    "no zonesize with zonemode=none (fio refuses the pair)".into(),
                ))
            }
            (Some("strided"), None) => {
                return Err((
                    "zonemode",
                    "a zonesize with zonemode=strided (fio requires one)".into(),
                ))
            }
            (_, None) => return Ok(None),
            (_, Some(size_bytes)) => Strided {
                size_bytes,
                range_bytes: self.range.as_ref().map_or(size_bytes, |r| r.0).max(1),
                skip_bytes: self.skip.as_ref().map_or(0, |s| s.0),
            },
        };
        if random {
            // fio's random offsets in a strided zone (a map of zonerange,
            // reset each zone) are not modelled.
            return Err((
                "zonemode",
                "strided zones with a sequential rw (random I/O in strided zones is not modelled)"
                    .into(),
            ));
        }
        if strided.range_bytes % 512 != 0 || strided.skip_bytes % 512 != 0 {
            return Err((
                "zonerange",
                "zonerange and zoneskip in multiples of 512 bytes".into(),
            ));
        }
        Ok(Some(strided))
    }
}

/// Checks the value of an option accepted without effect (I/O priorities,
/// NUMA placement); `Err(expected)` for a bad one.
pub fn check_no_effect_value(key: &str, v: &OptValue) -> Result<(), String> {
    let text = v.text_trimmed();
    let per_dir = |max: u64, what: &str| -> Result<(), String> {
        for p in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if !p.parse::<u64>().is_ok_and(|n| n <= max) {
                return Err(format!(
                    "{what} (one value, or one per direction separated by `,`)"
                ));
            }
        }
        Ok(())
    };
    match key {
        "prio" => per_dir(7, "a priority level 0..=7"),
        "prioclass" => per_dir(
            3,
            "a priority class 0..=3 (0: none, 1: real time, 2: best effort, 3: idle)",
        ),
        "cmdprio" => per_dir(7, "a priority level 0..=7"),
        "cmdprio_class" => per_dir(
            3,
            "a priority class 0..=3 (1: real time, 2: best effort, 3: idle)",
        ),
        "cmdprio_percentage" => per_dir(100, "a percentage 0..=100"),
        "log_prio" | "fill_device" | "create_serialize" | "dedupe_global" => {
            flag(&text).map(|_| ())
        }
        "dedupe_mode" => match text.as_str() {
            "repeat" | "working_set" => Ok(()),
            _ => Err("repeat or working_set".into()),
        },
        "dedupe_working_set_percentage" => per_dir(100, "a percentage 0..=100"),
        "cmdprio_bssplit" => check_cmdprio_bssplit(&text),
        "numa_cpu_nodes" if text == "all" => Ok(()),
        "numa_cpu_nodes" => parse_cpu_list(&text)
            .map(|_| ())
            .ok_or_else(|| "a node list such as \"0\" or \"0-1\"".into()),
        "numa_mem_policy" => check_mem_policy(&text),
        // fio: FIO_OPT_INT.
        "threads" => text
            .parse::<u32>()
            .map(|_| ())
            .map_err(|_| "a count of threads 0..=4294967295".into()),
        _ => Ok(()),
    }
}

/// fio's `cmdprio_bssplit`: per direction (`,`), entries separated by `:`
/// of `SIZE/PERCENT`, optionally `/CLASS/LEVEL` and `/HINT`
/// (fio's options.c `parse_cmdprio_bssplit_entry`).
fn check_cmdprio_bssplit(s: &str) -> Result<(), String> {
    let expected = "per direction (`,`) a `:` list of SIZE/PERCENT[/CLASS/LEVEL[/HINT]], e.g. \"64k/25/1/1:1m/75\"";
    for list in s.split(',').map(str::trim).filter(|l| !l.is_empty()) {
        for entry in list.split(':').map(str::trim).filter(|e| !e.is_empty()) {
            let parts: Vec<&str> = entry.split('/').map(str::trim).collect();
            let size_ok = parse_size_bytes(parts[0]).is_ok();
            let pct_ok = parts
                .get(1)
                .is_some_and(|p| p.parse::<u32>().is_ok_and(|n| n <= 100));
            let rest_ok = matches!(parts.len(), 2 | 4 | 5)
                && parts[2..].iter().all(|p| p.parse::<u32>().is_ok());
            if !(size_ok && pct_ok && rest_ok) {
                return Err(expected.into());
            }
        }
    }
    Ok(())
}

/// fio's `numa_mem_policy`: default, local, prefer:NODE, bind:NODES,
/// interleave:NODES.
fn check_mem_policy(s: &str) -> Result<(), String> {
    let expected = "default, local, prefer:NODE, bind:NODES or interleave:NODES";
    let (mode, nodes) = match s.split_once(':') {
        Some((m, n)) => (m.trim(), Some(n.trim())),
        None => (s, None),
    };
    let ok = match (mode, nodes) {
        ("default" | "local", None) => true,
        ("prefer", Some(n)) => n.parse::<u32>().is_ok(),
        ("bind" | "interleave", Some(n)) => parse_cpu_list(n).is_some(),
        _ => false,
    };
    ok.then_some(()).ok_or_else(|| expected.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zs(a: u32, s: u64) -> ZoneSplit {
        ZoneSplit {
            access_pct: a,
            size: s,
        }
    }

    #[test]
    fn zoned_lists_as_fio_parses_them() {
        let z = parse_zoned("zoned:50/5:30/15:20/").unwrap().unwrap();
        assert!(!z.absolute);
        let want = vec![zs(50, 5), zs(30, 15), zs(20, 80)];
        assert_eq!(z.lists, [want.clone(), want.clone(), want]);
        let z = parse_zoned("zoned:60/10:40/90,100/50").unwrap().unwrap();
        assert_eq!(z.lists[1], vec![zs(100, 50)]);
        assert_eq!(z.lists[2], vec![zs(100, 50)]);
        let z = parse_zoned("zoned_abs:60/1g:40/2g").unwrap().unwrap();
        assert_eq!(z.lists[0], vec![zs(60, 1 << 30), zs(40, 2 << 30)]);
        assert!(parse_zoned("zipf:1.2").is_none());
    }

    #[test]
    fn bad_zoned_lists_are_refused() {
        for bad in [
            "zoned:50/5:30/15",
            "zoned:50/60:50/60",
            "zoned:x/5:100/5",
            "zoned",
            "zoned_abs:50/1g:50/",
            "zoned:1/1,2/2,3/3,4/4",
        ] {
            assert!(parse_zoned(bad).unwrap().is_err(), "{bad}");
        }
        let z = parse_zoned("zoned:50/50:50/50,100/10").unwrap().unwrap();
        assert!(zones_for_job(&z, 50, false).is_err());
        assert_eq!(zones_for_job(&z, 0, false).unwrap(), vec![zs(100, 10)]);
    }

    #[test]
    fn no_effect_values_are_checked() {
        let s = |x: &str| OptValue::Str(x.to_string());
        assert!(check_no_effect_value("prioclass", &s("3")).is_ok());
        assert!(check_no_effect_value("prioclass", &s("4")).is_err());
        assert!(check_no_effect_value("cmdprio_percentage", &s("20,30")).is_ok());
        assert!(check_no_effect_value("cmdprio_percentage", &s("120")).is_err());
        let split = "64k/25/1/1:64k/75/3/2:1024k/0,1024k/0";
        assert!(check_no_effect_value("cmdprio_bssplit", &s(split)).is_ok());
        assert!(check_no_effect_value("cmdprio_bssplit", &s("1M/10/2/0/1:2M/90/2/0/0")).is_ok());
        assert!(check_no_effect_value("cmdprio_bssplit", &s("64k/120")).is_err());
        assert!(check_no_effect_value("cmdprio_bssplit", &s("64k/20/1")).is_err());
        assert!(check_no_effect_value("dedupe_mode", &s("working_set")).is_ok());
        assert!(check_no_effect_value("dedupe_mode", &s("random")).is_err());
        assert!(check_no_effect_value("fill_device", &s("2")).is_err());
        assert!(check_no_effect_value("numa_mem_policy", &s("bind:0")).is_ok());
        assert!(check_no_effect_value("numa_mem_policy", &s("bind")).is_err());
        assert!(check_no_effect_value("numa_cpu_nodes", &s("0-1")).is_ok());
        assert!(check_no_effect_value("numa_cpu_nodes", &s("x")).is_err());
    }
}
