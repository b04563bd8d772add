//! Writeback (`drivers/md/bcache/writeback.c`): dirty-data accounting and
//! the PD controller that sets the background writeback rate.
//!
//! `__update_writeback_rate`, every `writeback_rate_update_seconds` (5 s):
//! target = cache sectors x `writeback_percent` / 100 (one backing device);
//! error = dirty - target; proportional = error / `p_term_inverse` (40);
//! the integral accumulates error x update interval while it helps (error
//! negative with a positive integral, or positive while writeback keeps up)
//! and contributes integral / `i_term_inverse` (10000); the rate (sectors
//! per second) is their sum clamped to [`rate_minimum` (8), 1e9].

use std::collections::BTreeMap;

/// Dirty extents of the backing device: start -> end (sectors), disjoint.
#[derive(Debug, Default, Clone)]
pub struct DirtyMap {
    map: BTreeMap<u64, u64>,
    sectors: u64,
}

impl DirtyMap {
    pub fn sectors(&self) -> u64 {
        self.sectors
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Removes `[start, end)` (overwritten or written back); returns the
    /// sectors that were dirty.
    pub fn remove(&mut self, start: u64, end: u64) -> u64 {
        let mut removed = 0;
        // The extent that begins before `start` and may overlap it.
        if let Some((&s, &e)) = self.map.range(..start).next_back() {
            if e > start {
                self.map.insert(s, start);
                if e > end {
                    self.map.insert(end, e);
                    removed += end - start;
                } else {
                    removed += e - start;
                }
            }
        }
        let inside: Vec<(u64, u64)> = self.map.range(start..end).map(|(&s, &e)| (s, e)).collect();
        for (s, e) in inside {
            self.map.remove(&s);
            if e > end {
                self.map.insert(end, e);
                removed += end - s;
            } else {
                removed += e - s;
            }
        }
        self.sectors -= removed;
        removed
    }

    /// Marks `[start, end)` dirty.
    pub fn add(&mut self, start: u64, end: u64) {
        self.remove(start, end);
        self.map.insert(start, end);
        self.sectors += end - start;
    }

    /// The first dirty extent at or after `cursor` (wrapping), at most
    /// `max_sectors` long.
    pub fn next_from(&self, cursor: u64, max_sectors: u64) -> Option<(u64, u64)> {
        let (&s, &e) = self
            .map
            .range(cursor..)
            .next()
            .or_else(|| self.map.iter().next())?;
        Some((s, e.min(s + max_sectors)))
    }

    /// True if `[start, end)` is entirely dirty.
    pub fn covers(&self, start: u64, end: u64) -> bool {
        self.map
            .range(..=start)
            .next_back()
            .is_some_and(|(&s, &e)| s <= start && e >= end)
    }
}

/// Controller settings (sysfs names).
#[derive(Debug, Clone, Copy)]
pub struct PdOptions {
    pub writeback_percent: u64,
    pub p_term_inverse: i64,
    pub i_term_inverse: i64,
    pub update_seconds: i64,
    pub rate_minimum: i64,
}

/// The writeback rate controller of one cached device.
#[derive(Debug, Clone)]
pub struct PdController {
    pub o: PdOptions,
    /// Sectors per second.
    pub rate: i64,
    pub integral: i64,
    pub proportional: i64,
    pub target: i64,
}

impl PdController {
    pub fn new(o: PdOptions) -> Self {
        // cached_dev_init: writeback_rate starts at 1024 sectors/s.
        PdController {
            o,
            rate: 1024,
            integral: 0,
            proportional: 0,
            target: 0,
        }
    }

    /// `__update_writeback_rate`. `keeping_up`: writeback issued everything
    /// the last rate allowed (bcache: `time_before64(local_clock(),
    /// writeback_rate.next + NSEC_PER_MSEC)`).
    pub fn update(&mut self, cache_sectors: u64, dirty_sectors: u64, keeping_up: bool) {
        let target = (cache_sectors * self.o.writeback_percent / 100) as i64;
        let error = dirty_sectors as i64 - target;
        let proportional = error / self.o.p_term_inverse;
        if (error < 0 && self.integral > 0) || (error > 0 && keeping_up) {
            self.integral += error * self.o.update_seconds;
        }
        let integral_scaled = self.integral / self.o.i_term_inverse;
        self.rate = (proportional + integral_scaled).clamp(self.o.rate_minimum, 1_000_000_000);
        self.proportional = proportional;
        self.target = target;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirty_map_trims_and_counts() {
        let mut d = DirtyMap::default();
        d.add(0, 100);
        d.add(200, 300);
        assert_eq!(d.sectors(), 200);
        assert_eq!(d.remove(50, 250), 100);
        assert_eq!(d.sectors(), 100);
        assert!(d.covers(0, 50) && d.covers(250, 300) && !d.covers(40, 60));
        d.add(40, 260);
        assert_eq!(d.sectors(), 300);
        assert_eq!(d.next_from(250, 1000), Some((260, 300)));
        assert_eq!(d.next_from(301, 16), Some((0, 16)), "wraps");
    }

    #[test]
    fn pd_rate_rises_with_dirty_data_above_target() {
        let o = PdOptions {
            writeback_percent: 10,
            p_term_inverse: 40,
            i_term_inverse: 10000,
            update_seconds: 5,
            rate_minimum: 8,
        };
        let mut pd = PdController::new(o);
        // 1 GiB cache: target 209715 sectors; nothing dirty: minimum rate.
        pd.update(2 << 20, 0, true);
        assert_eq!(pd.rate, 8);
        // 400k sectors dirty: p = (400000 - 209715) / 40 = 4757.
        pd.update(2 << 20, 400_000, true);
        assert_eq!(pd.proportional, 4757);
        assert_eq!(pd.rate, 4757 + 190_285 * 5 / 10000);
        let r1 = pd.rate;
        pd.update(2 << 20, 400_000, true);
        assert!(
            pd.rate > r1,
            "the integral term grows while the error persists"
        );
    }
}
