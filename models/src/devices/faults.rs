//! Faults as a decorator, and the invariant harness every device can be
//! wrapped in.
//!
//! [`Faulty`] sits on the edge between a device and what sits above it: each
//! completion the device hands up is, with the plan's probabilities and from
//! its own stream `component_rng(plan seed, "fault/<device name>")`,
//! dropped, handed up twice, held back `delay_ns` before it is handed up,
//! or failed.
//! A delay is a slower wire, not a broken device: the edge counts the held
//! requests in its in-flight gauge, so every invariant still holds. A drop
//! or a duplicate breaks "each request completes exactly once", and
//! [`Checked`] (or, for a drop on a device nothing calls again, the
//! machine's I/O conservation at the end) reports it.
//!
//! [`Checked`] wraps any device and checks, on every call, that each
//! request it accepted completes exactly once (a tag is accepted only while
//! free, completed only while held), that the device's own in-flight gauge
//! equals the requests it holds (a lost completion shows here at the next
//! call), and that it never holds more requests than its parallelism (the
//! device's [`BlockDevice::parallelism`], and the tags of the port in front
//! of it). A new device gets these checks by being wrapped: the machine
//! never branches on faults or checks.
//!
//! [`NthCompletion`] drops or duplicates a device's n-th completion (the
//! test-only `drop-completion:N` and `duplicate-completion:N`; a duplicate
//! runs under [`Checked`]).
//!
//! They are inserted only when a run asks ([`crate::Fault`]: `sim swarm`
//! and the tests), on every device (md's members are devices like any
//! other); a normal run's devices are not wrapped.
//!
//! A failed completion ([`DevCtx::fail`]) completes the request with an I/O
//! error: it still completes exactly once (the invariants hold), and the
//! machine hands the failure to whoever issued the request: a job's I/O
//! fails (fio ends the job with `err=5`, as its default
//! `continue_on_error=none` does), a layer or md decides for the request
//! the failed one served.

use std::collections::{BTreeSet, VecDeque};
use std::fmt;

use blocksim_sim::{component_rng, ComponentRng, SimTime};
use rand::Rng;

use crate::devices::device::{BlockDevice, DevCtx, DevRequest, ReqTag};

/// Probabilities are parts per million of completions.
pub const PPM: u32 = 1_000_000;

/// The timer token [`Faulty`] keeps for itself ([`crate::machine::run`]'s
/// `DelayCompletions` keeps the one above it).
const FAULT_TOKEN: u32 = u32::MAX - 1;

/// A device name short enough to keep [`FaultPlan`] `Copy`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DevName {
    bytes: [u8; 32],
    len: u8,
}

impl DevName {
    /// `None` if longer than 32 bytes.
    pub fn new(s: &str) -> Option<DevName> {
        let mut bytes = [0u8; 32];
        bytes.get_mut(..s.len())?.copy_from_slice(s.as_bytes());
        Some(DevName {
            bytes,
            len: s.len() as u8,
        })
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }
}

impl fmt::Debug for DevName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// Random completion faults on one device (or all), and the invariant
/// harness on every device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultPlan {
    /// Seed of the fault streams (`fault/<device name>` each).
    pub seed: u64,
    pub drop_ppm: u32,
    pub duplicate_ppm: u32,
    pub delay_ppm: u32,
    pub delay_ns: u64,
    /// Completions turned into I/O errors.
    pub fail_ppm: u32,
    /// The device whose upward edge is faulted; `None`: every device.
    pub device: Option<DevName>,
}

/// The `--inject-fault` forms of a [`FaultPlan`], for error messages.
pub const PLAN_FORMS: &str = "check, drop:P, duplicate:P, delay:P:NS, fail:P, seed:S joined by '+', optionally ending in @DEVICE (P: probability per completion, 0..=1)";

fn ppm(p: &str) -> Option<u32> {
    let p: f64 = p.parse().ok()?;
    (0.0..=1.0)
        .contains(&p)
        .then(|| (p * PPM as f64).round() as u32)
}

