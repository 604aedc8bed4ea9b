//! Seccomp-trap mode: how a runner and its Sentry thread hand the CPU to
//! each other, chosen per runner from what each epoch of events measures.
//!
//! * **Yield**: both on the Sentry thread's CPU; the waiter calls
//!   `sched_yield`, which runs the peer at once. A few µs per round trip,
//!   and it takes no core from other work.
//! * **Spin**: the runner on another CPU; both poll the slot's state word
//!   for a few µs, then poll with `sched_yield` (which runs anything else
//!   runnable there first), then sleep. Well under a µs when that CPU is
//!   idle; a loss when it is not.
//!
//! A runner starts in Yield, tries Spin for one epoch when a spin *token*
//! is free (one per two allowed CPUs, so spinners never outnumber cores)
//! and no other guest thread's Sentry thread was busy on the CPU it would
//! move to, keeps it while it stays faster than the Yield epoch before it,
//! the Sentry rarely had to sleep and that CPU stays free of other guest
//! threads, and otherwise goes back, trying again after twice as many
//! epochs (up to [`MAX_BACKOFF`]). While Spin wins it still spends one
//! epoch in Yield now and then (ever more rarely) to compare afresh, as
//! the machine's load changes what each costs. Waits count in the means
//! up to [`CAP`], so a peer's preemption stalls show.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Events per measuring epoch.
pub(crate) const EPOCH: u32 = 512;
/// Waits longer than this are the guest computing or blocking (or a
/// preempted thread); an epoch with more of them than short ones does not
/// try Spin.
const SHORT: Duration = Duration::from_micros(100);
/// Waits count in an epoch's mean up to this: more than a scheduler's time
/// slice, so that a preempted thread's stall shows in full, but not so
/// much that one long computation swamps a whole trial.
const CAP: Duration = Duration::from_millis(50);
/// How long the Sentry polls in Spin before it yields.
pub(crate) const SPIN_WINDOW: Duration = Duration::from_micros(5);
/// `pause` iterations the stub polls in Spin before it yields: about 25 µs
/// on an AMD EPYC (25 ns a `pause`), longer than a gofer round trip (about
/// 15 µs), so a call that waits on the gofer does not send the stub to its
/// yields and sleep; with 200, `find` over a tree fell back to Yield often
/// and took 18% longer.
pub(crate) const STUB_SPIN: u32 = 1000;
/// `sched_yield` calls either side makes in Spin before it sleeps.
pub(crate) const SPIN_YIELDS: u32 = 32;
/// Events other runners' Sentry threads may handle on a CPU in one epoch
/// of ours for it to count as free to spin on.
const BUSY_EVENTS: u64 = (EPOCH / 16) as u64;
/// Most Yield epochs between two Spin trials.
const MAX_BACKOFF: u32 = 64;
/// Most Spin epochs between two Yield probes.
const MAX_SPIN_BACKOFF: u32 = 256;
/// Spin stays only while its mean wait is below this share of Yield's.
const KEEP_RATIO: f64 = 0.8;

/// The two ways to hand off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Way {
    Yield,
    Spin,
}

/// Counters of all runners, for `ferrovisor do --stats` and the debug log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandoffStats {
    /// Events handed over in Yield.
    pub yield_events: u64,
    /// Events handed over in Spin.
    pub spin_events: u64,
    /// Events for which the Sentry thread had to sleep (a futex wake-up).
    pub sentry_sleeps: u64,
    /// Switches from Yield to Spin (trials included).
    pub to_spin: u64,
    /// Switches back from Spin to Yield.
    pub to_yield: u64,
}

static YIELD_EVENTS: AtomicU64 = AtomicU64::new(0);
static SPIN_EVENTS: AtomicU64 = AtomicU64::new(0);
static SENTRY_SLEEPS: AtomicU64 = AtomicU64::new(0);
static TO_SPIN: AtomicU64 = AtomicU64::new(0);
static TO_YIELD: AtomicU64 = AtomicU64::new(0);
/// Spin tokens taken.
static SPINNERS: AtomicUsize = AtomicUsize::new(0);

