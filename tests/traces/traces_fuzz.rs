//! Fuzz regressions and a deterministic mutation smoke test for every trace
//! reader. Crashes found by `cargo +nightly fuzz run` (see fuzz/README.md)
//! are kept in tests/data/traces/fuzz-regressions/ and replayed here.

use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn files_in(dir: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(ROOT).join(dir);
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.path().is_file())
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read(e.path()).unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn fuzz_regressions_do_not_panic() {
    let files = files_in("tests/data/traces/fuzz-regressions");
    assert!(
        files.len() > 20,
        "tests/data/traces/fuzz-regressions/ lost its inputs"
    );
    for (name, data) in files {
        eprintln!("replaying {name}");
        blocksim_traces::fuzz_all_readers(&data);
    }
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

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut d = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(6) {
            0 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] ^= 1 << rng.below(8);
            }
            1 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] = [0, 0xff, b',', b'\n', b' ', b'9'][rng.below(6)];
            }
            2 => d.truncate(rng.below(d.len() + 1)),
            3 if !d.is_empty() => {
                let (a, b) = (rng.below(d.len()), rng.below(d.len()));
                let (lo, hi) = (a.min(b), a.max(b).min(a.min(b) + 64));
                let chunk = d[lo..hi].to_vec();
                let at = rng.below(d.len());
                d.splice(at..at, chunk);
            }
            4 if d.len() >= 48 => {
                // Corrupt a likely length/action field of a blktrace record.
                let rec = 48 * rng.below(d.len() / 48);
                let at = rec + [28, 29, 46, 47][rng.below(4)];
                if at < d.len() {
                    d[at] = rng.next() as u8;
                }
            }
            _ => d.extend((0..rng.below(16)).map(|_| rng.next() as u8)),
        }
    }
    d
}

#[test]
fn mutated_seeds_never_panic() {
    let seeds = files_in("fuzz/seeds");
    assert!(
        seeds.len() >= 10,
        "fuzz/seeds should hold a seed per format"
    );
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (_, seed) in &seeds {
        blocksim_traces::fuzz_all_readers(seed);
        for _ in 0..12 {
            let m = mutate(&mut rng, seed);
            blocksim_traces::fuzz_all_readers(&m);
            blocksim_traces::fuzz_oracle_general(&m);
        }
    }
}
