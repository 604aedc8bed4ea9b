//! Descriptors that carry events rather than data: `eventfd`, `timerfd`,
//! `signalfd` and `epoll`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use abi::Errno;

use crate::kernel::task::Thread;
use crate::kernel::timers::TimerService;
use crate::vfs::file::FileDescription;

/// `poll` event bits.
pub mod poll {
    #![allow(missing_docs)]
    pub const POLLIN: i16 = 0x1;
    pub const POLLPRI: i16 = 0x2;
    pub const POLLOUT: i16 = 0x4;
    pub const POLLERR: i16 = 0x8;
    pub const POLLHUP: i16 = 0x10;
    pub const POLLNVAL: i16 = 0x20;
    pub const POLLRDNORM: i16 = 0x40;
    pub const POLLWRNORM: i16 = 0x100;
    pub const POLLRDHUP: i16 = 0x2000;
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// An `eventfd` counter.
#[derive(Debug)]
pub struct EventFd {
    counter: Mutex<u64>,
    /// `EFD_SEMAPHORE`
    pub semaphore: bool,
    generation: AtomicU64,
}

impl EventFd {
    /// A counter starting at `init`.
    pub fn new(init: u64, semaphore: bool) -> Arc<Self> {
        Arc::new(EventFd {
            counter: Mutex::new(init),
            semaphore,
            generation: AtomicU64::new(0),
        })
    }

    /// Takes the value (or one, as a semaphore); `None` when zero.
    pub fn try_read(&self) -> Option<u64> {
        let mut c = lock(&self.counter);
        if *c == 0 {
            return None;
        }
        let v = if self.semaphore { 1 } else { *c };
        *c -= v;
        self.generation.fetch_add(1, Ordering::Relaxed);
        Some(v)
    }

    /// Adds `v`; `None` when it would overflow (the writer waits).
    pub fn try_write(&self, v: u64) -> Option<()> {
        let mut c = lock(&self.counter);
        if u64::MAX - 1 - *c < v {
            return None;
        }
        *c += v;
        self.generation.fetch_add(1, Ordering::Relaxed);
        Some(())
    }

    /// `(readable, writable)`.
    pub fn state(&self) -> (bool, bool) {
        let c = *lock(&self.counter);
        (c > 0, c < u64::MAX - 1)
    }

    /// Changes each time the counter does (edge-triggered epoll).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// The counter's value (`/proc/[pid]/fdinfo`).
    pub fn count(&self) -> u64 {
        *lock(&self.counter)
    }
}

/// A `timerfd`: a timer of the sandbox's timer service counting
/// expirations.
#[derive(Debug)]
pub struct TimerFd {
    /// the timer
    pub id: u64,
    /// expirations not yet read
    pub count: Arc<AtomicU64>,
    /// the clock it was created on
    pub clock: i32,
    service: Arc<TimerService>,
}

impl TimerFd {
    /// A disarmed timerfd.
    pub fn new(service: Arc<TimerService>, clock: i32) -> Option<Self> {
        let count = Arc::new(AtomicU64::new(0));
        let id = service.create(crate::kernel::timers::Target::Counter(count.clone()))?;
        Some(TimerFd {
            id,
            count,
            clock,
            service,
        })
    }

