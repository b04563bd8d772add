//! Per-component random streams.
//!
//! Each component draws from its own ChaCha stream: the key comes from the
//! scenario seed, the stream number from a stable hash (FNV-1a 64) of the
//! component's name. Adding a component never changes another's draws.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The random generator type every component uses.
pub type ComponentRng = ChaCha8Rng;

/// FNV-1a 64-bit hash: stable across platforms, Rust versions and runs.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The random stream of component `name` under scenario seed `seed`.
pub fn component_rng(seed: u64, name: &str) -> ComponentRng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stable_hash(name.as_bytes()));
    rng
}

/// Derives the seed of replication `index` from a scenario seed (SplitMix64).
pub fn derive_seed(seed: u64, index: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(index.wrapping_add(1)));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn streams_are_independent_of_other_components() {
        let a1: Vec<u64> = {
            let mut r = component_rng(42, "ssd0");
            (0..8).map(|_| r.random()).collect()
        };
        // Creating another component's stream in between changes nothing.
        let _other = component_rng(42, "hdd3");
        let a2: Vec<u64> = {
            let mut r = component_rng(42, "ssd0");
            (0..8).map(|_| r.random()).collect()
        };
        assert_eq!(a1, a2);
        let b: Vec<u64> = {
            let mut r = component_rng(42, "ssd1");
            (0..8).map(|_| r.random()).collect()
        };
        assert_ne!(a1, b);
        let c: Vec<u64> = {
            let mut r = component_rng(43, "ssd0");
            (0..8).map(|_| r.random()).collect()
        };
        assert_ne!(a1, c);
    }

    #[test]
    fn fnv_known_value() {
        assert_eq!(stable_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
