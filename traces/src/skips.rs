//! Lenient-mode bookkeeping: record-level errors are either returned
//! (strict) or counted and skipped (`--lenient`), never silently dropped.

use crate::TraceError;

/// Counts skipped records and keeps the first reason.
#[derive(Debug, Default)]
pub(crate) struct Skips {
    pub(crate) lenient: bool,
    pub(crate) count: u64,
    pub(crate) first: Option<String>,
}

impl Skips {
    pub(crate) fn new(lenient: bool) -> Skips {
        Skips {
            lenient,
            count: 0,
            first: None,
        }
    }

    /// Strict: hands the error back. Lenient: counts it and returns `None`.
    /// File-level errors are always handed back.
    pub(crate) fn handle(&mut self, err: TraceError) -> Option<TraceError> {
        if self.lenient && err.is_record_level() {
            self.count += 1;
            if self.first.is_none() {
                self.first = Some(err.to_string());
            }
            None
        } else {
            Some(err)
        }
    }

    /// Counts a record skipped for a reason that is not an error (e.g. a
    /// blktrace per-CPU file holding another CPU's record, as blkparse does).
    pub(crate) fn note(&mut self, reason: impl FnOnce() -> String) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(reason());
        }
    }
}
