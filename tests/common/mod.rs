//! Helpers shared by the integration tests that drive the `sim` binary.

#![allow(dead_code)] // each test crate uses its own subset

use std::path::PathBuf;
use std::process::Command;

/// Runs `sim` from the repository root; returns (stdout, stderr, exit code).
pub fn sim(args: &[&str]) -> (String, String, i32) {
    sim_env(args, &[])
}

/// [`sim`] with extra environment variables.
pub fn sim_env(args: &[&str], env: &[(&str, &str)]) -> (String, String, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_sim"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run sim");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
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