/// Events handled by Sentry threads on each CPU (by CPU number; one cache
/// line each, as each is written by that CPU's threads at every event).
static ACTIVITY: std::sync::OnceLock<Box<[Line]>> = std::sync::OnceLock::new();

#[repr(align(64))]
#[derive(Debug, Default)]
struct Line(AtomicU64);

/// The host's `/proc/stat`, opened when the platform is made (before the
/// Sentry's own filter, after which it opens nothing).
static CPU_STAT: std::sync::OnceLock<Option<std::fs::File>> = std::sync::OnceLock::new();

/// Opens `/proc/stat` for the idle checks, if it can be.
pub(crate) fn open_cpu_stat() {
    CPU_STAT.get_or_init(|| std::fs::File::open("/proc/stat").ok());
}

/// Idle and total time of one CPU (clock ticks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CpuTimes {
    idle: u64,
    total: u64,
}

/// `cpu`'s times and the host's runnable threads, from `/proc/stat`.
fn parse_stat(text: &str, cpu: usize) -> Option<(CpuTimes, u64)> {
    let name = format!("cpu{cpu}");
    let mut times = None;
    let mut running = None;
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace();
        match words.next() {
            Some(w) if w == name => {
                let v: Vec<u64> = words.filter_map(|w| w.parse().ok()).collect();
                // user nice system idle iowait irq softirq steal ...
                let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
                times = Some(CpuTimes {
                    idle,
                    total: v.iter().take(8).sum(),
                });
            }
            Some("procs_running") => running = words.next()?.parse().ok(),
            _ => {}
        }
    }
    Some((times?, running?))
}

fn sample(cpu: usize) -> Option<(CpuTimes, u64)> {
    use std::os::unix::fs::FileExt;
    let f = CPU_STAT.get()?.as_ref()?;
    let mut buf = vec![0u8; 64 << 10];
    let n = f.read_at(&mut buf, 0).ok()?;
    parse_stat(std::str::from_utf8(&buf[..n]).ok()?, cpu)
}

/// What the host says about a CPU to spin on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Idle {
    /// First look taken; ask again after an epoch.
    Looking,
    Yes,
    No,
}

fn activity(cpu: usize) -> Option<&'static AtomicU64> {
    let lines = ACTIVITY.get_or_init(|| {
        let n = crate::address_space::ALLOWED_CPUS
            .get()
            .and_then(|a| a.iter().max())
            .map_or(0, |m| m + 1)
            .max(64);
        (0..n).map(|_| Line::default()).collect()
    });
    lines.get(cpu).map(|l| &l.0)
}

/// The counters so far (all platforms of the process).
pub fn handoff_stats() -> HandoffStats {
    HandoffStats {
        yield_events: YIELD_EVENTS.load(Ordering::Relaxed),
        spin_events: SPIN_EVENTS.load(Ordering::Relaxed),
        sentry_sleeps: SENTRY_SLEEPS.load(Ordering::Relaxed),
        to_spin: TO_SPIN.load(Ordering::Relaxed),
        to_yield: TO_YIELD.load(Ordering::Relaxed),
    }
}

/// A spin token, given back when dropped.
#[derive(Debug)]
struct Token;

impl Token {
    fn take(limit: usize) -> Option<Token> {
        SPINNERS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| Token)
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        SPINNERS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What one epoch measured.
#[derive(Clone, Copy, Debug, Default)]
struct Epoch {
    events: u32,
    short: u32,
    capped_ns: u64,
    sleeps: u32,
}

impl Epoch {
    fn mean_ns(&self) -> Option<f64> {
        // Mostly long waits: the guest computes or blocks, and how it is
        // woken hardly matters.
        (self.short * 2 >= self.events && self.short > 0
            || self.capped_ns > 0 && self.events < EPOCH)
            .then(|| self.capped_ns as f64 / f64::from(self.events))
    }
}

/// A switch the runner is to make now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Switch {
    pub(crate) to: Way,
    pub(crate) reason: &'static str,
}