impl FaultPlan {
    /// Parses e.g. `check`, `delay:0.1:20000+drop:0.001@ssd0`, `seed:7+duplicate:0.01`.
    pub fn parse(s: &str) -> Option<FaultPlan> {
        let (items, device) = match s.rsplit_once('@') {
            Some((items, dev)) => (items, Some(DevName::new(dev).filter(|_| !dev.is_empty())?)),
            None => (s, None),
        };
        let mut plan = FaultPlan {
            device,
            ..FaultPlan::default()
        };
        for item in items.split('+') {
            let parts: Vec<&str> = item.split(':').collect();
            match parts.as_slice() {
                ["check"] => {}
                ["drop", p] => plan.drop_ppm = ppm(p)?,
                ["duplicate", p] => plan.duplicate_ppm = ppm(p)?,
                ["delay", p, ns] => {
                    plan.delay_ppm = ppm(p)?;
                    plan.delay_ns = ns.parse().ok().filter(|&n| n > 0)?;
                }
                ["fail", p] => plan.fail_ppm = ppm(p)?,
                ["seed", s] => plan.seed = s.parse().ok()?,
                _ => return None,
            }
        }
        let total = plan.drop_ppm as u64
            + plan.duplicate_ppm as u64
            + plan.delay_ppm as u64
            + plan.fail_ppm as u64;
        (total <= PPM as u64).then_some(plan)
    }

    /// Whether any completion of device `name` may be faulted.
    pub fn faults(&self, name: &str) -> bool {
        let any = self.drop_ppm + self.duplicate_ppm + self.delay_ppm + self.fail_ppm > 0;
        any && self.device.is_none_or(|d| d.as_str() == name)
    }

    /// Whether the plan only checks (draws no fault at all).
    pub fn checks_only(&self) -> bool {
        self.drop_ppm == 0 && self.duplicate_ppm == 0 && self.delay_ppm == 0 && self.fail_ppm == 0
    }

    /// Whether only delays and failures are drawn (every invariant must
    /// still hold: a failed request completes once).
    pub fn benign(&self) -> bool {
        self.drop_ppm == 0 && self.duplicate_ppm == 0
    }
}

impl fmt::Display for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = |v: u32| v as f64 / PPM as f64;
        let mut items = vec![format!("seed:{}", self.seed)];
        if self.drop_ppm > 0 {
            items.push(format!("drop:{}", p(self.drop_ppm)));
        }
        if self.duplicate_ppm > 0 {
            items.push(format!("duplicate:{}", p(self.duplicate_ppm)));
        }
        if self.delay_ppm > 0 {
            items.push(format!("delay:{}:{}", p(self.delay_ppm), self.delay_ns));
        }
        if self.fail_ppm > 0 {
            items.push(format!("fail:{}", p(self.fail_ppm)));
        }
        f.write_str(&items.join("+"))?;
        match &self.device {
            Some(d) => write!(f, "@{}", d.as_str()),
            None => Ok(()),
        }
    }
}

/// Wraps device `name` (behind a port of `tags` tags): the faults of the
/// plan if they apply to it, and the harness around that.
pub(crate) fn wrap(
    plan: &FaultPlan,
    (name, tags): (&str, u32),
    dev: Box<dyn BlockDevice>,
) -> Box<dyn BlockDevice> {
    let dev: Box<dyn BlockDevice> = match plan.faults(name) {
        true => Box::new(Faulty::new(plan, name, dev)),
        false => dev,
    };
    Box::new(Checked::new(name, tags, dev))
}

/// A decorator's wrapped device with the buffers its calls reuse. It
/// dereferences to the device, so a decorator forwards what it does not
/// change (`forward_device_state!`) as if it held the device itself.
pub(crate) struct Inner {
    dev: Box<dyn BlockDevice>,
    timers: Vec<(u64, u32)>,
    /// The completions of the last [`Inner::call`], for the decorator to
    /// hand up (or not) and clear.
    pub(crate) done: Vec<ReqTag>,
}

impl Inner {
    pub(crate) fn new(dev: Box<dyn BlockDevice>) -> Inner {
        Inner {
            dev,
            timers: Vec::new(),
            done: Vec::new(),
        }
    }

