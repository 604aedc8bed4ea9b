//! Interval timers: `alarm`/`setitimer`, POSIX `timer_create` timers and
//! `timerfd`s. One service thread per sandbox sleeps until the earliest
//! deadline and fires what is due (a signal to a process, or a counter
//! bump for a timerfd).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::kernel::wait::WaitQueue;
use crate::kernel::Kernel;
use crate::sync::Locked;

/// What a timer does when it expires.
#[derive(Clone, Debug)]
pub enum Target {
    /// send `sig` to process `pid` (with `si_code` `code`, and the POSIX
    /// timer id for `SI_TIMER`)
    Signal {
        /// process
        pid: i32,
        /// signal
        sig: i32,
        /// `si_code` (`SI_KERNEL` for itimers, `SI_TIMER` for POSIX timers)
        code: i32,
        /// POSIX timer id and `sigev_value`, for `SI_TIMER`
        timer: Option<(i32, u64)>,
    },
    /// count expirations (timerfd), waking the counter's readers
    Counter(Arc<AtomicU64>, WaitQueue),
}

#[derive(Debug)]
struct Entry {
    target: Target,
    deadline: Option<Instant>,
    interval: Duration,
    generation: u64,
    overrun: u64,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    entries: HashMap<u64, Entry>,
    heap: BinaryHeap<Reverse<(Instant, u64, u64)>>,
    thread_started: bool,
}

/// The sandbox's timer service.
#[derive(Debug, Default)]
pub struct TimerService {
    inner: Mutex<Inner>,
    cv: Condvar,
}

/// Most timers a sandbox may hold.
const MAX_TIMERS: usize = 65536;

impl TimerService {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.locked()
    }

    /// Creates a disarmed timer; `None` when the sandbox has too many.
    pub fn create(&self, target: Target) -> Option<u64> {
        let mut i = self.lock();
        if i.entries.len() >= MAX_TIMERS {
            return None;
        }
        i.next_id += 1;
        let id = i.next_id;
        i.entries.insert(
            id,
            Entry {
                target,
                deadline: None,
                interval: Duration::ZERO,
                generation: 0,
                overrun: 0,
            },
        );
        Some(id)
    }

    /// Deletes a timer.
    pub fn delete(&self, id: u64) {
        self.lock().entries.remove(&id);
    }

    /// `(time left, interval)`; zero time left when disarmed.
    pub fn get(&self, id: u64) -> Option<(Duration, Duration)> {
        let i = self.lock();
        let e = i.entries.get(&id)?;
        let left = e.deadline.map_or(Duration::ZERO, |d| {
            d.saturating_duration_since(Instant::now())
        });
        Some((left, e.interval))
    }

    /// Overruns counted at the last expiry (`timer_getoverrun`).
    pub fn overrun(&self, id: u64) -> Option<u64> {
        self.lock().entries.get(&id).map(|e| e.overrun)
    }

    /// Arms (`value` non-zero) or disarms a timer; returns the old setting.
    pub fn arm(
        self: &Arc<Self>,
        kernel: &Arc<Kernel>,
        id: u64,
        value: Duration,
        interval: Duration,
    ) -> Option<(Duration, Duration)> {
        let old = self.get(id)?;
        let mut i = self.lock();
        let e = i.entries.get_mut(&id)?;
        e.generation += 1;
        e.interval = interval;
        e.overrun = 0;
        e.deadline = (!value.is_zero()).then(|| Instant::now() + value);
        if let Some(d) = e.deadline {
            let g = e.generation;
            i.heap.push(Reverse((d, id, g)));
            if !i.thread_started {
                i.thread_started = true;
                let me = self.clone();
                let k = Arc::downgrade(kernel);
                let spawned = std::thread::Builder::new()
                    .name("timers".into())
                    .spawn(move || me.run(k));
                if spawned.is_err() {
                    i.thread_started = false;
                }
            }
        }
        drop(i);
        self.cv.notify_all();
        Some(old)
    }

    fn run(&self, kernel: Weak<Kernel>) {
        let mut i = self.lock();
        loop {
            let now = Instant::now();
            let mut due = Vec::new();
            while let Some(&Reverse((d, id, g))) = i.heap.peek() {
                if d > now {
                    break;
                }
                i.heap.pop();
                let Some(e) = i.entries.get_mut(&id) else {
                    continue;
                };
                if e.generation != g || e.deadline != Some(d) {
                    continue;
                }
                let mut next = None;
                if e.interval.is_zero() {
                    e.deadline = None;
                    e.overrun = 0;
                } else {
                    // Expirations missed while late count as overruns.
                    let mut n = d + e.interval;
                    let mut missed = 0;
                    while n <= now {
                        n += e.interval;
                        missed += 1;
                    }
                    e.overrun = missed;
                    e.deadline = Some(n);
                    next = Some(n);
                    if let Target::Counter(c, _) = &e.target {
                        c.fetch_add(missed, Ordering::Relaxed);
                    }
                }
                due.push((e.target.clone(), e.overrun));
                if let Some(n) = next {
                    i.heap.push(Reverse((n, id, g)));
                }
            }
            if !due.is_empty() {
                drop(i);
                let Some(k) = kernel.upgrade() else { return };
                for (t, overrun) in due {
                    fire(&k, t, overrun);
                }
                drop(k);
                i = self.lock();
                continue;
            }
            if kernel.strong_count() == 0 {
                return;
            }
            let wait = i
                .heap
                .peek()
                .map_or(Duration::from_secs(1), |Reverse((d, _, _))| {
                    d.saturating_duration_since(now)
                });
            i = self
                .cv
                .wait_timeout(i, wait.min(Duration::from_secs(1)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

fn fire(kernel: &Kernel, target: Target, overrun: u64) {
    match target {
        Target::Counter(c, waiters) => {
            c.fetch_add(1, Ordering::Relaxed);
            waiters.notify();
        }
        Target::Signal {
            pid,
            sig,
            code,
            timer,
        } => {
            if let Some(p) = kernel.process(pid) {
                let mut info = crate::kernel::task::user_info(sig, 0, 0, code);
                if let Some((tid, value)) = timer {
                    // SI_TIMER layout: si_tid (int), si_overrun (int), si_value.
                    let overrun = overrun.min(i32::MAX as u64);
                    info.fields[0] = tid as u32 as u64 | (overrun << 32);
                    info.fields[1] = value;
                }
                p.send_signal(kernel, sig, info);
            }
        }
    }
}
