//! fio's job-ordering and pacing options: `startdelay`, `stonewall`,
//! `wait_for`, `new_group`, `thinktime` (and its `_spin`, `_blocks`,
//! `_blocks_type`, `_iotime`), `number_ios`, `loops`, `rate`, `rate_iops`,
//! `rate_process`, `io_submit_mode` (`offload` submits as `inline`, with
//! a note); `rate_min`, `rate_iops_min` and `rate_cycle` are checked and
//! accepted without effect.

use super::JOB_TIME_NS_MAX;
use super::{as_bool, as_str, as_u64, invalid, not_a_choice, Applied, JobConfig, JobError};
use crate::workload::opt::OptValue;
use blocksim_sim::units::{parse_duration_ns, parse_size_bytes};

/// The options this module takes (the modelled ones are also listed in
/// `MODELLED_OPTIONS`; `rate_min`, `rate_iops_min`, `rate_cycle` in
/// `NO_EFFECT_OPTIONS`; `flow`, `flow_id`, `flow_sleep` are refused).
pub const PACING_OPTIONS: &[&str] = &[
    "startdelay",
    "stonewall",
    "wait_for",
    "new_group",
    "thinktime",
    "thinktime_spin",
    "thinktime_blocks",
    "thinktime_blocks_type",
    "thinktime_iotime",
    "number_ios",
    "loops",
    "rate",
    "rate_iops",
    "rate_process",
    "io_submit_mode",
    "rate_min",
    "rate_iops_min",
    "rate_cycle",
    "exitall",
    "exit_what",
    "flow",
    "flow_id",
    "flow_sleep",
];

/// fio's ordering and pacing options of one job (all off by default).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Pacing {
    /// `startdelay`: (low, high) in ns from the start of the run; each
    /// clone draws its delay in the range (low == high: that delay).
    pub start_delay_ns: (u64, u64),
    /// `wait_for`: the job that must have finished before this one starts.
    pub wait_for: Option<String>,
    /// `new_group`: this job starts a new reporting group.
    pub new_group: bool,
    /// `thinktime`: the stall after every `thinktime_blocks` I/Os (0: none).
    pub thinktime_ns: u64,
    /// `thinktime_spin`: the part of the stall spent busy on the job's CPU.
    pub thinktime_spin_ns: u64,
    /// `thinktime_blocks` (fio's default 1), and whether it was given
    /// (with `thinktime_iotime` alone, only the time triggers a stall).
    pub thinktime_blocks: u64,
    pub thinktime_blocks_set: bool,
    /// `thinktime_blocks_type=issue`: count I/Os issued, not completed.
    pub thinktime_on_issue: bool,
    /// `thinktime_iotime`: a stall after this much time doing I/O (0: off).
    pub thinktime_iotime_ns: u64,
    /// `number_ios`: the job ends after this many I/Os per loop (0: off).
    pub number_ios: u64,
    /// `loops`: the job's I/O is done this many times (fio's default 1).
    pub loops: u64,
    /// `rate` in bytes/s for reads, writes, trims (0: not capped).
    pub rate_bytes_per_s: [u64; 3],
    /// `rate_iops` for reads, writes, trims (0: not capped).
    pub rate_iops: [u64; 3],
    /// `rate_process=poisson`: exponential gaps between I/Os.
    pub rate_poisson: bool,
    /// `exitall`: when a thread of a job finishes, fio ends others (fio
    /// makes it global: one job giving it turns it on for all).
    pub exitall: bool,
    /// `exit_what`: which jobs `exitall` ends.
    pub exit_what: ExitWhat,
    /// `flow`: the job's weight in its flow (0: not in one; at most
    /// [`FLOW_WEIGHT_MAX`]), `flow_id` the flow, `flow_sleep` the stall
    /// (us in fio) after the job got ahead of its share.
    pub flow_weight: u32,
    pub flow_id: u32,
    pub flow_sleep_ns: u64,
}

/// fio's `FLOW_MAX_WEIGHT` (flow.h).
pub const FLOW_WEIGHT_MAX: u64 = 1000;

/// fio's `exit_what` (`fio_terminate_threads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum ExitWhat {
    /// The jobs of the finished job's reporting group (fio's default).
    Group,
    /// Every job running; the next stonewall's jobs start as usual.
    Stonewall,
    /// Every job, started or not.
    All,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            start_delay_ns: (0, 0),
            wait_for: None,
            new_group: false,
            thinktime_ns: 0,
            thinktime_spin_ns: 0,
            thinktime_blocks: 1,
            thinktime_blocks_set: false,
            thinktime_on_issue: false,
            thinktime_iotime_ns: 0,
            number_ios: 0,
            loops: 1,
            rate_bytes_per_s: [0; 3],
            rate_iops: [0; 3],
            rate_poisson: false,
            exitall: false,
            exit_what: ExitWhat::Group,
            flow_weight: 0,
            flow_id: 0,
            flow_sleep_ns: 0,
        }
    }
}