    /// Calls `f` on the device with a context of its own; returns after
    /// moving its timers to `ctx` (checking they do not use the wrapper's
    /// `reserved` token) and leaving its completions in `done`.
    pub(crate) fn call(
        &mut self,
        ctx: &mut DevCtx<'_>,
        reserved: Option<u32>,
        f: impl FnOnce(&mut dyn BlockDevice, &mut DevCtx<'_>),
    ) {
        {
            let mut inner_ctx = DevCtx::new(ctx.now(), &mut self.timers, &mut self.done);
            f(self.dev.as_mut(), &mut inner_ctx);
        }
        for (delay, token) in self.timers.drain(..) {
            assert_ne!(
                Some(token),
                reserved,
                "the wrapped device uses the wrapper's timer token"
            );
            ctx.set_timer(delay, token);
        }
    }
}

impl std::ops::Deref for Inner {
    type Target = dyn BlockDevice;
    fn deref(&self) -> &Self::Target {
        self.dev.as_ref()
    }
}

impl std::ops::DerefMut for Inner {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.dev.as_mut()
    }
}

/// Completions an edge holds back and hands up when their time comes
/// (FIFO: one delay for all), on the timer token the edge keeps for itself.
pub(crate) struct Held {
    queue: VecDeque<(SimTime, ReqTag)>,
    token: u32,
}

impl Held {
    pub(crate) fn new(token: u32) -> Held {
        Held {
            queue: VecDeque::new(),
            token,
        }
    }

    pub(crate) fn token(&self) -> u32 {
        self.token
    }

    pub(crate) fn len(&self) -> u32 {
        self.queue.len() as u32
    }

    /// Holds `tag` back `delay_ns` from now.
    pub(crate) fn hold(&mut self, ctx: &mut DevCtx<'_>, delay_ns: u64, tag: ReqTag) {
        self.queue.push_back((ctx.now() + delay_ns, tag));
        ctx.set_timer(delay_ns, self.token);
    }

    /// The edge's timer fired: hands up every completion now due.
    pub(crate) fn release_due(&mut self, ctx: &mut DevCtx<'_>) {
        while let Some(&(due, tag)) = self.queue.front() {
            if due > ctx.now() {
                break;
            }
            self.queue.pop_front();
            ctx.complete(tag);
        }
    }
}

/// What one [`Faulty`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    pub dropped: u64,
    pub duplicated: u64,
    pub delayed: u64,
    pub failed: u64,
}

/// A device's upward edge with random completion faults.
pub struct Faulty {
    inner: Inner,
    plan: FaultPlan,
    rng: ComponentRng,
    /// Delayed completions (on the timer token the edge keeps).
    held: Held,
    /// Time integral of `held.len()` since the last reset, up to `last`.
    held_integral_ns: u64,
    last: SimTime,
    pub counts: FaultCounts,
}

impl Faulty {
    pub fn new(plan: &FaultPlan, name: &str, inner: Box<dyn BlockDevice>) -> Self {
        Faulty {
            inner: Inner::new(inner),
            plan: *plan,
            rng: component_rng(plan.seed, &format!("fault/{name}")),
            held: Held::new(FAULT_TOKEN),
            held_integral_ns: 0,
            last: SimTime::ZERO,
            counts: FaultCounts::default(),
        }
    }

    fn advance(&mut self, now: SimTime) {
        self.held_integral_ns += now.since(self.last) * u64::from(self.held.len());
        self.last = now;
    }

