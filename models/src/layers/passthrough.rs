//! `[[passthrough]]`: a stacking layer that does nothing. Each request from
//! above goes down to its one device (or layer) unchanged, and completes
//! upward when that request completes; it charges no CPU time and keeps no
//! statistics. It exists for the tests of the stacking machinery (layers
//! over layers, completions through any depth): a stack with passthroughs
//! in it must give the figures of the same stack without them.
//!
//! It is also the proof of the layer registry
//! ([`crate::layers::registry`]): this file and one line there are all
//! that make `[[passthrough]]` a section, a graph node and a layer.

use serde::{Deserialize, Serialize};

use crate::layers::layer::{Child, ChildDone, Layer, LayerCx, LayerReq, Origin, Route, Tokens};
use crate::layers::registry::{BuildCx, LayerSpec};

/// `[[passthrough]]`: a layer named `name` over `below = ["DEVICE"]`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PassthroughConfig {
    pub name: String,
    /// The device or layer it sits on (`nvme0` or `/dev/nvme0`): one.
    pub below: Vec<String>,
}

impl LayerSpec for PassthroughConfig {
    fn name(&self) -> &str {
        &self.name
    }
    fn below(&self) -> Vec<&str> {
        self.below.iter().map(String::as_str).collect()
    }
    fn build(&self, cx: &mut BuildCx<'_>) -> Result<Box<dyn Layer>, String> {
        let [b] = &cx.below[..] else {
            return Err(format!("below = {:?}: name one device", self.below));
        };
        Ok(Box::new(Passthrough::new(&self.name, &b.name, b.capacity_sectors)))
    }
}

/// The layer: the requests from above in flight, by token.
pub struct Passthrough {
    name: String,
    below: [String; 1],
    capacity_sectors: u64,
    /// The origin of each request in flight, by token.
    up: Tokens<Origin>,
}

impl Passthrough {
    pub fn new(name: &str, below: &str, capacity_sectors: u64) -> Self {
        Passthrough {
            name: name.to_string(),
            below: [below.to_string()],
            capacity_sectors,
            up: Tokens::default(),
        }
    }
}

impl Layer for Passthrough {
    fn name(&self) -> &str {
        &self.name
    }
    fn below(&self) -> &[String] {
        &self.below
    }
    fn capacity_sectors(&self) -> u64 {
        self.capacity_sectors
    }
    fn submit(&mut self, up: Origin, req: LayerReq, _cx: &mut LayerCx) -> Child {
        let token = self.up.insert(up);
        Child {
            below: 0,
            route: Route::Token(token),
            dir: req.dir,
            sector: req.sector,
            sectors: req.sectors,
            serves: Some(up),
        }
    }
    fn child_done(&mut self, done: ChildDone, cx: &mut LayerCx) {
        let up = self.up.take(done.token);
        if done.failed {
            cx.fail(up);
        } else {
            cx.complete(up);
        }
    }
    fn check_invariants(&self) -> Result<(), String> {
        self.up.check().map_err(|e| format!("{}: {e}", self.name))
    }
    fn discard_below(&self) -> Option<usize> {
        Some(0)
    }
}