impl Pacing {
    pub fn is_default(&self) -> bool {
        *self == Pacing::default()
    }

    /// Whether the job's I/O is paced (rate or thinktime), so its thread
    /// checks before each submission.
    pub fn paces(&self) -> bool {
        self.thinktime_ns > 0
            || self.thinktime_spin_ns > 0
            || self
                .rate_bytes_per_s
                .iter()
                .chain(&self.rate_iops)
                .any(|&r| r > 0)
    }
}

/// fio's `flow` (a weight up to `FLOW_MAX_WEIGHT`), `flow_id` and
/// `flow_sleep` (unsigned ints; microseconds for the sleep).
fn apply_flow(p: &mut Pacing, key: &str, v: &OptValue) -> Result<(), JobError> {
    let (max, what) = match key {
        "flow" => (FLOW_WEIGHT_MAX, "a weight 0..=1000 (fio's FLOW_MAX_WEIGHT)"),
        "flow_id" => (u64::from(u32::MAX), "a flow id 0..=4294967295"),
        _ => (u64::from(u32::MAX), "microseconds 0..=4294967295"),
    };
    let n = as_u64(key, v)?;
    if n > max {
        return Err(invalid(key, v, what));
    }
    match key {
        "flow" => p.flow_weight = n as u32,
        "flow_id" => p.flow_id = n as u32,
        _ => p.flow_sleep_ns = n * 1_000,
    }
    Ok(())
}

/// A fio time with `unit_ns` for a bare number, at most
/// [`JOB_TIME_NS_MAX`].
pub(super) fn as_time(key: &str, v: &OptValue, unit_ns: u64) -> Result<u64, JobError> {
    let unit = if unit_ns == 1_000 { "us" } else { "s" };
    let expected = format!("a duration such as 100 ({unit}), \"100us\", \"2ms\", \"1s\"");
    let ns = match v {
        OptValue::Int(i) if *i >= 0 => (*i as u64).checked_mul(unit_ns),
        OptValue::Float(f) if *f >= 0.0 && f.is_finite() => {
            let ns = (*f * unit_ns as f64).round();
            (ns < u64::MAX as f64).then_some(ns as u64)
        }
        OptValue::Str(s) => parse_duration_ns(s.trim(), unit_ns).ok(),
        _ => None,
    };
    let ns = ns.ok_or_else(|| invalid(key, v, &expected))?;
    if ns > JOB_TIME_NS_MAX {
        return Err(invalid(
            key,
            v,
            &format!(
                "at most {} s (100 years): the value is too large",
                JOB_TIME_NS_MAX / 1_000_000_000
            ),
        ));
    }
    Ok(ns)
}

/// fio's `startdelay=irange(time)`: one time, or `LOW-HIGH`.
fn as_time_range(key: &str, v: &OptValue) -> Result<(u64, u64), JobError> {
    let text = v.text();
    let Some((a, b)) = text.trim().split_once('-') else {
        let t = as_time(key, v, 1_000_000_000)?;
        return Ok((t, t));
    };
    let lo = as_time(key, &OptValue::Str(a.to_string()), 1_000_000_000)
        .map_err(|_| invalid(key, v, "a time or a range LOW-HIGH such as \"1s-5s\""))?;
    let hi = as_time(key, &OptValue::Str(b.to_string()), 1_000_000_000)
        .map_err(|_| invalid(key, v, "a time or a range LOW-HIGH such as \"1s-5s\""))?;
    if lo > hi {
        return Err(invalid(key, v, "a range LOW-HIGH with LOW <= HIGH"));
    }
    Ok((lo, hi))
}

/// fio's per-direction values `READ,WRITE,TRIM`: one value is all three;
/// `R,W` gives trims W; an empty entry is 0 (`rate=,500k` caps writes
/// only, `rate=500k,` reads only).
fn per_direction(key: &str, v: &OptValue, size: bool) -> Result<[u64; 3], JobError> {
    let expected = if size {
        "bytes per second, or READ,WRITE[,TRIM] values, such as \"1m\" or \"1m,500k\""
    } else {
        "I/Os per second, or READ,WRITE[,TRIM] values, such as \"1000\" or \"1000,200\""
    };
    let text = v.text();
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts.len() > 3 {
        return Err(invalid(key, v, expected));
    }
    let one = |p: &str| -> Result<u64, JobError> {
        match (p, size) {
            ("", _) => Ok(0),
            (p, true) => parse_size_bytes(p).map_err(|_| invalid(key, v, expected)),
            (p, false) => p.parse::<u64>().map_err(|_| invalid(key, v, expected)),
        }
    };
    let vals: Vec<u64> = parts.iter().map(|p| one(p)).collect::<Result<_, _>>()?;
    Ok(match vals[..] {
        [a] => [a, a, a],
        [a, b] => [a, b, b],
        [a, b, c] => [a, b, c],
        _ => return Err(invalid(key, v, expected)),
    })
}

