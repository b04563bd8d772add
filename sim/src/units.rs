//! Sizes and durations written with units: `"4k"`, `"16g"`, `"512KiB"`,
//! `"1.5us"`, `"2ms"`.
//!
//! Sizes follow fio's default `kb_base=1024`: `k`, `K`, `KB`, `KiB` all mean
//! 1024 bytes (likewise m/g/t/p). Durations accept `ns`, `us`, `ms`, `s`, `m`,
//! `h`. fio's job options take a bare number in fio's default unit
//! ([`parse_duration_ns`] with a default, [`parse_size_bytes`]); scenario
//! values ([`Bytes`], [`Nanos`]) must carry a unit, so `page_read = 60`
//! cannot silently mean 60 ns: only `0` may be written bare.

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
/// `ns` for a message in the unit a user writes: the largest of s, ms, us
/// that it is a whole number of ("2s", "1500us"), else ns.
pub fn duration_text(ns: u64) -> String {
    for (unit, per) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if ns != 0 && ns % per == 0 {
            return format!("{}{unit}", ns / per);
        }
    }
    format!("{ns}ns")
}

pub fn round_ns(x: f64) -> u64 {
    debug_assert!((0.0..4.5e15).contains(&x), "round_ns({x})");
    // Through i64: one instruction each way on x86-64 (u64 needs fix-ups).
    let t = x as i64;
    t as u64 + u64::from(x - t as f64 >= 0.5)
}

const SIZE_HINT: &str = "expected a number with an optional unit: b, k/KiB/KB, m/MiB, g/GiB, t/TiB, p/PiB (1k = 1024 bytes, as fio)";
const TIME_HINT: &str =
    "expected a number with a unit: ns, us, ms, s, m, h (e.g. \"1.5us\", \"2ms\")";
const SIZE_UNIT_HINT: &str = "write the unit, e.g. \"4096b\", \"4k\" or \"2g\" (b, k/KiB, m/MiB, g/GiB, t/TiB, p/PiB; 1k = 1024 bytes, as fio); only 0 may be written without one";
const TIME_UNIT_HINT: &str = "write the unit, e.g. \"60us\" or \"2ms\" (ns, us, ms, s, m, h); only 0 may be written without one";
const SIZE_RANGE_HINT: &str =
    "expected a size below 2^64 bytes (16 EiB): the number is too large, not the unit";
const TIME_RANGE_HINT: &str =
    "expected a duration below 2^64 ns (584 years): the number is too large, not the unit";
const RATE_HINT: &str = "expected a size per second: \"4k/s\", \"1m/s\", \"100MiB/s\" (1k = 1024 bytes); only 0 may be written without a unit";

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

/// `num` (digits, `_`, at most one `.`) times `mult`, exactly when `num` is
/// an integer; `Err(true)` when the product does not fit in a u64,
/// `Err(false)` when `num` is not a number. A fraction is computed in
/// floating point and rounded to the nearest unit.
fn scaled(num: &str, mult: u64) -> Result<u64, bool> {
    let cleaned: String = num.chars().filter(|&c| c != '_').collect();
    if !cleaned.is_empty() && cleaned.bytes().all(|b| b.is_ascii_digit()) {
        // Digits only: exact, whatever the length.
        let v: u128 = match cleaned.trim_start_matches('0') {
            "" => 0,
            d if d.len() > 30 => return Err(true),
            d => d.parse().map_err(|_| false)?,
        };
        return u64::try_from(v * u128::from(mult)).map_err(|_| true);
    }
    let v = parse_number(num).ok_or(false)?;
    let x = (v * mult as f64).round();
    // u64::MAX as f64 is 2^64: a product at or above it does not fit.
    if x >= u64::MAX as f64 {
        return Err(true);
    }
    Ok(x as u64)
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
    if (v * mult as f64).fract() != 0.0 {
        // A fraction of a byte ("1.5b", "0.1k").
        return Err(err());
    }
    scaled(num, mult).map_err(|too_large| UnitError {
        hint: if too_large {
            SIZE_RANGE_HINT
        } else {
            SIZE_HINT
        },
        ..err()
    })
}

/// Parses a duration in nanoseconds; a bare number is in `default_unit_ns`.
pub fn parse_duration_ns(text: &str, default_unit_ns: u64) -> Result<u64, UnitError> {
    let err = || UnitError {
        kind: "duration",
        text: text.to_string(),
        hint: TIME_HINT,
    };
    let (num, unit) = split_number(text);
    parse_number(num).ok_or_else(err)?;
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
    scaled(num, mult).map_err(|too_large| UnitError {
        hint: if too_large {
            TIME_RANGE_HINT
        } else {
            TIME_HINT
        },
        ..err()
    })
}