/// The choice of one runner.
#[derive(Debug)]
pub(crate) struct Chooser {
    way: Way,
    epoch: Epoch,
    /// Mean wait of the last Yield and the last Spin epoch.
    yield_ns: Option<f64>,
    spin_ns: Option<f64>,
    /// In Yield for one epoch from Spin, to compare (the token kept).
    probing: bool,
    /// Epochs until the next trial of the other way, and the current gap.
    until_trial: u32,
    backoff: u32,
    /// The gap between Yield probes while Spin wins.
    spin_backoff: u32,
    token: Option<Token>,
    tokens: usize,
    /// The runner's Sentry thread's CPU, and the CPU it spins on (or would).
    home: usize,
    away: Option<usize>,
    /// [`ACTIVITY`] of `away` at the last epoch's end.
    away_seen: u64,
    /// `away`'s times at the first look of an idle check.
    look: Option<CpuTimes>,
    /// Counts not yet added to the process's (once an epoch, so that the
    /// hot path touches no line other CPUs write).
    unsent: HandoffStats,
}

impl Drop for Chooser {
    fn drop(&mut self) {
        self.send_counts();
    }
}

impl Chooser {
    /// A chooser for a runner whose Sentry thread is on CPU `home`, with
    /// `away` to spin on, on a machine with `cpus` allowed CPUs.
    pub(crate) fn new(cpus: usize, home: usize, away: Option<usize>) -> Self {
        Chooser {
            way: Way::Yield,
            epoch: Epoch::default(),
            yield_ns: None,
            spin_ns: None,
            probing: false,
            until_trial: 1,
            backoff: 1,
            spin_backoff: 2,
            token: None,
            tokens: cpus / 2,
            home,
            away,
            away_seen: away
                .and_then(activity)
                .map_or(0, |a| a.load(Ordering::Relaxed)),
            look: None,
            unsent: HandoffStats::default(),
        }
    }