    fn call(
        &mut self,
        ctx: &mut DevCtx<'_>,
        f: impl FnOnce(&mut dyn BlockDevice, &mut DevCtx<'_>),
    ) {
        self.advance(ctx.now());
        self.inner.call(ctx, Some(self.held.token()), f);
        let p = self.plan;
        for i in 0..self.inner.done.len() {
            let tag = self.inner.done[i];
            let r = self.rng.random_range(0..PPM);
            if r < p.drop_ppm {
                self.counts.dropped += 1;
            } else if r < p.drop_ppm + p.duplicate_ppm {
                self.counts.duplicated += 1;
                ctx.complete(tag);
                ctx.complete(tag);
            } else if r < p.drop_ppm + p.duplicate_ppm + p.delay_ppm {
                self.counts.delayed += 1;
                self.held.hold(ctx, p.delay_ns, tag);
            } else if r < p.drop_ppm + p.duplicate_ppm + p.delay_ppm + p.fail_ppm {
                self.counts.failed += 1;
                ctx.fail(tag);
            } else {
                ctx.complete(tag);
            }
        }
        self.inner.done.clear();
    }
}

impl BlockDevice for Faulty {
    fn submit(&mut self, req: DevRequest, ctx: &mut DevCtx<'_>) {
        self.call(ctx, |d, c| d.submit(req, c));
    }

    fn on_timer(&mut self, token: u32, ctx: &mut DevCtx<'_>) {
        if token != self.held.token() {
            return self.call(ctx, |d, c| d.on_timer(token, c));
        }
        self.advance(ctx.now());
        self.held.release_due(ctx);
    }

    fn in_flight(&self) -> u32 {
        self.inner.in_flight() + self.held.len()
    }

    fn reset_stats(&mut self, now: SimTime) {
        self.inner.reset_stats(now);
        self.advance(now);
        self.held_integral_ns = 0;
    }

    /// The edge's gauge: the device's, plus the completions held back.
    fn in_flight_integral_ns(&self, now: SimTime) -> u64 {
        let held = self.held_integral_ns + now.since(self.last) * u64::from(self.held.len());
        self.inner.in_flight_integral_ns(now) + held
    }

    fn completes_inline(&self) -> bool {
        self.inner.completes_inline()
    }

    crate::forward_device_description!(inner);
}

/// What [`NthCompletion`] does to the n-th completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NthFault {
    /// It is lost.
    Drop,
    /// It is handed up twice.
    Duplicate,
}

/// A device's upward edge that drops or duplicates the device's `nth`
/// completion (counting from 1): the test-only faults of
/// `--inject-fault drop-completion:N` and `duplicate-completion:N`.
pub struct NthCompletion {
    inner: Inner,
    nth: u64,
    fault: NthFault,
    seen: u64,
}

impl NthCompletion {
    pub fn new(inner: Box<dyn BlockDevice>, nth: u64, fault: NthFault) -> Self {
        NthCompletion {
            inner: Inner::new(inner),
            nth,
            fault,
            seen: 0,
        }
    }

    fn call(
        &mut self,
        ctx: &mut DevCtx<'_>,
        f: impl FnOnce(&mut dyn BlockDevice, &mut DevCtx<'_>),
    ) {
        self.inner.call(ctx, None, f);
        for tag in self.inner.done.drain(..) {
            self.seen += 1;
            match (self.seen == self.nth, self.fault) {
                (true, NthFault::Drop) => {}
                (true, NthFault::Duplicate) => {
                    ctx.complete(tag);
                    ctx.complete(tag);
                }
                (false, _) => ctx.complete(tag),
            }
        }
    }
}

impl BlockDevice for NthCompletion {
    fn submit(&mut self, req: DevRequest, ctx: &mut DevCtx<'_>) {
        self.call(ctx, |d, c| d.submit(req, c));
    }

    fn on_timer(&mut self, token: u32, ctx: &mut DevCtx<'_>) {
        self.call(ctx, |d, c| d.on_timer(token, c));
    }

    crate::forward_device_state!(inner);
    crate::forward_device_description!(inner);
}

/// The invariant harness around one device (see the module comment).
pub struct Checked {
    inner: Inner,
    name: String,
    /// At most this many requests held at once.
    bound: u32,
    /// Tags accepted and not completed.
    held: BTreeSet<u32>,
}

impl Checked {
    /// `tags`: the tags of the port in front of the device.
    pub fn new(name: &str, tags: u32, inner: Box<dyn BlockDevice>) -> Self {
        let bound = inner.parallelism().map_or(tags, |p| p.min(tags));
        Checked {
            inner: Inner::new(inner),
            name: name.to_string(),
            bound,
            held: BTreeSet::new(),
        }
    }