    /// The service it lives in.
    pub fn service(&self) -> &Arc<TimerService> {
        &self.service
    }
}

impl Drop for TimerFd {
    fn drop(&mut self) {
        self.service.delete(self.id);
    }
}

/// A `signalfd`: reads the caller's pending signals in `mask`.
#[derive(Debug)]
pub struct SignalFd {
    /// signals it accepts
    pub mask: Mutex<u64>,
}

/// One `epoll` interest.
#[derive(Debug)]
struct Interest {
    file: Weak<FileDescription>,
    events: u32,
    data: u64,
    /// edge-triggered bookkeeping: what was last reported
    last: Option<(i16, u64)>,
    /// `EPOLLONESHOT` fired; waits for `EPOLL_CTL_MOD`
    disabled: bool,
}

/// An `epoll` instance.
#[derive(Debug, Default)]
pub struct Epoll {
    interests: Mutex<BTreeMap<i32, Interest>>,
}

/// `epoll_ctl` operations.
pub const EPOLL_CTL_ADD: u64 = 1;
/// remove
pub const EPOLL_CTL_DEL: u64 = 2;
/// modify
pub const EPOLL_CTL_MOD: u64 = 3;
const EPOLLET: u32 = 1 << 31;
const EPOLLONESHOT: u32 = 1 << 30;
const EPOLLEXCLUSIVE: u32 = 1 << 28;
const EPOLLWAKEUP: u32 = 1 << 29;
/// Most interests in one instance (`max_user_watches`-like).
const MAX_INTERESTS: usize = 1 << 16;

impl Epoll {
    /// `epoll_ctl`.
    pub fn ctl(
        &self,
        op: u64,
        fd: i32,
        file: &Arc<FileDescription>,
        events: u32,
        data: u64,
    ) -> Result<(), Errno> {
        if let (EPOLL_CTL_ADD, crate::vfs::file::FileKind::Epoll(inner)) = (op, &file.kind) {
            // No cycles, and no deeper nesting than Linux allows (checked
            // before taking this instance's lock).
            if inner.reaches(self, 0) {
                return Err(Errno::ELOOP);
            }
        }
        let mut map = lock(&self.interests);
        // Drop interests whose files are gone.
        map.retain(|_, i| i.file.strong_count() > 0);
        let known = map
            .get(&fd)
            .is_some_and(|i| i.file.upgrade().is_some_and(|f| Arc::ptr_eq(&f, file)));
        match op {
            EPOLL_CTL_ADD => {
                if known {
                    return Err(Errno::EEXIST);
                }
                if map.len() >= MAX_INTERESTS {
                    return Err(Errno::ENOSPC);
                }
                map.insert(
                    fd,
                    Interest {
                        file: Arc::downgrade(file),
                        events: events & !EPOLLWAKEUP,
                        data,
                        last: None,
                        disabled: false,
                    },
                );
            }
            EPOLL_CTL_DEL => {
                if !known {
                    return Err(Errno::ENOENT);
                }
                map.remove(&fd);
            }
            EPOLL_CTL_MOD => {
                let i = map.get_mut(&fd).filter(|_| known).ok_or(Errno::ENOENT)?;
                if events & EPOLLEXCLUSIVE != 0 || i.events & EPOLLEXCLUSIVE != 0 {
                    return Err(Errno::EINVAL);
                }
                i.events = events & !EPOLLWAKEUP;
                i.data = data;
                i.last = None;
                i.disabled = false;
            }
            _ => return Err(Errno::EINVAL),
        }
        Ok(())
    }

    /// Collects up to `max` ready events as `(events, data)`, updating
    /// edge-triggered and one-shot state as reported.
    pub fn collect(&self, thread: &Thread, max: usize, depth: u32) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        let mut map = lock(&self.interests);
        for i in map.values_mut() {
            if out.len() >= max {
                break;
            }
            if i.disabled {
                continue;
            }
            let Some(file) = i.file.upgrade() else {
                continue;
            };
            let want = (i.events & 0xffff) as i16 | poll::POLLERR | poll::POLLHUP;
            let ready = file.poll_ready(thread, want, depth + 1) & want;
            if ready == 0 {
                i.last = None;
                continue;
            }
            if i.events & EPOLLET != 0 {
                let now = (ready, file.event_generation());
                if i.last == Some(now) {
                    continue;
                }
                i.last = Some(now);
            }
            if i.events & EPOLLONESHOT != 0 {
                i.disabled = true;
            }
            out.push((ready as u16 as u32, i.data));
        }
        out
    }

    /// Whether `target` is this instance or is watched by it, directly or
    /// through nested instances; chains deeper than Linux's limit count as
    /// loops too.
    fn reaches(&self, target: &Epoll, depth: u32) -> bool {
        const MAX_NESTS: u32 = 4;
        if std::ptr::eq(self, target) || depth > MAX_NESTS {
            return true;
        }
        let nested: Vec<Arc<FileDescription>> = lock(&self.interests)
            .values()
            .filter_map(|i| i.file.upgrade())
            .filter(|f| matches!(f.kind, crate::vfs::file::FileKind::Epoll(_)))
            .collect();
        nested.iter().any(|f| match &f.kind {
            crate::vfs::file::FileKind::Epoll(e) => e.reaches(target, depth + 1),
            _ => false,
        })
    }

    /// Whether any interest is ready, without changing state.
    pub fn any_ready(&self, thread: &Thread, depth: u32) -> bool {
        let map = lock(&self.interests);
        map.values().any(|i| {
            !i.disabled
                && i.file.upgrade().is_some_and(|f| {
                    let want = (i.events & 0xffff) as i16 | poll::POLLERR | poll::POLLHUP;
                    f.poll_ready(thread, want, depth + 1) & want != 0
                })
        })
    }
}
