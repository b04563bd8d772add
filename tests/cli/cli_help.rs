//! The README's command synopses and `sim <command> --help` agree: every
//! long flag `--help` shows appears in a README synopsis line of that
//! command, and every flag a README line `sim <command> ...` uses is one
//! that command's `--help` shows. The subcommands themselves are listed
//! here, so a new one cannot go undocumented.

use std::collections::{BTreeMap, BTreeSet};

#[path = "../common/mod.rs"]
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

/// Splits a command line into its top-level words: brackets (`[]`, `<>`,
/// `()`) keep what they enclose in one word, across line breaks.
fn top_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '[' | '<' | '(' => depth += 1,
            ']' | '>' | ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if c.is_whitespace() && depth == 0 {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
        } else {
            word.push(c);
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// The flags a command line cannot do without: per word outside `[...]`,
/// its long flags (one of them is needed: `<--a X|--b Y>`).
fn required_groups(line: &str) -> Vec<BTreeSet<String>> {
    top_words(line)
        .iter()
        .filter(|w| !w.starts_with('['))
        .map(|w| long_flags(w))
        .filter(|g| !g.is_empty())
        .collect()
}

/// The usage forms `sim <command> --help` shows (`Usage:` and the lines
/// under it that start with `sim`).
fn usage_forms(help: &str) -> Vec<String> {
    let mut forms = Vec::new();
    let mut lines = help.lines().skip_while(|l| !l.starts_with("Usage: "));
    if let Some(first) = lines.next() {
        forms.push(first["Usage: ".len()..].to_string());
    }
    forms.extend(
        lines
            .take_while(|l| l.trim_start().starts_with("sim "))
            .map(|l| l.trim().to_string()),
    );
    forms
}

/// `[default: X]` of each long flag of a `--help` text.
fn help_defaults(help: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut flag: Option<String> = None;
    for line in help.lines() {
        let indent = line.len() - line.trim_start().len();
        if indent <= 6 && line.trim_start().starts_with('-') {
            let head = line.trim_start().split("  ").next().unwrap_or("");
            flag = long_flags(head).into_iter().next();
        }
        if let (Some(f), Some(rest)) = (&flag, line.split("[default: ").nth(1)) {
            let value = rest.split(']').next().unwrap_or("").to_string();
            out.insert(f.clone(), value);
        }
    }
    out
}

/// A README line that shows a synopsis (it has a placeholder such as
/// SCENARIO or N), not an example.
fn is_synopsis(line: &str) -> bool {
    line.split(|c: char| c.is_whitespace() || "[]()<>|,=".contains(c))
        .any(|w| w.starts_with(|c: char| c.is_ascii_uppercase()))
}

/// Optional flags the README's synopsis still shows without brackets (to
/// be bracketed there; then drop the entry).
const README_SHOWS_OPTIONAL_AS_REQUIRED: &[(&str, &str)] = &[];

/// What a command's README lines must agree on with its `--help`.
fn required_and_default_problems(command: &str, help: &str, lines: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    let forms: Vec<Vec<BTreeSet<String>>> = usage_forms(help)
        .iter()
        .map(|f| required_groups(f))
        .collect();
    // A flag every usage form needs is in every README line (examples too).
    let needed = forms.first().cloned().unwrap_or_default();
    for group in needed
        .iter()
        .filter(|g| forms.iter().all(|f| f.contains(g)))
    {
        for line in lines {
            let shown: BTreeSet<String> = required_groups(line).into_iter().flatten().collect();
            if group.is_disjoint(&shown) {
                problems.push(format!(
                    "`sim {command} --help` requires {group:?}, but README's `{line}` does not give it"
                ));
            }
        }
    }
    // A flag outside brackets in every README synopsis is required by
    // some usage form of --help.
    let synopses: Vec<&String> = lines.iter().filter(|l| is_synopsis(l)).collect();
    let mut readme_required: Option<BTreeSet<String>> = None;
    for l in &synopses {
        let r: BTreeSet<String> = required_groups(l).into_iter().flatten().collect();
        readme_required = Some(match readme_required {
            None => r,
            Some(prev) => prev.intersection(&r).cloned().collect(),
        });
    }
    let help_required: BTreeSet<String> = forms.iter().flatten().flatten().cloned().collect();
    let pending = |f: &str| README_SHOWS_OPTIONAL_AS_REQUIRED.contains(&(command, f));
    for f in readme_required
        .unwrap_or_default()
        .difference(&help_required)
        .filter(|f| !pending(f))
    {
        problems.push(format!(
            "README's synopses of `sim {command}` show {f} as required, but `sim {command} --help` shows it optional"
        ));
    }
    // A value a synopsis shows for a flag with a default is that default
    // (or one of the choices `a|b|c` it lists).
    let defaults = help_defaults(help);
    for l in &synopses {
        let words: Vec<&str> = l
            .split(|c: char| c.is_whitespace() || "[]".contains(c))
            .filter(|w| !w.is_empty())
            .collect();
        for pair in words.windows(2) {
            let (flag, value) = match pair[0].split_once('=') {
                Some((f, v)) => (f, v),
                None => (pair[0], pair[1]),
            };
            let Some(d) = defaults.get(flag) else {
                continue;
            };
            if value.starts_with(|c: char| c.is_ascii_uppercase() || c == '-') {
                continue;
            }
            if !value.split('|').any(|v| v == d) {
                problems.push(format!(
                    "README shows `sim {command} ... {flag} {value}`, but --help says [default: {d}]"
                ));
            }
        }
    }
    problems
}

#[test]
fn readme_required_flags_and_defaults_match_help() {
    let readme = readme_synopses();
    let mut problems = Vec::new();
    for command in COMMANDS {
        let mut args: Vec<&str> = command.split(' ').collect();
        args.push("--help");
        let (help, err, code) = sim(&args);
        assert_eq!(code, 0, "sim {command} --help: {err}");
        let lines = readme.get(*command).cloned().unwrap_or_default();
        problems.extend(required_and_default_problems(command, &help, &lines));
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn required_and_default_checks_catch_disagreements() {
    let help = "Usage: sim x [OPTIONS] --size <SIZE> <--policy <P>|--shards <S>> <T>\n\nOptions:\n      --policy <P>  p\n      --unit <U>  u [default: objects]\n";
    let ok = ["sim x T --policy LIST --size N [--unit objects|bytes]".to_string()];
    assert!(required_and_default_problems("x", help, &ok).is_empty());
    // --size left out, --unit's default not among the choices.
    let bad = ["sim x T --policy LIST [--size N] [--unit bytes|blocks]".to_string()];
    let p = required_and_default_problems("x", help, &bad);
    assert_eq!(p.len(), 2, "{p:#?}");
    // The README requires a flag --help calls optional.
    let help = "Usage: sim x [OPTIONS] <T>\n";
    let p = required_and_default_problems("x", help, &["sim x T --policy LIST".to_string()]);
    assert_eq!(p.len(), 1, "{p:#?}");
}