    fn call(
        &mut self,
        ctx: &mut DevCtx<'_>,
        f: impl FnOnce(&mut dyn BlockDevice, &mut DevCtx<'_>),
    ) {
        self.inner.call(ctx, None, f);
        for tag in self.inner.done.drain(..) {
            assert!(
                self.held.remove(&tag.tag().0),
                "invariant violated: device {} completed request tag {} which it does not hold \
                 (a completion delivered twice, or of a request never accepted)",
                self.name,
                tag.tag().0
            );
            ctx.complete(tag);
        }
        let gauge = self.inner.in_flight();
        assert_eq!(
            gauge as usize,
            self.held.len(),
            "invariant violated: device {} reports {gauge} requests in flight but holds {} \
             accepted and not completed (a completion was lost, or the gauge is wrong)",
            self.name,
            self.held.len()
        );
    }
}

impl BlockDevice for Checked {
    fn submit(&mut self, req: DevRequest, ctx: &mut DevCtx<'_>) {
        assert!(
            self.held.insert(req.tag.0),
            "invariant violated: device {} was handed tag {} which it still holds",
            self.name,
            req.tag.0
        );
        assert!(
            self.held.len() <= self.bound as usize,
            "invariant violated: device {} holds {} requests, above its parallelism {}",
            self.name,
            self.held.len(),
            self.bound
        );
        self.call(ctx, |d, c| d.submit(req, c));
    }

    fn on_timer(&mut self, token: u32, ctx: &mut DevCtx<'_>) {
        self.call(ctx, |d, c| d.on_timer(token, c));
    }

    crate::forward_device_state!(inner);
    crate::forward_device_description!(inner);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::device::{Dir, DiskStats};

    /// A device completing each request `service_ns` after it arrived,
    /// with a gauge that can be told to lie.
    struct Toy {
        queue: VecDeque<ReqTag>,
        gauge_off: u32,
    }

    impl BlockDevice for Toy {
        fn submit(&mut self, req: DevRequest, ctx: &mut DevCtx<'_>) {
            self.queue.push_back(req.tag);
            ctx.set_timer(100, 0);
        }
        fn on_timer(&mut self, _token: u32, ctx: &mut DevCtx<'_>) {
            let tag = self.queue.pop_front().expect("a request");
            ctx.complete(tag);
        }
        fn in_flight(&self) -> u32 {
            self.queue.len() as u32 + self.gauge_off
        }
        fn parallelism(&self) -> Option<u32> {
            Some(2)
        }
        fn capacity_sectors(&self) -> u64 {
            1 << 20
        }
        fn disk_stats(&self, _now: SimTime) -> DiskStats {
            DiskStats::default()
        }
        fn reset_stats(&mut self, _now: SimTime) {}
    }

    fn toy() -> Box<dyn BlockDevice> {
        Box::new(Toy {
            queue: VecDeque::new(),
            gauge_off: 0,
        })
    }

    fn req(tag: u32) -> DevRequest {
        DevRequest {
            tag: ReqTag(tag),
            dir: Dir::Read,
            sector: 0,
            sectors: 8,
        }
    }

    /// Drives `dev` like the machine: submits `tags`, fires every timer in
    /// time order; returns the completions in order.
    fn drive(dev: &mut dyn BlockDevice, tags: &[u32]) -> Vec<u32> {
        let (mut timers, mut done) = (Vec::new(), Vec::new());
        let mut pending: Vec<(u64, u32)> = Vec::new();
        for &t in tags {
            dev.submit(
                req(t),
                &mut DevCtx::new(SimTime::ZERO, &mut timers, &mut done),
            );
            pending.append(&mut timers);
        }
        while !pending.is_empty() {
            pending.sort();
            let (at, token) = pending.remove(0);
            let mut ctx = DevCtx::new(SimTime(at), &mut timers, &mut done);
            dev.on_timer(token, &mut ctx);
            pending.extend(timers.drain(..).map(|(d, tok)| (at + d, tok)));
        }
        done.iter().map(|t| t.0).collect()
    }

