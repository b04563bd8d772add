//! Every numeric option a user can set, with the extreme values of its
//! kind (0, 1, unaligned, 2^63, 2^64 - 1, ...), written as a user writes
//! them. `tests/user_numbers.rs` runs each option at each value and
//! requires a valid run or exit 2, never exit 3, a panic or a hang; the
//! swarm (`sim swarm --extremes`) and the `numbers` fuzz target draw from
//! the same list. A new numeric option is one more line in
//! `tests/data/user_numbers.txt` (scenario, `--set` path, kind).

/// The list: `scenario option kind` per line, `#` comments.
pub const OPTIONS: &str = include_str!("../../tests/data/user_numbers.txt");

/// The values tried for each kind of option.
pub fn values(kind: &str) -> &'static [&'static str] {
    match kind {
        // fio job options (bare numbers are bytes / seconds, as fio).
        "fsize" => &[
            "0",
            "1",
            "513",
            "4097",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551615k",
        ],
        "frange" => &["0-4k", "512-513", "4k-18446744073709551615"],
        "fsplit" => &["0/100", "513/100", "18446744073709551615/100"],
        "fint" => &[
            "0",
            "1",
            "-1",
            "4294967296",
            "9223372036854775808",
            "18446744073709551615",
        ],
        "ftime" => &[
            "0",
            "0.5",
            "18446744074",
            "18446744073709551615",
            "18446744073709551615ns",
            "99999999999999h",
        ],
        "frw" => &[
            "read:0",
            "read:18446744073709551615",
            "read:-9223372036854775808",
            "randread:4294967296",
        ],
        "fdist" => &["zipf:0", "zipf:1e308", "pareto:1e-308", "normal:100"],
        // Scenario values (sizes and times carry their unit).
        "int" => &[
            "0",
            "1",
            "-1",
            "256",
            "4294967295",
            "4294967296",
            "9223372036854775807",
            "18446744073709551615",
        ],
        "float" => &["0.0", "-1.0", "1e-300", "1e300", "nan", "inf"],
        "size" => &[
            "0",
            "1b",
            "513b",
            "1p",
            "9223372036854775808b",
            "18446744073709551615b",
        ],
        "dur" => &[
            "0",
            "1ns",
            "1h",
            "9223372036854775808ns",
            "18446744073709551615ns",
        ],
        _ => &[],
    }
}

/// (scenario, option, value) for every listed option and value.
pub fn cases() -> Vec<(String, String, &'static str)> {
    let list = OPTIONS;
    let mut out = Vec::new();
    for line in list.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 3 {
            continue;
        }
        for v in values(f[2]) {
            out.push((f[0].to_string(), f[1].to_string(), *v));
        }
    }
    out
}

/// Every listed option once, with its kind, in list order.
pub fn options() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for line in OPTIONS.lines().map(str::trim) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if line.starts_with('#') || f.len() != 3 {
            continue;
        }
        if !out.iter().any(|(o, _)| *o == f[1]) {
            out.push((f[1], f[2]));
        }
    }
    out
}

/// Whether a scenario's TOML text has the section an option sets
/// (`ssd.capacity` needs `[[ssd]]`; `bcache.populate.offset`
/// `[bcache.populate]`).
pub fn has_section(toml: &str, option: &str) -> bool {
    let Some((section, _)) = option.rsplit_once('.') else {
        return false;
    };
    toml.lines().any(|l| {
        let l = l.trim();
        l == format!("[{section}]") || l == format!("[[{section}]]")
    })
}
