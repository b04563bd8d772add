//! Replays the inputs of the scenario-TOML, fio-job and `--set` fuzz targets
//! (tests/fuzz_regressions/<target>/: seeds and every crash the fuzzers
//! found, minimised), and runs a small deterministic mutation smoke test of
//! each target on the stable toolchain. The target bodies are shared with
//! fuzz/fuzz_targets/ through tests/fuzz_regressions/harness.rs.

use std::path::Path;

#[path = "../fuzz_regressions/harness.rs"]
mod harness;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(ROOT).join("tests/fuzz_regressions").join(target);
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .filter(|e| e.path().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "{}: no inputs", dir.display());
    v
}

fn replay(target: &str, body: fn(&[u8])) {
    harness::run_models(true);
    for (name, data) in inputs(target) {
        eprintln!("{target}: replaying {name}");
        body(&data);
    }
}

#[test]
fn numbers_inputs() {
    replay("numbers", harness::numbers);
}

#[test]
fn scenario_toml_inputs() {
    replay("scenario_toml", harness::scenario_toml);
}

#[test]
fn fio_job_inputs() {
    replay("fio_job", harness::fio_job);
}

#[test]
fn set_expr_inputs() {
    replay("set_expr", harness::set_expr);
}

/// xorshift64*: deterministic mutations without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Byte flips, deletions, duplications and splices of tokens the loaders
/// care about.
fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    const TOKENS: &[&[u8]] = &[
        b"=",
        b"[",
        b"]",
        b"[[",
        b"\n",
        b".",
        b"\"",
        b"0",
        b"-1",
        b"99999999999999999999",
        b"4k",
        b"1e308",
        b"nan",
        b"inf",
        b"{",
        b"}",
        b",",
        b"job.",
        b"0-4095",
        b":",
        b"zipf:1.0",
        b"''",
        b"\x00",
        b"\xff",
    ];
    let mut d = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let i = rng.below(d.len() + 1);
        match rng.below(4) {
            0 if i < d.len() => d[i] ^= 1 << rng.below(8),
            1 if i < d.len() => {
                let n = rng.below(16).min(d.len() - i);
                d.drain(i..i + n);
            }
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                d.splice(i..i, t.iter().copied());
            }
            _ if i < d.len() => {
                let n = rng.below(32).min(d.len() - i);
                let chunk: Vec<u8> = d[i..i + n].to_vec();
                d.splice(i..i, chunk);
            }
            _ => {}
        }
    }
    d
}

fn smoke(target: &str, body: fn(&[u8]), count: usize) {
    harness::run_models(true);
    let seeds = inputs(target);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..count {
        let (_, seed) = &seeds[rng.below(seeds.len())];
        body(&mutate(&mut rng, seed));
    }
}

#[test]
fn mutation_smoke() {
    smoke("scenario_toml", harness::scenario_toml, 150);
    smoke("fio_job", harness::fio_job, 150);
    smoke("set_expr", harness::set_expr, 150);
}
