//! The README's examples run: every fenced ```sh command that starts with
//! `sim` runs and exits 0, every fenced ```toml scenario (`[simulation]`)
//! runs with `sim run`, and the quick start's scenario is the file it names
//! (`scenarios/quickstart.toml`). The concrete `sim` commands of the
//! indented examples name files that exist. The quick start sits in the
//! first 80 lines, next to the links to docs/seeds.md and ARCHITECTURE.md.

#[path = "../common/mod.rs"]
mod common;
use common::{sim, temp_file};

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md")
}

/// Fenced code blocks: (language, first line number (1-based), text).
fn fenced(text: &str) -> Vec<(String, usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(lang)) => open = Some((lang.trim().to_string(), i + 2, String::new())),
            (Some(_), Some(_)) => out.push(open.take().expect("open block")),
            (Some((_, _, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "README has an unclosed ``` block");
    out
}

#[test]
fn fenced_commands_run() {
    let text = readme();
    let mut ran = 0;
    for (lang, line, body) in fenced(&text) {
        if lang != "sh" {
            continue;
        }
        for (k, cmd) in body.lines().enumerate() {
            let Some(rest) = cmd.trim().strip_prefix("sim ") else {
                continue;
            };
            let args: Vec<&str> = rest.split_whitespace().collect();
            let (out, err, code) = sim(&args);
            assert_eq!(code, 0, "README.md:{}: `{cmd}` failed:\n{err}", line + k);
            assert!(
                out.contains("IOPS="),
                "README.md:{}: `{cmd}`:\n{out}",
                line + k
            );
            ran += 1;
        }
    }
    assert!(ran >= 3, "only {ran} fenced sim commands in README.md");
}

#[test]
fn fenced_scenarios_run_and_match_their_files() {
    let text = readme();
    let quick = std::fs::read_to_string("scenarios/quickstart.toml").expect("quick start file");
    let mut scenarios = 0;
    for (lang, line, body) in fenced(&text) {
        if lang != "toml" || !body.contains("[simulation]") {
            continue;
        }
        if body.contains("name = \"quickstart\"") {
            assert_eq!(
                body, quick,
                "README.md:{line}: differs from scenarios/quickstart.toml"
            );
        }
        let p = temp_file("readme", &format!("line{line}.toml"), &body);
        let (out, err, code) = sim(&["run", p.to_str().unwrap()]);
        assert_eq!(
            code, 0,
            "README.md:{line}: the scenario does not run:\n{err}"
        );
        assert!(out.contains("IOPS="), "README.md:{line}:\n{out}");
        scenarios += 1;
    }
    assert!(scenarios >= 1, "no fenced scenario in README.md");
}

/// Indented example commands (`    sim run scenarios/x.toml ...`) name files
/// that exist (synopses with placeholders are left to tests/cli/cli_help.rs).
#[test]
fn indented_commands_name_existing_files() {
    let text = readme();
    let mut checked = 0;
    for (i, line) in text.lines().enumerate() {
        let Some(rest) = line.strip_prefix("    sim ") else {
            continue;
        };
        for word in rest.split_whitespace() {
            let path = word.trim_matches('"').split(':').next().unwrap_or("");
            let named = ["scenarios/", "tests/data/"]
                .iter()
                .any(|d| path.starts_with(d));
            if named {
                assert!(
                    std::path::Path::new(path).exists(),
                    "README.md:{}: {path} does not exist",
                    i + 1
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 5, "only {checked} example paths checked");
}

#[test]
fn quick_start_comes_first() {
    let text = readme();
    let at = |h: &str| {
        text.lines()
            .position(|l| l == h)
            .unwrap_or_else(|| panic!("README.md has no {h:?}"))
    };
    assert!(at("## Quick start") < 80);
    assert!(at("### Your first scenario") < 80);
    assert!(at("## Contents") > at("## Quick start"));
    let top: String = text.lines().take(30).collect::<Vec<_>>().join("\n");
    assert!(
        top.contains("(ARCHITECTURE.md)"),
        "ARCHITECTURE.md is not linked at the top"
    );
    assert!(
        top.contains("(docs/seeds.md)"),
        "docs/seeds.md is not linked at the top"
    );
    assert!(std::path::Path::new("docs/seeds.md").exists());
}
