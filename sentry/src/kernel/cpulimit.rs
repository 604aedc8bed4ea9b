//! The sandbox's CPU limit held by the Sentry itself (`do --cpus`, where no
//! host cgroup holds it): a watcher adds up the CPU time the sandbox's host
//! processes use in each period of `cpu.max` and, once the quota is spent,
//! keeps every guest thread out of guest code until the period ends, as
//! Linux's CFS bandwidth control throttles a cgroup.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use super::Kernel;
use crate::sync::Locked;

/// The watcher's shortest look and its wait while there is no limit.
const MIN_LOOK: Duration = Duration::from_millis(1);
const IDLE_LOOK: Duration = Duration::from_millis(50);

/// The gate guest threads pass before they run guest code.
#[derive(Debug, Default)]
pub struct Throttle {
    held: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
    /// periods run under a quota, those in which it ran out, and the time
    /// threads were held (nanoseconds): `cpu.stat`'s `nr_periods`,
    /// `nr_throttled` and `throttled_usec`
    periods: AtomicU64,
    throttled: AtomicU64,
    held_ns: AtomicU64,
}

impl Throttle {
    /// Waits while the sandbox's quota for this period is spent.
    #[inline]
    pub fn pass(&self) {
        if self.held.load(Ordering::Relaxed) {
            self.wait();
        }
    }

    #[cold]
    fn wait(&self) {
        let mut g = self.lock.locked();
        while self.held.load(Ordering::Acquire) {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn hold(&self) {
        let _g = self.lock.locked();
        self.held.store(true, Ordering::Release);
    }

    fn release(&self) {
        let _g = self.lock.locked();
        self.held.store(false, Ordering::Release);
        self.cv.notify_all();
    }

    /// Periods run under a quota, periods throttled and the time held so
    /// far.
    pub fn stats(&self) -> (u64, u64, Duration) {
        (
            self.periods.load(Ordering::Relaxed),
            self.throttled.load(Ordering::Relaxed),
            Duration::from_nanos(self.held_ns.load(Ordering::Relaxed)),
        )
    }
}

/// Starts the watcher of `kernel`'s CPU limit (`cpu.max`, which `update`
/// may change); it ends with the sandbox.
pub(crate) fn watch(kernel: &Arc<Kernel>) -> std::io::Result<()> {
    let weak = Arc::downgrade(kernel);
    // (asked now: the host's answer reads files the Sentry's filter will
    // not open)
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    std::thread::Builder::new()
        .name("cpu-limit".into())
        .spawn(move || run(&weak, cpus))
        .map(drop)
}

fn run(weak: &Weak<Kernel>, cpus: u32) {
    let mut meter = Meter::default();
    // CPU time used past the last period's quota, taken from the next one
    // (the watcher sees use only when it looks).
    let mut debt = Duration::ZERO;
    loop {
        let Some(k) = weak.upgrade() else {
            return;
        };
        let max = k.cpu_max();
        let Some(quota) = max.quota else {
            drop(k);
            debt = Duration::ZERO;
            std::thread::sleep(IDLE_LOOK);
            continue;
        };
        let quota = Duration::from_micros(quota);
        let period = Duration::from_micros(max.period.max(1_000));
        let end = Instant::now() + period;
        k.cpu_throttle.periods.fetch_add(1, Ordering::Relaxed);
        meter.take(&k);
        drop(k);
        let mut spent = debt;
        let mut held = false;
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            if spent >= quota {
                // Spent: every guest thread leaves guest code and waits.
                let Some(k) = weak.upgrade() else {
                    return;
                };
                k.cpu_throttle.hold();
                tracing::debug!(?spent, ?quota, "cpu limit: quota spent, guest held");
                held = true;
                k.cpu_throttle.throttled.fetch_add(1, Ordering::Relaxed);
                for p in processes(&k) {
                    let threads = p.state().threads.clone();
                    for t in threads {
                        t.interrupt();
                    }
                }
                drop(k);
                std::thread::sleep(end - now);
                break;
            }
            // Soon enough that every CPU running flat out could not spend
            // much more than the rest of the quota.
            std::thread::sleep(((quota - spent) / cpus).max(MIN_LOOK).min(end - now));
            let Some(k) = weak.upgrade() else {
                return;
            };
            spent += meter.take(&k);
        }
        let Some(k) = weak.upgrade() else {
            return;
        };
        spent += meter.take(&k);
        if held {
            k.cpu_throttle
                .held_ns
                .fetch_add(period.as_nanos() as u64, Ordering::Relaxed);
            k.cpu_throttle.release();
        }
        debt = spent.saturating_sub(quota).min(period);
    }
}

/// Every process (the table's lock is not held while each is looked at).
fn processes(k: &Kernel) -> Vec<Arc<super::task::Process>> {
    k.procs().map.values().cloned().collect()
}

/// CPU time of the sandbox's host processes: the Sentry's own (its
/// threads, and guest code on a platform that runs it in them) and each
/// address space's where the platform runs guest code elsewhere.
#[derive(Default)]
struct Meter {
    sentry: Duration,
    spaces: HashMap<usize, Duration>,
}

impl Meter {
    /// The time used since the last look.
    fn take(&mut self, k: &Kernel) -> Duration {
        let mut used = Duration::ZERO;
        let now = crate::host::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID)
            .map(|t| {
                Duration::new(
                    t.tv_sec.max(0) as u64,
                    t.tv_nsec.clamp(0, 999_999_999) as u32,
                )
            })
            .unwrap_or_default();
        used += now.saturating_sub(self.sentry);
        self.sentry = now;
        if !k.platform.uses_stubs() {
            return used;
        }
        let mut seen = HashMap::with_capacity(self.spaces.len());
        for p in processes(k) {
            let Some(mm) = p.state().info.mm.upgrade() else {
                continue;
            };
            let key = Arc::as_ptr(&mm) as usize;
            if seen.contains_key(&key) {
                continue;
            }
            let cpu = mm.locked().address_space().cpu_time().unwrap_or_default();
            // (a space first seen now has run only since it began)
            used += cpu.saturating_sub(self.spaces.get(&key).copied().unwrap_or_default());
            seen.insert(key, cpu);
        }
        self.spaces = seen;
        used
    }
}
