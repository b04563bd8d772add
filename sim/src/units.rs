//! Sizes and durations written with units: `"4k"`, `"16g"`, `"512KiB"`,
//! `"1.5us"`, `"2ms"`.
//!
//! Sizes follow fio's default `kb_base=1024`: `k`, `K`, `KB`, `KiB` all mean
//! 1024 bytes (likewise m/g/t/p). Durations accept `ns`, `us`, `ms`, `s`, `m`,
//! `h`; a bare number takes the caller's default unit.

use serde::{Deserialize, Deserializer};

/// A unit-parsing failure with the offending text and a hint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} {text:?}: {hint}")]
pub struct UnitError {
    pub kind: &'static str,
    pub text: String,
    pub hint: &'static str,
}

/// `x.round() as u64` for a non-negative `x` below 2^52 (a cost in ns
/// computed in floating point), without the libm call `f64::round` makes on
/// baseline x86-64: the fraction of such an `x` is exact, so comparing it
/// with one half rounds exactly as `round` does (half away from zero).
#[inline]
pub fn round_ns(x: f64) -> u64 {
    debug_assert!((0.0..4.5e15).contains(&x), "round_ns({x})");
    // Through i64: one instruction each way on x86-64 (u64 needs fix-ups).
    let t = x as i64;
    t as u64 + u64::from(x - t as f64 >= 0.5)
}

const SIZE_HINT: &str = "expected a number with an optional unit: b, k/KiB/KB, m/MiB, g/GiB, t/TiB, p/PiB (1k = 1024 bytes, as fio)";
const TIME_HINT: &str =
    "expected a number with a unit: ns, us, ms, s, m, h (e.g. \"1.5us\", \"2ms\")";

fn split_number(text: &str) -> (&str, &str) {
    let t = text.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    (&t[..end], t[end..].trim())
}

fn parse_number(num: &str) -> Option<f64> {
    let cleaned: String = num.chars().filter(|&c| c != '_').collect();
    if cleaned.is_empty() {
        return None;
    }
    let v: f64 = cleaned.parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v)
}

/// Parses a size in bytes.
pub fn parse_size_bytes(text: &str) -> Result<u64, UnitError> {
    let err = || UnitError {
        kind: "size",
        text: text.to_string(),
        hint: SIZE_HINT,
    };
    let (num, unit) = split_number(text);
    let v = parse_number(num).ok_or_else(err)?;
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        "p" | "pb" | "pib" => 1 << 50,
        _ => return Err(err()),
    };
    let bytes = v * mult as f64;
    if bytes > u64::MAX as f64 || bytes.fract() != 0.0 {
        return Err(err());
    }
    Ok(bytes as u64)
}

/// Parses a duration in nanoseconds; a bare number is in `default_unit_ns`.
pub fn parse_duration_ns(text: &str, default_unit_ns: u64) -> Result<u64, UnitError> {
    let err = || UnitError {
        kind: "duration",
        text: text.to_string(),
        hint: TIME_HINT,
    };
    let (num, unit) = split_number(text);
    let v = parse_number(num).ok_or_else(err)?;
    let mult: u64 = match unit {
        "" => default_unit_ns,
        "ns" => 1,
        "us" | "usec" | "µs" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return Err(err()),
    };
    let ns = (v * mult as f64).round();
    if ns > u64::MAX as f64 {
        return Err(err());
    }
    Ok(ns as u64)
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrString {
    Int(u64),
    Float(f64),
    Text(String),
}

/// A size in bytes that deserializes from `4096`, `"4k"` or `"512KiB"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, serde::Serialize)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumOrString::deserialize(d)? {
            NumOrString::Int(v) => Ok(Bytes(v)),
            NumOrString::Float(f) => Err(serde::de::Error::custom(format!(
                "invalid size {f}: {SIZE_HINT}"
            ))),
            NumOrString::Text(s) => parse_size_bytes(&s)
                .map(Bytes)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// A duration in nanoseconds that deserializes from `"1.5us"`, `"2ms"`, or a
/// bare integer of nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, serde::Serialize)]
#[serde(transparent)]
pub struct Nanos(pub u64);

impl<'de> Deserialize<'de> for Nanos {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumOrString::deserialize(d)? {
            NumOrString::Int(v) => Ok(Nanos(v)),
            NumOrString::Float(f) => Err(serde::de::Error::custom(format!(
                "invalid duration {f}: {TIME_HINT}"
            ))),
            NumOrString::Text(s) => parse_duration_ns(&s, 1)
                .map(Nanos)
                .map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_ns_matches_round() {
        let xs = [
            0.0,
            0.25,
            0.49999999999999994,
            0.5,
            1.5,
            2.5,
            13653.333,
            4095.5,
        ];
        for x in xs.into_iter().chain([1e12 + 0.5, 2f64.powi(51) - 0.5]) {
            assert_eq!(round_ns(x), x.round() as u64, "{x}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size_bytes("4k").unwrap(), 4096);
        assert_eq!(parse_size_bytes("16g").unwrap(), 16 << 30);
        assert_eq!(parse_size_bytes("512KiB").unwrap(), 512 << 10);
        assert_eq!(parse_size_bytes("1.5m").unwrap(), 3 << 19);
        assert_eq!(parse_size_bytes("512").unwrap(), 512);
        assert!(parse_size_bytes("4q").is_err());
        assert!(parse_size_bytes("").is_err());
        assert!(parse_size_bytes("-4k").is_err());
        assert!(parse_size_bytes("0.3").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("1.5us", 1).unwrap(), 1500);
        assert_eq!(parse_duration_ns("2ms", 1).unwrap(), 2_000_000);
        assert_eq!(
            parse_duration_ns("10", 1_000_000_000).unwrap(),
            10_000_000_000
        );
        assert!(parse_duration_ns("3 parsecs", 1).is_err());
    }
}