    fn caught(f: impl FnOnce()) -> String {
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("a violation");
        e.downcast_ref::<String>().cloned().unwrap_or_default()
    }

    #[test]
    fn a_correct_device_passes_and_delays_keep_its_completions() {
        let mut plain = Checked::new("toy", 32, toy());
        assert_eq!(drive(&mut plain, &[1, 2]), vec![1, 2]);
        let plan = FaultPlan::parse("delay:0.5:1000").unwrap();
        let mut delayed = Checked::new("toy", 32, Box::new(Faulty::new(&plan, "toy", toy())));
        let mut got = drive(&mut delayed, &[1, 2]);
        got.sort();
        assert_eq!(got, vec![1, 2], "each completes exactly once");
    }

    #[test]
    fn the_harness_catches_each_fault_kind() {
        let plan = FaultPlan::parse("duplicate:1").unwrap();
        let mut d = Checked::new("toy", 32, Box::new(Faulty::new(&plan, "toy", toy())));
        let msg = caught(|| {
            drive(&mut d, &[1]);
        });
        assert!(
            msg.contains("completed request tag 1 which it does not hold"),
            "{msg}"
        );

        let plan = FaultPlan::parse("drop:1").unwrap();
        let mut d = Checked::new("toy", 32, Box::new(Faulty::new(&plan, "toy", toy())));
        let msg = caught(|| {
            drive(&mut d, &[1]);
        });
        assert!(
            msg.contains("reports 0 requests in flight but holds 1"),
            "{msg}"
        );
    }

    #[test]
    fn the_harness_catches_a_broken_device() {
        let msg = caught(|| {
            drive(&mut Checked::new("toy", 32, toy()), &[1, 2, 3]);
        });
        assert!(
            msg.contains("holds 3 requests, above its parallelism 2"),
            "{msg}"
        );
        let msg = caught(|| {
            drive(&mut Checked::new("toy", 1, toy()), &[1, 2]);
        });
        assert!(msg.contains("above its parallelism 1"), "{msg}");
        let msg = caught(|| {
            drive(&mut Checked::new("toy", 32, toy()), &[1, 1]);
        });
        assert!(msg.contains("handed tag 1 which it still holds"), "{msg}");
        let liar = Box::new(Toy {
            queue: VecDeque::new(),
            gauge_off: 1,
        });
        let msg = caught(|| {
            drive(&mut Checked::new("toy", 32, liar), &[1]);
        });
        assert!(
            msg.contains("reports 2 requests in flight but holds 1"),
            "{msg}"
        );
    }

    #[test]
    fn a_delayed_edge_keeps_its_gauge_honest() {
        let plan = FaultPlan::parse("delay:1:1000").unwrap();
        let mut d = Faulty::new(&plan, "toy", toy());
        assert_eq!(drive(&mut d, &[1]), vec![1]);
        // 100 ns in the device, 1000 ns held on the edge.
        assert_eq!(d.in_flight_integral_ns(SimTime(5000)), 1000);
        assert_eq!(d.counts.delayed, 1);
    }

    #[test]
    fn plans_parse_and_print() {
        let p = FaultPlan::parse("delay:0.25:2000+drop:0.001@ssd0").unwrap();
        assert_eq!(p.delay_ppm, 250_000);
        assert_eq!(p.delay_ns, 2000);
        assert_eq!(p.drop_ppm, 1000);
        assert_eq!(p.device.unwrap().as_str(), "ssd0");
        assert_eq!(p.to_string(), "seed:0+drop:0.001+delay:0.25:2000@ssd0");
        assert_eq!(FaultPlan::parse(&p.to_string()), Some(p));
        assert_eq!(FaultPlan::parse("check"), Some(FaultPlan::default()));
        assert!(FaultPlan::parse("check").unwrap().benign());
        for bad in [
            "drop:2",
            "delay:0.1",
            "delay:0.1:0",
            "drop:0.6+duplicate:0.6",
            "x",
            "check@",
        ] {
            assert_eq!(FaultPlan::parse(bad), None, "{bad}");
        }
        assert!(p.faults("ssd0") && !p.faults("hd0"));
    }
}
