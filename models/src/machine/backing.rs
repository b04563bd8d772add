//! The leaf devices of a scenario (`[[ssd]]`, `[[hdd]]`, `[[generic]]`)
//! in the order the machine holds them, which is the order the report
//! lists them in: the SSDs no md array holds, then each `[[raid10]]`
//! array's members in raid-disk order (where the report lists the array,
//! with its members under it), then the other disks and generic devices.
//!
//! md's members are devices like any other, each behind its own host
//! queues; the array is a stacking layer over them
//! ([`crate::layers::raid10::Raid10`]).

use crate::config::Scenario;
use crate::devices::device::BlockDevice;
use crate::devices::generic::Generic;
use crate::devices::hdd::Hdd;
use crate::devices::ssd::SsdConfig;
use crate::machine::run::ModelError;

/// Tags of a bio-based device's "port": effectively unbounded.
pub const BIO_BASED_TAGS: u32 = 1 << 16;

/// A leaf device to add: an SSD (whose host queues depend on its
/// interface), or a device built with the tags of its port.
pub enum Leaf<'a> {
    Ssd(&'a SsdConfig),
    Dev(Box<dyn BlockDevice>, u32),
}

/// Receives each leaf in order: (name, leaf).
pub type AddLeaf<'a> = dyn FnMut(&str, Leaf<'_>) -> Result<(), ModelError> + 'a;

fn config_err(e: impl ToString) -> ModelError {
    ModelError::Config(e.to_string())
}

/// The layers that own the devices below them
/// ([`crate::layers::registry::LayerSpec::owns_below`]: md's members).
fn owners(sc: &Scenario) -> Result<Vec<crate::config::LayerSpecAt<'_>>, ModelError> {
    let specs = sc.layer_specs().map_err(|(_, _, e)| config_err(e))?;
    Ok(specs
        .into_iter()
        .filter(|(_, _, s)| s.owns_below())
        .collect())
}

/// Names of every device a layer owns (an array's members).
pub fn array_members(sc: &Scenario) -> std::collections::BTreeSet<String> {
    let owners = owners(sc).unwrap_or_default();
    let below = owners.iter().flat_map(|(_, _, s)| s.below());
    below
        .map(|b| crate::devices::device::device_name(b).to_string())
        .collect()
}

/// A disk behind an AHCI port of `ncq_tags` tags (at most its own NCQ
/// depth).
fn hdd(
    h: &crate::devices::hdd::HddConfig,
    seed: u64,
    ncq_tags: u32,
) -> Result<Leaf<'static>, ModelError> {
    let disk = Hdd::new(h, blocksim_sim::component_rng(seed, &h.name)).map_err(config_err)?;
    let tags = ncq_tags.min(h.ncq_depth.max(1));
    Ok(Leaf::Dev(Box::new(disk), tags))
}

/// A generic device behind a queue of its `queue_depth`.
fn generic(
    g: &crate::devices::generic::GenericConfig,
    seed: u64,
) -> Result<Leaf<'static>, ModelError> {
    g.validate().map_err(config_err)?;
    let rng = blocksim_sim::component_rng(seed, &g.name);
    Ok(Leaf::Dev(
        Box::new(Generic::new(g.clone(), rng)),
        g.queue_depth,
    ))
}

/// Adds every leaf device of the scenario through `add`, in the order
/// above.
pub fn add_leaves(
    sc: &Scenario,
    seed: u64,
    ncq_tags: u32,
    add: &mut AddLeaf<'_>,
) -> Result<(), ModelError> {
    let in_array = array_members(sc);
    for s in sc.ssd.iter().filter(|s| !in_array.contains(&s.name)) {
        add(&s.name, Leaf::Ssd(s))?;
    }
    for (_, _, owner) in owners(sc)? {
        for name in owner.below() {
            let name = crate::devices::device::device_name(name);
            let leaf = if let Some(s) = sc.ssd.iter().find(|s| s.name == name) {
                Leaf::Ssd(s)
            } else if let Some(h) = sc.hdd.iter().find(|h| h.name == name) {
                hdd(h, seed, ncq_tags)?
            } else if let Some(g) = sc.generic.iter().find(|g| g.name == name) {
                generic(g, seed)?
            } else {
                // No disk (pmem, a layer): the owner's own check says so
                // when it is built (`LayerSpec::check_below`).
                continue;
            };
            add(name, leaf)?;
        }
    }
    for h in sc.hdd.iter().filter(|h| !in_array.contains(&h.name)) {
        add(&h.name, hdd(h, seed, ncq_tags)?)?;
    }
    for g in sc.generic.iter().filter(|g| !in_array.contains(&g.name)) {
        add(&g.name, generic(g, seed)?)?;
    }
    Ok(())
}
