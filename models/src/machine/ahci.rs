//! libata/AHCI: NCQ tags per port, the block-layer queue in front of them,
//! and completion interrupts. A [`Port`] is also one hardware queue of a
//! multi-queue device (an NVMe queue pair): see `blkmq.rs`.
//!
//! A port has a fixed number of usable NCQ tags (2011 libata: ATA_MAX_QUEUE
//! 32 with one kept for internal commands, so 31). Requests beyond that wait
//! in the request queue and are dispatched when an interrupt frees a tag.
//! Completed commands set bits in the port's status register; one interrupt
//! handler invocation retires every command that finished before it read the
//! register, so interrupts coalesce naturally under load.

use blocksim_sim::ring::Ring;

use serde::{Deserialize, Serialize};

/// `[ahci]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AhciConfig {
    /// Usable NCQ tags per port.
    pub ncq_tags: u32,
    /// Latency from a command's completion to the handler starting on an
    /// idle IRQ CPU (MSI delivery, vector entry).
    #[serde(default)]
    pub irq_delivery: blocksim_sim::units::Nanos,
}

/// Who a device-level request belongs to: an index the stack interprets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin(pub u32);

/// [`TagOwner::root`] of a request that serves no job I/O.
pub const NO_ROOT: u32 = u32::MAX;

/// What a busy tag holds: the request's owner and the job I/O it serves
/// (the stack's slot, or [`NO_ROOT`]), kept so that completion handling
/// needs no walk up the layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagOwner {
    pub origin: Origin,
    pub root: u32,
    /// The device completed the request with an I/O error.
    pub failed: bool,
}

/// A request waiting for a tag.
#[derive(Debug, Clone, Copy)]
pub struct Queued {
    pub origin: Origin,
    /// The job I/O it serves ([`NO_ROOT`]: none).
    pub root: u32,
    pub dir: crate::devices::device::Dir,
    pub sector: u64,
    pub sectors: u32,
}

/// One port: tags, the wait queue, finished-but-unretired tags.
#[derive(Debug)]
pub struct Port {
    tags_max: u32,
    free_tags: Vec<u32>,
    owner: Vec<Option<TagOwner>>,
    pub waiting: Ring<Queued>,
    /// Tags the device completed that no interrupt has retired yet.
    pub done_unretired: Vec<u32>,
    /// An interrupt handler is scheduled or running for this port.
    pub irq_active: bool,
    /// Tags the running handler retires.
    pub retiring: Vec<u32>,
    /// The CPU the port's interrupt handler runs on (its MSI-X vector's,
    /// or the IRQ CPU), set when the machine is assembled.
    pub handler_cpu: u32,
    /// An interrupt coalescing timer is pending (NVMe aggregation time).
    pub coalesce_armed: bool,
    /// Generation of the coalescing timer: a timer event whose generation
    /// differs was overtaken (the threshold fired first).
    pub coalesce_gen: u16,
    /// Upper bound on requests waiting for a tag (the block layer's
    /// nr_requests limit generalised; the submitter is throttled before it).
    waiting_max: usize,
}

impl Port {
    pub fn new(tags_max: u32, waiting_max: usize) -> Port {
        assert!(tags_max > 0);
        Port {
            tags_max,
            free_tags: (0..tags_max).rev().collect(),
            owner: vec![None; tags_max as usize],
            waiting: Ring::with_capacity(1),
            done_unretired: Vec::new(),
            irq_active: false,
            retiring: Vec::new(),
            handler_cpu: 0,
            coalesce_armed: false,
            coalesce_gen: 0,
            waiting_max,
        }
    }

    pub fn tags_max(&self) -> u32 {
        self.tags_max
    }

    pub fn tags_busy(&self) -> u32 {
        self.tags_max - self.free_tags.len() as u32
    }

    /// Whether a new request would be issued at once.
    pub fn can_issue_now(&self) -> bool {
        !self.free_tags.is_empty() && self.waiting.is_empty()
    }

    /// Takes a tag for `owner`.
    pub fn take_tag(&mut self, owner: TagOwner) -> Option<u32> {
        let t = self.free_tags.pop()?;
        debug_assert!(self.owner[t as usize].is_none());
        self.owner[t as usize] = Some(owner);
        Some(t)
    }

    /// Releases a retired tag, returning its owner.
    pub fn release_tag(&mut self, tag: u32) -> TagOwner {
        let o = self.owner[tag as usize]
            .take()
            .unwrap_or_else(|| panic!("tag {tag} completed twice or never issued"));
        self.free_tags.push(tag);
        o
    }

    /// Records that the device failed the request holding `tag`.
    pub fn mark_failed(&mut self, tag: u32) {
        let o = self.owner[tag as usize]
            .as_mut()
            .unwrap_or_else(|| panic!("failure of tag {tag}, which is not busy"));
        o.failed = true;
    }

    /// The owner of a busy tag.
    pub fn owner_of(&self, tag: u32) -> Option<TagOwner> {
        self.owner[tag as usize]
    }

    pub fn enqueue(&mut self, q: Queued) {
        assert!(
            self.waiting.len() < self.waiting_max,
            "block layer queue bound {} exceeded",
            self.waiting_max
        );
        self.waiting.push_back(q);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_bounded_and_reused() {
        let mut p = Port::new(2, 10);
        let own = |o| TagOwner {
            origin: Origin(o),
            root: NO_ROOT,
            failed: false,
        };
        let a = p.take_tag(own(1)).unwrap();
        let _b = p.take_tag(own(2)).unwrap();
        assert!(p.take_tag(own(3)).is_none());
        assert_eq!(p.tags_busy(), 2);
        assert_eq!(p.release_tag(a), own(1));
        assert!(p.can_issue_now());
    }

    #[test]
    #[should_panic(expected = "completed twice")]
    fn double_completion_is_caught() {
        let mut p = Port::new(2, 10);
        let a = p
            .take_tag(TagOwner {
                origin: Origin(1),
                root: 7,
                failed: false,
            })
            .unwrap();
        p.release_tag(a);
        p.release_tag(a);
    }
}
