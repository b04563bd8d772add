//! `[[bcache]]` as the layer registry reads it ([`LayerSpec`]): what a
//! set sits on and how it is built over the nodes below.

use crate::layers::bcache::layer::{BcacheLayer, BcacheSyms};
use crate::layers::bcache::{Bcache, BcacheConfig};
use crate::layers::layer::Layer;
use crate::layers::registry::{BelowKind, BelowNode, BuildCx, LayerSpec};

/// The keys that name a set's two nodes below, in `below`'s order.
const BELOW_KEYS: [&str; 2] = ["cache", "backing"];

impl BcacheConfig {
    /// Takes `below = ["CACHE", "BACKING"]`, the way every layer names
    /// what it sits on, into `cache` and `backing` (the scenario keeps
    /// those); an error (without the set's name) says which to give.
    pub fn settle_below(&mut self) -> Result<(), String> {
        let named = !self.cache.is_empty() || !self.backing.is_empty();
        match (self.below.is_empty(), named) {
            (true, _) if self.cache.is_empty() || self.backing.is_empty() => Err(
                "name the cache and backing devices: below = [\"CACHE\", \"BACKING\"] (or cache = and backing =)"
                    .into(),
            ),
            (true, _) => Ok(()),
            (false, true) => Err(format!(
                "below = {:?} and cache/backing both given: give one of them (a scenario that \
                 extends another inherits its cache and backing: name them so)",
                self.below
            )),
            (false, false) => match std::mem::take(&mut self.below)[..] {
                [ref cache, ref backing] => {
                    (self.cache, self.backing) = (cache.clone(), backing.clone());
                    Ok(())
                }
                ref other => Err(format!(
                    "below = {other:?} names {} devices; a set sits on two: [\"CACHE\", \"BACKING\"]",
                    other.len()
                )),
            },
        }
    }
}

impl LayerSpec for BcacheConfig {
    fn name(&self) -> &str {
        &self.name
    }
    fn below(&self) -> Vec<&str> {
        vec![&self.cache, &self.backing]
    }
    fn below_key(&self, i: usize) -> &'static str {
        BELOW_KEYS[i]
    }
    fn below_count(&self) -> (usize, usize) {
        (2, 2)
    }
    /// [`LayerSpec::build`] says what bcache cannot sit on, with its set.
    fn check_below(&self, _: &[BelowNode]) -> Result<(), String> {
        Ok(())
    }
    fn accounting(&self) -> Option<&str> {
        self.accounting.as_deref()
    }
    /// bcache over its cache and backing devices (or layers). With several
    /// sets, each error names its set (`[bcache] "bcache1": ...`) and the
    /// set's report tables are labelled with its name.
    fn build(&self, cx: &mut BuildCx<'_>) -> Result<Box<dyn Layer>, String> {
        let several = cx.of_kind > 1;
        let err = |msg: String| set_error(several.then_some(&self.name), msg);
        let [cache, backing] = &cx.below[..] else {
            return Err(err(format!("[bcache] below = {:?}: name two devices", self.below())));
        };
        for (key, b) in BELOW_KEYS.iter().zip([cache, backing]) {
            if b.kind == BelowKind::NoQueue {
                return Err(err(not_a_queue(key, &b.name)));
            }
        }
        if cache.name == backing.name {
            return Err(err("[bcache] cache and backing must differ".into()));
        }
        self.check_backing(&backing.limits).map_err(err)?;
        let mut bc = Bcache::new(
            self.clone(),
            cache.capacity_sectors,
            backing.capacity_sectors,
            cx.costs.btree.clone(),
            cx.seed,
        )
        .map_err(err)?;
        bc.populate().map_err(err)?;
        bc.register_symbols(cx.profile);
        // Its counters restart with the job statistics after ramp_time.
        bc.set_measure_start(cx.measure_start_ns);
        let syms = BcacheSyms::register(cx.profile);
        let layer = BcacheLayer::new(
            bc,
            &cache.name,
            (&backing.name, backing.capacity_sectors),
            syms,
        );
        Ok(Box::new(layer.labelled(several)))
    }
}

/// A bcache error as it is with one set; with several (`set` given),
/// led by the set's name: `[bcache] "bcache1": cache_mode = ...`,
/// `[bcache] "bcache1": [bcache.populate] length ...`.
fn set_error(set: Option<&String>, msg: String) -> String {
    let Some(name) = set else { return msg };
    let rest = msg.strip_prefix("[bcache] ").unwrap_or(&msg);
    format!("[bcache] {name:?}: {rest}")
}

/// Why bcache cannot sit on `name`.
fn not_a_queue(key: &str, name: &str) -> String {
    format!(
        "[bcache] {key} = {name:?} is not a device with a queue ([[ssd]], [[hdd]], [[generic]], [[raid10]]) \
         or a layer ([[passthrough]], [[dm]]): bcache over pmem or an md member is not modelled"
    )
}
