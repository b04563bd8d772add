//! `[[passthrough]]`: a stacking layer that does nothing. Each request from
//! above goes down to its one device (or layer) unchanged, and completes
//! upward when that request completes; it charges no CPU time and keeps no
//! statistics. It exists for the tests of the stacking machinery (layers
//! over layers, completions through any depth): a stack with passthroughs
//! in it must give the figures of the same stack without them.

use serde::{Deserialize, Serialize};

use crate::layers::layer::{Child, ChildDone, Layer, LayerCx, LayerReq, Origin, Route};

/// `[[passthrough]]`: a layer named `name` over `device`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PassthroughConfig {
    pub name: String,
    /// The device or layer it sits on (`nvme0` or `/dev/nvme0`).
    pub device: String,
}

/// The layer: the requests from above in flight, by token.
pub struct Passthrough {
    name: String,
    below: [String; 1],
    capacity_sectors: u64,
    /// The origin of each request in flight, by token (`None`: free).
    up: Vec<Option<Origin>>,
    free: Vec<u32>,
}

impl Passthrough {
    pub fn new(cfg: &PassthroughConfig, below: &str, capacity_sectors: u64) -> Self {
        Passthrough {
            name: cfg.name.clone(),
            below: [below.to_string()],
            capacity_sectors,
            up: Vec::new(),
            free: Vec::new(),
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
        let token = match self.free.pop() {
            Some(t) => {
                self.up[t as usize] = Some(up);
                t
            }
            None => {
                self.up.push(Some(up));
                (self.up.len() - 1) as u32
            }
        };
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
        let up = self.up[done.token as usize]
            .take()
            .expect("a passthrough token completed twice");
        self.free.push(done.token);
        if done.failed {
            cx.fail(up);
        } else {
            cx.complete(up);
        }
    }
    fn check_invariants(&self) -> Result<(), String> {
        let held = self.up.iter().flatten().count();
        if held + self.free.len() != self.up.len() {
            return Err(format!("{}: tokens lost", self.name));
        }
        Ok(())
    }
    fn discard_below(&self) -> Option<usize> {
        Some(0)
    }
}
