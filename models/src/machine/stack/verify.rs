//! fio's verify I/O pattern (`verify=TYPE` with `do_verify`,
//! `verify_backlog`, `verify_backlog_batch`): the blocks a job writes are
//! read back, in the order written, after the write phase (`do_verify`)
//! or a batch every `verify_backlog` writes. Data contents are not
//! modelled: the reads are issued and timed, nothing is compared.

use std::collections::VecDeque;

use crate::devices::device::Dir;
use crate::workload::job::VerifyOptions;

use super::JobThread;

/// One job clone's verify bookkeeping.
#[derive(Debug, Clone)]
pub(super) struct VerifyState {
    /// Blocks written and not yet read back: (offset from the region's
    /// start, bytes), in write order (fio's io_hist list: its random map
    /// writes no block twice, so it needs no sorting).
    written: VecDeque<(u64, u64)>,
    backlog: u64,
    batch: u64,
    /// Writes since the last backlog batch.
    since_batch: u64,
    /// Read-backs left in the current backlog batch.
    batch_left: u64,
    do_verify: bool,
    /// The final read-back phase has started.
    final_phase: bool,
    /// Whether writes are remembered: not for a time-based job without a
    /// backlog (its runtime ends it before any read-back, as fio's).
    record: bool,
}

impl VerifyState {
    pub(super) fn new(v: &VerifyOptions, time_based: bool) -> VerifyState {
        VerifyState {
            written: VecDeque::new(),
            backlog: v.backlog,
            batch: v.batch(),
            since_batch: 0,
            batch_left: 0,
            do_verify: v.do_verify,
            final_phase: false,
            record: v.backlog > 0 || (v.do_verify && !time_based),
        }
    }

    /// A read-back is due now (a backlog batch, or the final phase).
    pub(super) fn read_due(&self) -> bool {
        (self.batch_left > 0 || self.final_phase) && !self.written.is_empty()
    }

    /// The final phase can start (the writes are done and reaped).
    pub(super) fn final_due(&self) -> bool {
        self.do_verify && !self.final_phase && !self.written.is_empty()
    }

    pub(super) fn final_started(&self) -> bool {
        self.final_phase
    }

    pub(super) fn start_final(&mut self) {
        self.final_phase = true;
    }

    /// The next read-back, if one is due: (offset, bytes).
    fn next_read(&mut self) -> Option<(u64, u64)> {
        if !self.read_due() {
            self.batch_left = 0;
            return None;
        }
        self.batch_left = self.batch_left.saturating_sub(1);
        self.written.pop_front()
    }

    /// A write was issued at `offset`.
    fn wrote(&mut self, offset: u64, bytes: u64) {
        if !self.record {
            return;
        }
        self.written.push_back((offset, bytes));
        self.since_batch += 1;
        if self.backlog > 0 && self.since_batch >= self.backlog {
            self.since_batch = 0;
            self.batch_left = self.batch;
        }
    }
}

/// The next I/O of a verify job (offset from the region's start, bytes,
/// direction): a due read-back, else the job's own draw. Read-backs do
/// not count against the job's size or number of I/Os.
pub(super) fn verify_next(th: &mut JobThread, read_pct: u32, trims: bool) -> (u64, u64, Dir) {
    let v = th.verify.as_mut().expect("a verify job");
    if let Some((offset, bytes)) = v.next_read() {
        return (offset, bytes, Dir::Read);
    }
    let (offset, bytes) = th.offsets.next(&mut th.rng);
    th.issued += 1;
    let dir = if trims {
        Dir::Discard
    } else if read_pct >= 100
        || (read_pct > 0 && rand::Rng::random_range(&mut th.rng, 0..100) < read_pct)
    {
        Dir::Read
    } else {
        th.writes_issued += 1;
        if let Some(v) = th.verify.as_mut() {
            v.wrote(offset, bytes);
        }
        Dir::Write
    };
    (offset, bytes, dir)
}