    /// Adds this runner's counts to the process's.
    fn send_counts(&mut self) {
        let c = std::mem::take(&mut self.unsent);
        for (total, n) in [
            (&YIELD_EVENTS, c.yield_events),
            (&SPIN_EVENTS, c.spin_events),
            (&SENTRY_SLEEPS, c.sentry_sleeps),
            (&TO_SPIN, c.to_spin),
            (&TO_YIELD, c.to_yield),
        ] {
            if n > 0 {
                total.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// Whether the host shows `away` idle and nothing else runnable but
    /// this pair, over the epoch since the first look. Without
    /// `/proc/stat` only the guest's own threads are known ([`ACTIVITY`]).
    fn host_idle(&mut self) -> Idle {
        let Some(away) = self.away else {
            return Idle::No;
        };
        let Some((now, running)) = sample(away) else {
            return Idle::Yes;
        };
        // Runnable now: the thread reading, and perhaps the runner.
        let others = running > 2;
        match self.look.replace(now) {
            None if others => {
                self.look = None;
                Idle::No
            }
            None => Idle::Looking,
            Some(then) => {
                self.look = None;
                let total = now.total.saturating_sub(then.total);
                let idle = now.idle.saturating_sub(then.idle);
                // Under 80% idle (ticks are coarse: no ticks is idle too).
                if others || idle * 5 < total * 4 {
                    Idle::No
                } else {
                    Idle::Yes
                }
            }
        }
    }

    /// The last Yield and Spin epochs' mean round trips (ns), for the log.
    pub(crate) fn means(&self) -> (Option<f64>, Option<f64>) {
        (self.yield_ns, self.spin_ns)
    }

    /// The CPUs of the runner in Yield (its Sentry thread's) and in Spin.
    pub(crate) fn cpus(&self) -> (usize, Option<usize>) {
        (self.home, self.away)
    }

    /// Whether other Sentry threads handled more than a few events on
    /// `away` since the last epoch's end.
    fn away_busy(&mut self) -> bool {
        let Some(a) = self.away.and_then(activity) else {
            return true;
        };
        let now = a.load(Ordering::Relaxed);
        let busy = now.wrapping_sub(self.away_seen) > BUSY_EVENTS;
        self.away_seen = now;
        busy
    }

    #[cfg(test)]
    pub(crate) fn way(&self) -> Way {
        self.way
    }

    /// Records one event: the time from letting the runner go to seeing
    /// the event (both hand-offs, the guest's work, any stall of the
    /// runner) and whether the Sentry slept for it. Returns the switch to
    /// make, at the end of an epoch.
    pub(crate) fn record(&mut self, wait: Duration, slept: bool) -> Option<Switch> {
        if let Some(a) = activity(self.home) {
            a.fetch_add(1, Ordering::Relaxed);
        }
        match self.way {
            Way::Yield => self.unsent.yield_events += 1,
            Way::Spin => self.unsent.spin_events += 1,
        }
        self.unsent.sentry_sleeps += u64::from(slept);
        let e = &mut self.epoch;
        e.events += 1;
        if wait < SHORT {
            e.short += 1;
        }
        e.capped_ns += wait.min(CAP).as_nanos() as u64;
        e.sleeps += u32::from(slept);
        // A Spin epoch that has already taken what a whole Yield epoch
        // took ends now: under load each of its waits can be a time slice.
        // So does a Yield probe that can no longer beat Spin.
        let spent = e.capped_ns as f64;
        let over = match (self.way, self.probing) {
            (Way::Spin, _) => self.yield_ns.is_some_and(|y| spent > y * f64::from(EPOCH)),
            (Way::Yield, true) => self
                .spin_ns
                .is_some_and(|sp| spent > sp * f64::from(EPOCH) / KEEP_RATIO),
            (Way::Yield, false) => false,
        };
        if e.events < EPOCH && !over {
            return None;
        }
        let done = std::mem::take(&mut self.epoch);
        let switch = self.decide(done);
        if let Some(s) = switch {
            self.way = s.to;
            match s.to {
                Way::Spin => self.unsent.to_spin += 1,
                Way::Yield => self.unsent.to_yield += 1,
            }
        }
        self.send_counts();
        switch
    }

    /// Gives the spin token back (the switch to Spin could not be made).
    pub(crate) fn abandon_spin(&mut self) {
        self.token = None;
        self.probing = false;
        self.way = Way::Yield;
        self.fail_trial();
    }

    fn fail_trial(&mut self) {
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        self.until_trial = self.backoff;
    }

    fn decide(&mut self, e: Epoch) -> Option<Switch> {
        if self.probing {
            return self.end_probe(e);
        }
        match self.way {
            Way::Yield => {
                self.yield_ns = e.mean_ns();
                self.yield_ns?;
                let busy = self.away_busy();
                self.until_trial = self.until_trial.saturating_sub(1);
                if self.until_trial > 0 {
                    return None;
                }
                if busy {
                    // Another guest thread works there: ask again later.
                    self.until_trial = self.backoff;
                    self.look = None;
                    return None;
                }
                match self.host_idle() {
                    Idle::Looking => {
                        self.until_trial = 1;
                        return None;
                    }
                    Idle::No => {
                        // Other work of the host's is there.
                        self.until_trial = self.backoff.max(4);
                        return None;
                    }
                    Idle::Yes => {}
                }
                let Some(token) = Token::take(self.tokens) else {
                    // Every core that could spin is taken: ask again later.
                    self.until_trial = self.backoff;
                    return None;
                };
                self.token = Some(token);
                self.spin_backoff = 2;
                self.until_trial = self.spin_backoff;
                Some(Switch {
                    to: Way::Spin,
                    reason: "trial: a core to spin on is free",
                })
            }
            Way::Spin => {
                let mean = e.mean_ns();
                let reason = if self.away_busy() {
                    "another guest thread works on the CPU spun on"
                } else if e.events < EPOCH {
                    "slower than a whole Yield epoch before it ended"
                } else if e.sleeps * 8 > e.events {
                    "the Sentry slept for over 1/8 of the events"
                } else {
                    match (mean, self.yield_ns) {
                        (None, _) => "the guest computes or blocks between calls",
                        (Some(spin), Some(y)) if spin > y * KEEP_RATIO => "no faster than yielding",
                        _ => {
                            self.spin_ns = mean;
                            return self.keep_spinning();
                        }
                    }
                };
                self.token = None;
                self.fail_trial();
                Some(Switch {
                    to: Way::Yield,
                    reason,
                })
            }
        }
    }

    /// Spin holds: now and then one Yield epoch checks that it still
    /// should (what is measured changes with the machine's load).
    fn keep_spinning(&mut self) -> Option<Switch> {
        self.until_trial = self.until_trial.saturating_sub(1);
        if self.until_trial > 0 {
            return None;
        }
        self.probing = true;
        Some(Switch {
            to: Way::Yield,
            reason: "probe: is yielding faster now?",
        })
    }

    /// The end of a Yield epoch taken from Spin (the token still held).
    fn end_probe(&mut self, e: Epoch) -> Option<Switch> {
        self.probing = false;
        self.yield_ns = e.mean_ns();
        let spin_wins = match (self.spin_ns, self.yield_ns) {
            (Some(spin), Some(y)) => spin <= y * KEEP_RATIO,
            _ => false,
        };
        if spin_wins {
            self.spin_backoff = (self.spin_backoff * 2).min(MAX_SPIN_BACKOFF);
            self.until_trial = self.spin_backoff;
            return Some(Switch {
                to: Way::Spin,
                reason: "spinning is still faster",
            });
        }
        self.token = None;
        self.backoff = 1;
        self.fail_trial();
        Some(Switch {
            to: Way::Yield,
            reason: "yielding is faster now",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records one epoch of like events, or fewer if it ends early.
    fn epoch(c: &mut Chooser, wait_ns: u64, slept: bool) -> Option<Switch> {
        (0..EPOCH).find_map(|_| c.record(Duration::from_nanos(wait_ns), slept))
    }

    #[test]
    fn spin_is_tried_then_kept_while_faster() {
        let mut c = Chooser::new(64, 60, Some(61));
        assert_eq!(epoch(&mut c, 2000, false).map(|s| s.to), Some(Way::Spin));
        assert_eq!(epoch(&mut c, 300, false), None);
        assert_eq!(c.way(), Way::Spin);
        // Load arrives: the peer is preempted and the Sentry sleeps.
        let back = epoch(&mut c, 300, true).expect("back to yield");
        assert_eq!(back.to, Way::Yield);
        assert_eq!(c.way(), Way::Yield);
    }

    #[test]
    fn a_slower_trial_backs_off() {
        let mut c = Chooser::new(64, 50, Some(51));
        assert!(epoch(&mut c, 2000, false).is_some());
        let back = epoch(&mut c, 1900, false).expect("no faster");
        assert_eq!(back.reason, "no faster than yielding");
        // Two Yield epochs before the next trial, then four.
        assert_eq!(epoch(&mut c, 2000, false), None);
        assert_eq!(epoch(&mut c, 2000, false).map(|s| s.to), Some(Way::Spin));
        assert!(epoch(&mut c, 1900, false).is_some());
        for _ in 0..3 {
            assert_eq!(epoch(&mut c, 2000, false), None);
        }
        assert!(epoch(&mut c, 2000, false).is_some());
    }

    #[test]
    fn a_cpu_where_another_guest_thread_works_is_not_spun_on() {
        let mut c = Chooser::new(64, 30, Some(31));
        let other = activity(31).expect("cpu 31");
        other.fetch_add(1000, Ordering::Relaxed);
        assert_eq!(epoch(&mut c, 2000, false), None);
        // Quiet there now: the next epoch tries.
        assert_eq!(epoch(&mut c, 2000, false).map(|s| s.to), Some(Way::Spin));
        other.fetch_add(1000, Ordering::Relaxed);
        let back = epoch(&mut c, 300, false).expect("back");
        assert_eq!(back.reason, "another guest thread works on the CPU spun on");
    }

    #[test]
    fn stalls_of_a_preempted_peer_send_spin_back() {
        let mut c = Chooser::new(64, 20, Some(21));
        assert!(epoch(&mut c, 2000, false).is_some());
        // Fast hand-offs, but 10 in 512 stall for a time slice.
        let mut back = None;
        for i in 0..EPOCH {
            let wait = if i % 51 == 0 { 3_000_000 } else { 300 };
            back = back.or(c.record(Duration::from_nanos(wait), false));
        }
        assert_eq!(back.map(|s| s.to), Some(Way::Yield));
    }

    #[test]
    fn spin_checks_now_and_then_that_yielding_is_not_faster() {
        let mut c = Chooser::new(64, 10, Some(11));
        assert!(epoch(&mut c, 2000, false).is_some());
        assert_eq!(epoch(&mut c, 300, false), None);
        // The next Spin epoch probes Yield.
        let probe = epoch(&mut c, 300, false).expect("probe");
        assert_eq!(
            (probe.to, probe.reason),
            (Way::Yield, "probe: is yielding faster now?")
        );
        let again = epoch(&mut c, 2000, false).expect("decision");
        assert_eq!(
            (again.to, again.reason),
            (Way::Spin, "spinning is still faster")
        );
        // Probes get rarer while Spin keeps winning: four epochs now.
        for _ in 0..3 {
            assert_eq!(epoch(&mut c, 300, false), None);
        }
        assert!(epoch(&mut c, 300, false).is_some());
        // Load came: Spin got slower, Yield measured now wins.
        let stay = epoch(&mut c, 250, false).expect("decision");
        assert_eq!(
            (stay.to, stay.reason),
            (Way::Yield, "yielding is faster now")
        );
        assert_eq!(c.way(), Way::Yield);
    }

    #[test]
    fn a_spin_epoch_stalled_by_load_ends_early() {
        let mut c = Chooser::new(64, 8, Some(9));
        assert!(epoch(&mut c, 2000, false).is_some());
        // 2000 ns × 512 is about one millisecond: a stall of a time slice
        // spends it at once.
        assert_eq!(c.record(Duration::from_micros(300), false), None);
        let back = c
            .record(Duration::from_millis(3), false)
            .expect("ends early");
        assert_eq!(
            back.reason,
            "slower than a whole Yield epoch before it ended"
        );
    }

    #[test]
    fn proc_stat_gives_a_cpus_idle_and_total_and_the_runnable_count() {
        let text = "cpu  10 0 10 100 5 0 0 0 0 0\n\
                    cpu0 1 2 3 40 5 6 7 8 9 10\n\
                    cpu1 4 0 4 50 1 0 0 0 0 0\n\
                    intr 1 2 3\n\
                    procs_running 3\n";
        let (t, running) = parse_stat(text, 1).expect("cpu1");
        assert_eq!(
            t,
            CpuTimes {
                idle: 51,
                total: 59
            }
        );
        assert_eq!(running, 3);
        let (t, _) = parse_stat(text, 0).expect("cpu0");
        assert_eq!(
            t,
            CpuTimes {
                idle: 45,
                total: 72
            }
        );
        assert_eq!(parse_stat(text, 2), None);
    }

    #[test]
    fn a_yield_probe_that_cannot_win_ends_early() {
        let mut c = Chooser::new(64, 6, Some(7));
        assert!(epoch(&mut c, 2000, false).is_some());
        assert_eq!(epoch(&mut c, 300, false), None);
        assert!(epoch(&mut c, 300, false).is_some());
        // 300 × 512 / 0.8 = 192 µs: 39 yields of 5 µs spend it.
        let mut n = 0;
        let decision = loop {
            n += 1;
            if let Some(s) = c.record(Duration::from_micros(5), false) {
                break s;
            }
        };
        assert_eq!((decision.to, n), (Way::Spin, 39));
    }

    #[test]
    fn long_waits_never_spin_and_one_cpu_never_spins() {
        let mut c = Chooser::new(64, 40, Some(41));
        for _ in 0..4 {
            assert_eq!(epoch(&mut c, 500_000, true), None);
        }
        let mut one = Chooser::new(1, 0, None);
        for _ in 0..4 {
            assert_eq!(epoch(&mut one, 2000, false), None);
        }
    }
}
