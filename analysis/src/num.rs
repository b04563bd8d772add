//! fio's number formatting: `num2str` (the "cheesy" significant-figure
//! rounding with k/M/G or Ki/Mi/Gi prefixes), latency unit selection, and
//! C `ctime` for the simulated start time.

/// The unit suffix appended by [`num2str`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Units {
    None,
    PerSec,
    Byte,
    Bit,
    BytePerSec,
    BitPerSec,
}

impl Units {
    fn suffix(self) -> &'static str {
        match self {
            Units::None => "",
            Units::PerSec => "/s",
            Units::Byte => "B",
            Units::Bit => "bit",
            Units::BytePerSec => "B/s",
            Units::BitPerSec => "bit/s",
        }
    }
}

const SI: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
const IEC: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

fn digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Formats `num` (already multiplied by `base`) with at most `maxlen`
/// characters of number (counting the decimal point), dividing by 1000 (or
/// 1024 with `pow2`) and adding a prefix until it fits, then filling the
/// remaining room with decimals of the last remainder. Same rules and same
/// rounding quirks as fio's `num2str` so output lines up with real fio.
pub fn num2str(num: u64, maxlen: usize, base: u64, pow2: bool, units: Units) -> String {
    let thousand: u64 = if pow2 { 1024 } else { 1000 };
    let prefixes = if pow2 { &IEC } else { &SI };
    let mut post = 0usize;
    let mut b = base;
    while b > 1 {
        b /= thousand;
        post += 1;
    }
    let mut num = match units {
        Units::Bit | Units::BitPerSec => num.saturating_mul(8),
        _ => num,
    };
    let mut modulo: Option<u64> = None;
    let mut carry = false;
    while post < prefixes.len() {
        if digits(num) <= maxlen {
            break;
        }
        let m = num % thousand;
        modulo = Some(m);
        num /= thousand;
        carry = m >= thousand / 2;
        post += 1;
    }
    if post >= prefixes.len() {
        post = 0;
    }
    let m = match modulo {
        None => return format!("{num}{}{}", prefixes[post], units.suffix()),
        Some(m) => m,
    };
    let len = digits(num);
    if maxlen <= len + 1 {
        if carry {
            num += 1;
        }
        return format!("{num}{}{}", prefixes[post], units.suffix());
    }
    let decimals = maxlen - len - 1;
    let frac = format!("{:.*}", decimals, m as f64 / thousand as f64);
    if frac.starts_with('1') {
        num += 1;
    }
    format!("{num}.{}{}{}", &frac[2..], prefixes[post], units.suffix())
}

/// Latency unit chosen by fio for `min/max/avg/stdev` lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatUnit {
    Nsec,
    Usec,
    Msec,
}

impl LatUnit {
    pub fn name(self) -> &'static str {
        match self {
            LatUnit::Nsec => "nsec",
            LatUnit::Usec => "usec",
            LatUnit::Msec => "msec",
        }
    }

    pub fn divisor(self) -> u64 {
        match self {
            LatUnit::Nsec => 1,
            LatUnit::Usec => 1_000,
            LatUnit::Msec => 1_000_000,
        }
    }
}

/// fio's rule (`nsec_to_msec`, then `nsec_to_usec`): scale down only when
/// min, max and stdev are all large enough in the target unit.
pub fn lat_unit(min_ns: u64, max_ns: u64, stdev_ns: f64) -> LatUnit {
    if min_ns > 2_000_000 && max_ns > 99_999_999 && stdev_ns > 1_000_000.0 {
        LatUnit::Msec
    } else if min_ns > 2_000 && max_ns > 99_999 && stdev_ns > 1_000.0 {
        LatUnit::Usec
    } else {
        LatUnit::Nsec
    }
}

/// fio's unit for a percentile block, chosen from the smallest and largest
/// reported percentile values.
pub fn percentile_unit(minv_ns: u64, maxv_ns: u64) -> LatUnit {
    if minv_ns > 2_000_000 && maxv_ns > 99_999_999 {
        LatUnit::Msec
    } else if minv_ns > 2_000 && maxv_ns > 99_999 {
        LatUnit::Usec
    } else {
        LatUnit::Nsec
    }
}

/// C `ctime` text (without the newline) for a Unix time in seconds, UTC.
pub fn ctime_utc(unix_s: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = unix_s / 86_400;
    let secs = unix_s % 86_400;
    let weekday = DAYS[(days % 7) as usize];
    // Civil-from-days (Howard Hinnant's algorithm), days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{weekday} {} {d:2} {:02}:{:02}:{:02} {y}",
        MONTHS[(m - 1) as usize],
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn num2str_matches_fio_output() {
        // Values and strings taken from real fio 3.33 runs.
        assert_eq!(num2str(8031, 4, 1, false, Units::None), "8031");
        assert_eq!(num2str(38115, 4, 1, false, Units::None), "38.1k");
        // 8 MiB in 255 ms: bw = 1000 * 8388608 / 255 bytes/s.
        let bw = 1000 * 8_388_608u64 / 255;
        assert_eq!(num2str(bw, 4, 1, true, Units::BytePerSec), "31.4MiB/s");
        assert_eq!(num2str(bw, 4, 1, false, Units::BytePerSec), "32.9MB/s");
        assert_eq!(num2str(8_388_608, 4, 1, true, Units::Byte), "8192KiB");
        assert_eq!(num2str(8_388_608, 4, 1, false, Units::Byte), "8389kB");
        assert_eq!(num2str(4_194_304, 4, 1, false, Units::Byte), "4194kB");
        assert_eq!(num2str(1_848_123, 6, 1, false, Units::None), "1848.1k");
        assert_eq!(num2str(546_622, 6, 1, false, Units::None), "546622");
        assert_eq!(num2str(4096, 4, 1, true, Units::Byte), "4096B");
        // Seed 000: 16 GiB.
        assert_eq!(num2str(17_179_869_184, 4, 1, true, Units::Byte), "16.0GiB");
    }

    #[test]
    fn units() {
        assert_eq!(lat_unit(1151, 517_254, 13131.55), LatUnit::Nsec);
        assert_eq!(lat_unit(13_000, 1_488_000, 90_220.0), LatUnit::Usec);
        assert_eq!(lat_unit(469, 1_848_100, 128_182.0), LatUnit::Nsec);
        assert_eq!(lat_unit(3_000_000, 200_000_000, 2_000_000.0), LatUnit::Msec);
        assert_eq!(percentile_unit(740, 1_843_200), LatUnit::Nsec);
        assert_eq!(percentile_unit(72_000, 553_000), LatUnit::Usec);
    }

    #[test]
    fn ctime() {
        assert_eq!(ctime_utc(0), "Thu Jan  1 00:00:00 1970");
        // 1795996631 is the fio 3.33 JSON timestamp whose "time" was
        // "Sun Nov 29 23:57:11 2026" (UTC machine).
        assert_eq!(ctime_utc(1_795_996_631), "Sun Nov 29 23:57:11 2026");
    }
}