impl JobConfig {
    /// Takes one of [`PACING_OPTIONS`].
    pub(super) fn apply_pacing(&mut self, key: &str, v: &OptValue) -> Result<Applied, JobError> {
        let p = &mut self.pacing;
        match key {
            "startdelay" => p.start_delay_ns = as_time_range(key, v)?,
            "stonewall" => self.stonewall = as_bool(key, v)?,
            "wait_for" => p.wait_for = Some(as_str(key, v)?.to_string()),
            "new_group" => p.new_group = as_bool(key, v)?,
            "thinktime" => p.thinktime_ns = as_time(key, v, 1_000)?,
            "thinktime_spin" => p.thinktime_spin_ns = as_time(key, v, 1_000)?,
            "thinktime_iotime" => p.thinktime_iotime_ns = as_time(key, v, 1_000_000_000)?,
            "thinktime_blocks" => {
                let n = as_u64(key, v)?;
                if n == 0 || n > u64::from(u32::MAX) {
                    return Err(invalid(key, v, "a count of I/Os 1..=4294967295"));
                }
                (p.thinktime_blocks, p.thinktime_blocks_set) = (n, true);
            }
            "thinktime_blocks_type" => {
                p.thinktime_on_issue = choice(key, v, &["complete", "issue"])? == "issue";
            }
            "number_ios" => p.number_ios = as_u64(key, v)?,
            "loops" => {
                // fio: an unsigned int; 0 runs the job once, as 1.
                let n = as_u64(key, v)?;
                if n > u64::from(u32::MAX) {
                    return Err(invalid(key, v, "a count 1..=4294967295"));
                }
                p.loops = n.max(1);
            }
            "rate" => p.rate_bytes_per_s = per_direction(key, v, true)?,
            "rate_iops" => p.rate_iops = per_direction(key, v, false)?,
            "rate_process" => {
                p.rate_poisson = choice(key, v, &["linear", "poisson"])? == "poisson";
            }
            "io_submit_mode" => {
                // offload: submitted as inline; noted (NO_EFFECT_OPTIONS says how).
                if choice(key, v, &["inline", "offload"])? == "offload" {
                    return Ok(Applied::NoEffect);
                }
            }
            "exitall" => p.exitall = as_bool(key, v)?,
            "exit_what" => {
                p.exit_what = match choice(key, v, &["group", "stonewall", "all"])? {
                    "group" => ExitWhat::Group,
                    "stonewall" => ExitWhat::Stonewall,
                    _ => ExitWhat::All,
                }
            }
            "flow" | "flow_id" | "flow_sleep" => apply_flow(p, key, v)?,
            "rate_min" => {
                per_direction(key, v, true)?;
                return Ok(Applied::NoEffect);
            }
            "rate_iops_min" => {
                per_direction(key, v, false)?;
                return Ok(Applied::NoEffect);
            }
            _ => {
                // rate_cycle: milliseconds, an unsigned int in fio.
                if as_u64(key, v)? > u64::from(u32::MAX) {
                    return Err(invalid(key, v, "milliseconds 0..=4294967295"));
                }
                return Ok(Applied::NoEffect);
            }
        }
        Ok(Applied::Modelled)
    }

    /// Checks the pacing options against the rest of the job.
    pub(super) fn finish_pacing(&self) -> Result<(), JobError> {
        let p = &self.pacing;
        for d in 0..3 {
            if p.rate_bytes_per_s[d] > 0 && p.rate_iops[d] > 0 {
                return Err(invalid(
                    "rate_iops",
                    &OptValue::Int(p.rate_iops[d] as i64),
                    "no `rate_iops` beside `rate` for the same direction (fio: rate and rate_iops are mutually exclusive); keep one",
                ));
            }
        }
        if p.wait_for.as_deref() == Some(self.name.as_str()) {
            let v = OptValue::Str(self.name.clone());
            return Err(invalid(
                "wait_for",
                &v,
                "the name of an earlier job, not the job itself",
            ));
        }
        Ok(())
    }
}

