//! The README's command synopses and `sim <command> --help` agree: every
//! long flag `--help` shows appears in a README synopsis line of that
//! command, and every flag a README line `sim <command> ...` uses is one
//! that command's `--help` shows. The subcommands themselves are listed
//! here, so a new one cannot go undocumented.

use std::collections::{BTreeMap, BTreeSet};

mod common;
use common::sim;

/// Every leaf command of `sim` (as typed after `sim`).
const COMMANDS: &[&str] = &[
    "run",
    "replay",
    "trace dump",
    "trace stats",
    "cachesim",
    "check",
    "check inflight",
    "check btree",
    "swarm",
    "sweep",
    "compare",
    "merge",
    "calibrate",
    "validate",
];

/// The subcommand names of a `--help` text (its `Commands:` section).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// Long flags (`--name`) in a piece of text.
fn long_flags(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i + 2 < b.len() {
        let starts = b[i] == b'-'
            && b[i + 1] == b'-'
            && b[i + 2].is_ascii_alphabetic()
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-'));
        if starts {
            let end = (i + 2..b.len())
                .find(|&j| !(b[j].is_ascii_alphanumeric() || b[j] == b'-'))
                .unwrap_or(b.len());
            out.insert(text[i..end].to_string());
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// Long flags `sim <command> --help` shows (without --help and --version).
fn help_flags(command: &str) -> BTreeSet<String> {
    let mut args: Vec<&str> = command.split(' ').collect();
    args.push("--help");
    let (out, err, code) = sim(&args);
    assert_eq!(code, 0, "sim {command} --help: {err}");
    // Option lines start with `-` after at most 6 spaces; their
    // descriptions are indented further.
    let mut flags = BTreeSet::new();
    for line in out.lines() {
        let indent = line.len() - line.trim_start().len();
        if indent <= 6 && line.trim_start().starts_with('-') {
            let head = line.trim_start().split("  ").next().unwrap_or("");
            flags.extend(long_flags(head));
        }
    }
    flags.remove("--help");
    flags.remove("--version");
    flags
}

/// The README's synopsis lines per command: a code line starting with
/// `sim <command>`, with its continuation lines (indented further, starting
/// with `[` or `-`).
fn readme_synopses() -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let lines: Vec<&str> = text.lines().collect();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let indent = line.len() - line.trim_start().len();
        let Some(rest) = line.trim_start().strip_prefix("sim ") else {
            i += 1;
            continue;
        };
        // The longest command the line names.
        let words: Vec<&str> = rest.split_whitespace().collect();
        let command = COMMANDS
            .iter()
            .filter(|c| {
                let cw: Vec<&str> = c.split(' ').collect();
                words.len() >= cw.len() && words[..cw.len()] == cw[..]
            })
            .max_by_key(|c| c.len())
            .unwrap_or_else(|| panic!("README line names no known command: {line:?}"));
        let mut synopsis = line.to_string();
        i += 1;
        while i < lines.len() {
            let next = lines[i];
            let ni = next.len() - next.trim_start().len();
            let t = next.trim_start();
            if ni > indent && (t.starts_with('[') || t.starts_with('-')) {
                synopsis.push('\n');
                synopsis.push_str(next);
                i += 1;
            } else {
                break;
            }
        }
        out.entry(command.to_string()).or_default().push(synopsis);
    }
    out
}

#[test]
fn every_subcommand_is_listed_here() {
    let mut found = Vec::new();
    let (top, _, _) = sim(&["--help"]);
    for c in subcommands(&top) {
        let (sub, _, _) = sim(&[&c, "--help"]);
        let nested = subcommands(&sub);
        if nested.is_empty() || c == "check" {
            found.push(c.clone());
        }
        for n in nested {
            found.push(format!("{c} {n}"));
        }
    }
    found.sort();
    let mut listed: Vec<String> = COMMANDS.iter().map(|c| c.to_string()).collect();
    listed.sort();
    assert_eq!(
        found, listed,
        "add the new subcommand to COMMANDS and a synopsis to README.md"
    );
}

#[test]
fn readme_synopses_match_help() {
    let readme = readme_synopses();
    let mut problems = Vec::new();
    for command in COMMANDS {
        let help = help_flags(command);
        let Some(lines) = readme.get(*command) else {
            problems.push(format!(
                "README.md has no `sim {command} ...` synopsis line"
            ));
            continue;
        };
        let shown: BTreeSet<String> = lines.iter().flat_map(|l| long_flags(l)).collect();
        for f in help.difference(&shown) {
            problems.push(format!(
                "`sim {command} --help` shows {f}, but no README synopsis of `sim {command}` does"
            ));
        }
        for f in shown.difference(&help) {
            problems.push(format!(
                "README shows `sim {command} ... {f}`, but `sim {command} --help` has no {f}"
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn flag_extraction() {
    let f = long_flags("[-F|--input-format NAME] [--set K=V]... --out=x a--b ---c");
    let v: Vec<&str> = f.iter().map(String::as_str).collect();
    assert_eq!(v, ["--input-format", "--out", "--set"]);
}
