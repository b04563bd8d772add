//! Helpers shared by the integration tests that drive the `sim` binary.

#![allow(dead_code)] // each test crate uses its own subset

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `sim` binary of this build: every test that runs `sim` runs it
/// through this module.
pub const SIM: &str = env!("CARGO_BIN_EXE_sim");

/// A `Command` for `sim`, for a test that sets up the rest itself (stdin,
/// pipes, working directory).
pub fn sim_cmd() -> Command {
    Command::new(SIM)
}

/// Runs `sim` with `args` and extra environment variables in the test's
/// working directory; returns its `Output` as it is.
pub fn sim_output(args: &[&str], env: &[(&str, &str)]) -> Output {
    sim_cmd()
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run sim")
}

/// Runs `sim` from the repository root; returns (stdout, stderr, exit code).
pub fn sim(args: &[&str]) -> (String, String, i32) {
    sim_env(args, &[])
}

/// [`sim`] with extra environment variables.
pub fn sim_env(args: &[&str], env: &[(&str, &str)]) -> (String, String, i32) {
    sim_env_in(Path::new(env!("CARGO_MANIFEST_DIR")), args, env)
}

/// [`sim`] run in `cwd` (a test whose run writes files there).
pub fn sim_in(cwd: &Path, args: &[&str]) -> (String, String, i32) {
    sim_env_in(cwd, args, &[])
}

fn sim_env_in(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> (String, String, i32) {
    let out = sim_cmd()
        .args(args)
        .envs(env.iter().copied())
        .current_dir(cwd)
        .output()
        .expect("run sim");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// `sim ARGS`'s stdout; the command must succeed (exit 0), else the test
/// fails with its stderr.
pub fn sim_ok(args: &[&str]) -> String {
    let (out, err, code) = sim(args);
    assert_eq!(code, 0, "sim {args:?} failed:\n{err}");
    out
}

/// `sim run ARGS`'s stdout, which must succeed.
pub fn run_ok(args: &[&str]) -> String {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    sim_ok(&all)
}

/// The value after the name in row `name` of a two-column table (the
/// report's `metrics`).
pub fn metric(out: &str, name: &str) -> String {
    out.lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(name)).then(|| w.next().unwrap_or("").to_string())
        })
        .unwrap_or_else(|| panic!("no row {name}:\n{out}"))
}

/// Writes `text` to `name` in this test process's scratch directory
/// `blocksim-<tag>-<pid>` under the system temp dir; returns the path.
pub fn temp_file(tag: &str, name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blocksim-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A scratch directory `blocksim-<tag>-<pid>` under the system temp dir,
/// emptied when made and removed when dropped (the tests leave nothing
/// behind).
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("blocksim-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl std::ops::Deref for TempDir {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
