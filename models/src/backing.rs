//! Builds the rotating backing devices of a scenario: `[[raid10]]` arrays
//! over `[[hdd]]` disks, and stand-alone disks.
//!
//! md's member disks are owned by the array (md issues their I/O itself);
//! the array appears as one device with an unbounded port (md is bio-based,
//! no tags), and its completions reach the IRQ CPU like any device's.

use crate::config::Scenario;
use crate::device::BlockDevice;
use crate::hdd::Hdd;
use crate::raid10::build_raid10;
use crate::run::ModelError;

/// Tags of a bio-based device's "port": effectively unbounded.
const BIO_BASED_TAGS: u32 = 1 << 16;

/// Receives each device built: (name, device, tags of its port).
pub type AddDevice<'a> = dyn FnMut(&str, Box<dyn BlockDevice>, u32) -> Result<(), ModelError> + 'a;

/// Adds every backing device of the scenario through `add(name, device, tags)`.
pub fn add_backing_devices(
    sc: &Scenario,
    seed: u64,
    ncq_tags: u32,
    add: &mut AddDevice<'_>,
) -> Result<(), ModelError> {
    let mut in_array = std::collections::BTreeSet::new();
    for r in &sc.raid10 {
        let array =
            build_raid10(r, &sc.hdd, seed).map_err(|e| ModelError::Config(e.to_string()))?;
        in_array.extend(r.members.iter().cloned());
        add(&r.name, Box::new(array), BIO_BASED_TAGS)?;
    }
    for h in sc.hdd.iter().filter(|h| !in_array.contains(&h.name)) {
        let disk = Hdd::new(h, blocksim_sim::component_rng(seed, &h.name))
            .map_err(|e| ModelError::Config(e.to_string()))?;
        let tags = ncq_tags.min(h.ncq_depth.max(1));
        add(&h.name, Box::new(disk), tags)?;
    }
    Ok(())
}