/// The value of an option with a fixed set of `choices`, or the error that
/// lists them ("a or b", "a, b or c").
fn choice<'a>(key: &str, v: &OptValue, choices: &[&'a str]) -> Result<&'a str, JobError> {
    let given = as_str(key, v)?;
    if let Some(c) = choices.iter().find(|c| **c == given) {
        return Ok(*c);
    }
    let expected = match choices.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => choices.join(""),
    };
    Err(not_a_choice(key, v, &expected, choices))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(opts: &[(&str, &str)]) -> Result<JobConfig, super::super::JobErrors> {
        let opts: Vec<(&str, OptValue)> = [("filename", "x")]
            .iter()
            .chain(opts)
            .map(|(k, v)| (*k, OptValue::Str(v.to_string())))
            .collect();
        JobConfig::from_options("j", opts.iter().map(|(k, v)| (*k, v)))
    }

    #[test]
    fn units_are_fios() {
        let j = job(&[
            ("thinktime", "100"),
            ("thinktime_spin", "2ms"),
            ("thinktime_iotime", "3"),
            ("startdelay", "2"),
        ])
        .unwrap();
        // thinktime and its spin: us when bare; iotime and startdelay: s.
        assert_eq!(j.pacing.thinktime_ns, 100_000);
        assert_eq!(j.pacing.thinktime_spin_ns, 2_000_000);
        assert_eq!(j.pacing.thinktime_iotime_ns, 3_000_000_000);
        assert_eq!(j.pacing.start_delay_ns, (2_000_000_000, 2_000_000_000));
        let j = job(&[("startdelay", "500ms-2s")]).unwrap();
        assert_eq!(j.pacing.start_delay_ns, (500_000_000, 2_000_000_000));
    }

    #[test]
    fn per_direction_values_as_fio_splits_them() {
        let rate = |v: &str| job(&[("rate", v)]).unwrap().pacing.rate_bytes_per_s;
        assert_eq!(rate("1m"), [1 << 20; 3]);
        assert_eq!(rate(",500k"), [0, 500 << 10, 500 << 10]);
        assert_eq!(rate("500k,"), [500 << 10, 0, 0]);
        assert_eq!(rate("1m,500k"), [1 << 20, 500 << 10, 500 << 10]);
        assert_eq!(rate("1m,500k,4k"), [1 << 20, 500 << 10, 4 << 10]);
        let iops = job(&[("rate_iops", "100,200")]).unwrap().pacing.rate_iops;
        assert_eq!(iops, [100, 200, 200]);
    }

    #[test]
    fn defaults_leave_a_job_unpaced() {
        let j = job(&[]).unwrap();
        assert!(j.pacing.is_default() && !j.pacing.paces());
        assert_eq!((j.pacing.loops, j.pacing.thinktime_blocks), (1, 1));
        // loops=0 runs once, as fio.
        assert_eq!(job(&[("loops", "0")]).unwrap().pacing.loops, 1);
        // Flags.
        let j = job(&[("stonewall", ""), ("new_group", "")]).unwrap();
        assert!(j.stonewall && j.pacing.new_group);
    }

    #[test]
    fn bad_values_say_what_is_expected() {
        let err = |opts: &[(&str, &str)]| job(opts).unwrap_err().to_string();
        assert!(err(&[("startdelay", "2-1")]).contains("LOW <= HIGH"));
        assert!(err(&[("rate_process", "poison")]).contains("did you mean `poisson`?"));
        assert!(err(&[("io_submit_mode", "offlaod")]).contains("did you mean `offload`?"));
        let j = job(&[("io_submit_mode", "offload"), ("threads", "1")]).unwrap();
        assert_eq!(j.ignored_options, ["io_submit_mode", "threads"]);
        assert!(err(&[("threads", "many")]).contains("a count of threads"));
        assert!(err(&[("thinktime_blocks", "0")]).contains("1..=4294967295"));
        assert!(err(&[("rate", "1m,2m,3m,4m")]).contains("READ,WRITE[,TRIM]"));
        assert!(err(&[("rate", "1m"), ("rate_iops", "10")]).contains("mutually exclusive"));
        assert!(err(&[("wait_for", "j")]).contains("not the job itself"));
        assert!(err(&[("thinktime", "-5")]).contains("a duration"));
        assert!(err(&[("flow", "1001")]).contains("FLOW_MAX_WEIGHT"));
        assert!(err(&[("flow_sleep", "5000000000")]).contains("microseconds"));
        // rate_min and friends are checked, then noted.
        assert!(err(&[("rate_min", "fast")]).contains("bytes per second"));
        let j = job(&[("rate_min", "1m"), ("rate_cycle", "500")]).unwrap();
        assert_eq!(j.ignored_options, ["rate_min", "rate_cycle"]);
    }
}