/// Parses a scenario size: the unit is required (`"4096b"`, `"4k"`); only
/// `"0"` may stand alone.
pub fn parse_size_unit_bytes(text: &str) -> Result<u64, UnitError> {
    let (num, unit) = split_number(text);
    if unit.is_empty() && parse_number(num) != Some(0.0) {
        return Err(UnitError {
            kind: "size",
            text: text.to_string(),
            hint: SIZE_UNIT_HINT,
        });
    }
    parse_size_bytes(text)
}

/// Parses a scenario duration in nanoseconds: the unit is required
/// (`"60us"`); only `"0"` may stand alone.
pub fn parse_duration_unit_ns(text: &str) -> Result<u64, UnitError> {
    let (num, unit) = split_number(text);
    if unit.is_empty() && parse_number(num) != Some(0.0) {
        return Err(UnitError {
            kind: "duration",
            text: text.to_string(),
            hint: TIME_UNIT_HINT,
        });
    }
    parse_duration_ns(text, 1)
}

/// Parses a rate in bytes per second written as a size per second
/// (`"4k/s"`, `"1m/s"`); only `"0"` may stand alone.
pub fn parse_rate_bytes_per_s(text: &str) -> Result<u64, UnitError> {
    let err = || UnitError {
        kind: "rate",
        text: text.to_string(),
        hint: RATE_HINT,
    };
    let t = text.trim();
    match t.strip_suffix("/s") {
        Some(size) => parse_size_unit_bytes(size).map_err(|_| err()),
        None if parse_number(t) == Some(0.0) => Ok(0),
        None => Err(err()),
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrString {
    Int(u64),
    Float(f64),
    Text(String),
}

/// The error for a bare number where a unit is required, with the number
/// written in the accepted forms.
fn bare_number<E: serde::de::Error>(kind: Kind, shown: &str) -> E {
    let (name, units, forms): (&str, &str, [&str; 3]) = match kind {
        Kind::Size => (
            "size",
            "b, k/KiB, m/MiB, g/GiB, t/TiB, p/PiB; 1k = 1024 bytes, as fio",
            ["b", "k", "g"],
        ),
        Kind::Duration => ("duration", "ns, us, ms, s, m, h", ["ns", "us", "ms"]),
        Kind::Rate => (
            "rate",
            "a size per second, 1k = 1024 bytes",
            ["b/s", "k/s", "m/s"],
        ),
    };
    let [a, b, c] = forms.map(|u| format!("\"{shown}{u}\""));
    E::custom(format!(
        "a bare number ({shown}) for a {name} is ambiguous: write it with its unit, e.g. {a}, {b} or {c} ({units}); only 0 may be written bare"
    ))
}

#[derive(Clone, Copy)]
enum Kind {
    Size,
    Duration,
    Rate,
}

/// A size in bytes that deserializes from `"4k"`, `"512KiB"` or `"4096b"`.
/// A bare number other than 0 is an error: `capacity = 500` would be 500
/// bytes where "500g" was meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, serde::Serialize)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumOrString::deserialize(d)? {
            NumOrString::Int(0) => Ok(Bytes(0)),
            NumOrString::Int(v) => Err(bare_number(Kind::Size, &v.to_string())),
            NumOrString::Float(f) => Err(bare_number(Kind::Size, &f.to_string())),
            NumOrString::Text(s) => parse_size_unit_bytes(&s)
                .map(Bytes)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// A duration in nanoseconds that deserializes from `"1.5us"` or `"2ms"`. A
/// bare number other than 0 is an error: `page_read = 60` does not say
/// whether 60 ns or 60 us was meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, serde::Serialize)]
#[serde(transparent)]
pub struct Nanos(pub u64);

impl<'de> Deserialize<'de> for Nanos {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match NumOrString::deserialize(d)? {
            NumOrString::Int(0) => Ok(Nanos(0)),
            NumOrString::Int(v) => Err(bare_number(Kind::Duration, &v.to_string())),
            NumOrString::Float(f) => Err(bare_number(Kind::Duration, &f.to_string())),
            NumOrString::Text(s) => parse_duration_unit_ns(&s)
                .map(Nanos)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// Deserializes a rate given as a size per second (`"4k/s"`) into bytes
/// per second; for `#[serde(deserialize_with)]` on fields whose name does
/// not carry the unit.
pub fn deserialize_rate_bytes_per_s<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match NumOrString::deserialize(d)? {
        NumOrString::Int(0) => Ok(0),
        NumOrString::Int(v) => Err(bare_number(Kind::Rate, &v.to_string())),
        NumOrString::Float(f) => Err(bare_number(Kind::Rate, &f.to_string())),
        NumOrString::Text(s) => parse_rate_bytes_per_s(&s).map_err(serde::de::Error::custom),
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
    fn duration_text_uses_the_largest_whole_unit() {
        assert_eq!(duration_text(2_000_000_000), "2s");
        assert_eq!(duration_text(1_500_000), "1500us");
        assert_eq!(duration_text(3_600_000_000_000), "3600s");
        assert_eq!(duration_text(7), "7ns");
        assert_eq!(duration_text(0), "0ns");
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

    #[test]
    fn too_large_blames_the_number() {
        // Integers are exact up to u64::MAX, and a product that does not
        // fit is an error about the size, never a wrapped or rounded value.
        assert_eq!(parse_size_bytes("18446744073709551615").unwrap(), u64::MAX);
        assert_eq!(parse_size_bytes("9007199254740993").unwrap(), (1 << 53) + 1);
        assert_eq!(
            parse_duration_ns("18446744073", 1_000_000_000).unwrap(),
            18_446_744_073_000_000_000
        );
        for (e, kind) in [
            (parse_size_bytes("18446744073709551616"), "size"),
            (parse_size_bytes("16384p"), "size"),
            (parse_size_bytes("16384.5p"), "size"),
            (parse_duration_ns("18446744074", 1_000_000_000), "duration"),
            (parse_duration_ns("99999999999999h", 1), "duration"),
            (parse_duration_ns("5124096.5h", 1), "duration"),
        ] {
            let e = e.unwrap_err();
            assert!(e.hint.contains("too large, not the unit"), "{kind}: {e}");
        }
        assert!(!parse_size_bytes("4q")
            .unwrap_err()
            .hint
            .contains("too large"));
    }

    #[test]
    fn scenario_values_need_units() {
        assert_eq!(parse_duration_unit_ns("60us").unwrap(), 60_000);
        assert_eq!(parse_duration_unit_ns("0").unwrap(), 0);
        let e = parse_duration_unit_ns("60").unwrap_err().to_string();
        assert!(e.contains("\"60us\""), "{e}");
        assert!(e.contains("invalid duration \"60\""), "{e}");
        assert_eq!(parse_size_unit_bytes("4096b").unwrap(), 4096);
        assert!(parse_size_unit_bytes("4096").is_err());
        assert_eq!(parse_rate_bytes_per_s("4k/s").unwrap(), 4096);
        assert_eq!(parse_rate_bytes_per_s("0").unwrap(), 0);
        assert!(parse_rate_bytes_per_s("4096").is_err());
        assert!(parse_rate_bytes_per_s("4q/s").is_err());
    }

    use serde::de::value::{
        Error as ValueError, F64Deserializer, StrDeserializer, U64Deserializer,
    };

    fn nanos_u64(v: u64) -> Result<Nanos, String> {
        Nanos::deserialize(U64Deserializer::<ValueError>::new(v)).map_err(|e| e.to_string())
    }
    fn bytes_u64(v: u64) -> Result<Bytes, String> {
        Bytes::deserialize(U64Deserializer::<ValueError>::new(v)).map_err(|e| e.to_string())
    }
    fn nanos_str(v: &str) -> Result<Nanos, String> {
        Nanos::deserialize(StrDeserializer::<ValueError>::new(v)).map_err(|e| e.to_string())
    }

    #[test]
    fn bare_numbers_are_rejected_except_zero() {
        let e = nanos_u64(60).unwrap_err();
        assert!(e.contains("a bare number (60) for a duration"), "{e}");
        assert!(e.contains("\"60us\""), "{e}");
        let e = bytes_u64(500).unwrap_err();
        assert!(e.contains("a bare number (500) for a size"), "{e}");
        let e = Nanos::deserialize(F64Deserializer::<ValueError>::new(1.5)).unwrap_err();
        assert!(e.to_string().contains("(1.5)"), "{e}");
        assert!(nanos_str("60").is_err());
        assert_eq!(nanos_u64(0), Ok(Nanos(0)));
        assert_eq!(bytes_u64(0), Ok(Bytes(0)));
        assert_eq!(nanos_str("60us"), Ok(Nanos(60_000)));
    }
}
