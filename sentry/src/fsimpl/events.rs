//! Descriptors that carry events rather than data: `eventfd`, `timerfd`,
//! `signalfd` and `epoll`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use abi::Errno;

use crate::kernel::timers::TimerService;
use crate::kernel::wait::WaitQueue;
use crate::mm::GuestSlice;
use crate::sync::Locked;
use crate::vfs::file::{
    copy_from_slices, copy_to_slices, Blocker, Caller, FileDescription, FileImpl,
};

pub use abi::poll;

/// An `eventfd` counter.
#[derive(Debug)]
pub struct EventFd {
    counter: Mutex<u64>,
    /// `EFD_SEMAPHORE`
    pub semaphore: bool,
    generation: AtomicU64,
    /// readers and writers waiting for the counter to change
    pub waiters: WaitQueue,
}

impl EventFd {
    /// A counter starting at `init`.
    pub fn new(init: u64, semaphore: bool) -> Arc<Self> {
        Arc::new(EventFd {
            counter: Mutex::new(init),
            semaphore,
            generation: AtomicU64::new(0),
            waiters: WaitQueue::new(),
        })
    }

    /// Takes the value (or one, as a semaphore); `None` when zero.
    pub fn try_read(&self) -> Option<u64> {
        let mut c = self.counter.locked();
        if *c == 0 {
            return None;
        }
        let v = if self.semaphore { 1 } else { *c };
        *c -= v;
        self.generation.fetch_add(1, Ordering::Relaxed);
        drop(c);
        // A writer waiting for room.
        self.waiters.notify();
        Some(v)
    }

    /// Adds `v`; `None` when it would overflow (the writer waits).
    pub fn try_write(&self, v: u64) -> Option<()> {
        let mut c = self.counter.locked();
        if u64::MAX - 1 - *c < v {
            return None;
        }
        *c += v;
        self.generation.fetch_add(1, Ordering::Relaxed);
        drop(c);
        self.waiters.notify();
        Some(())
    }

    /// `(readable, writable)`.
    pub fn state(&self) -> (bool, bool) {
        let c = *self.counter.locked();
        (c > 0, c < u64::MAX - 1)
    }

    /// Changes each time the counter does (edge-triggered epoll).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// The counter's value (`/proc/[pid]/fdinfo`).
    pub fn count(&self) -> u64 {
        *self.counter.locked()
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
    /// readers waiting for an expiration
    pub waiters: WaitQueue,
    /// the clock it was created on
    pub clock: i32,
    service: Arc<TimerService>,
}

impl TimerFd {
    /// A disarmed timerfd.
    pub fn new(service: Arc<TimerService>, clock: i32) -> Option<Self> {
        let count = Arc::new(AtomicU64::new(0));
        let waiters = WaitQueue::new();
        let id = service.create(crate::kernel::timers::Target::Counter(
            count.clone(),
            waiters.clone(),
        ))?;
        Some(TimerFd {
            id,
            count,
            waiters,
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

impl Interest {
    fn new(file: &Arc<FileDescription>, events: u32, data: u64, disabled: bool) -> Interest {
        Interest {
            file: Arc::downgrade(file),
            events: events & !EPOLLWAKEUP,
            data,
            last: None,
            disabled,
        }
    }
}

/// An `epoll` instance.
#[derive(Debug, Default)]
pub struct Epoll {
    interests: Mutex<BTreeMap<i32, Interest>>,
    /// `epoll_wait`s in progress: an interest added or changed may be
    /// ready at once (`ep_insert` and `ep_modify` wake them)
    pub waiters: WaitQueue,
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
    /// The file of interest `fd`, the `off`-th one of that number
    /// (`kcmp(KCMP_EPOLL_TFD)`): there is at most one per number here.
    pub fn target(&self, fd: i32, off: u64) -> Option<Arc<FileDescription>> {
        if off != 0 {
            return None;
        }
        self.interests.locked().get(&fd)?.file.upgrade()
    }

    /// Every interest whose file is still open: number, file, events,
    /// data, and whether a one-shot has fired (a checkpoint's view).
    pub fn interests(&self) -> Vec<(i32, Arc<FileDescription>, u32, u64, bool)> {
        let map = self.interests.locked();
        map.iter()
            .filter_map(|(fd, i)| Some((*fd, i.file.upgrade()?, i.events, i.data, i.disabled)))
            .collect()
    }

    /// Puts back an interest [`Epoll::interests`] gave (edge-triggered
    /// ones report their next edge anew).
    pub fn restore_interest(
        &self,
        fd: i32,
        file: &Arc<FileDescription>,
        events: u32,
        data: u64,
        disabled: bool,
    ) {
        self.interests
            .locked()
            .insert(fd, Interest::new(file, events, data, disabled));
    }

    /// `epoll_ctl`.
    pub fn ctl(
        &self,
        op: u64,
        fd: i32,
        file: &Arc<FileDescription>,
        events: u32,
        data: u64,
    ) -> Result<(), Errno> {
        if let (EPOLL_CTL_ADD, Some(inner)) = (op, file.downcast::<Epoll>()) {
            // No cycles, and no deeper nesting than Linux allows (checked
            // before taking this instance's lock).
            if inner.reaches(self, 0) {
                return Err(Errno::ELOOP);
            }
        }
        let mut map = self.interests.locked();
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
                map.insert(fd, Interest::new(file, events, data, false));
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
        drop(map);
        self.waiters.notify();
        Ok(())
    }

    /// Collects up to `max` ready events as `(events, data)`, updating
    /// edge-triggered and one-shot state as reported.
    pub fn collect(&self, caller: &dyn Caller, max: usize, depth: u32) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        let mut map = self.interests.locked();
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
            let ready = file.poll_ready(caller, want, depth + 1) & want;
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
        let nested: Vec<Arc<FileDescription>> = self
            .interests
            .locked()
            .values()
            .filter_map(|i| i.file.upgrade())
            .filter(|f| f.downcast::<Epoll>().is_some())
            .collect();
        nested.iter().any(|f| {
            f.downcast::<Epoll>()
                .is_some_and(|e| e.reaches(target, depth + 1))
        })
    }

    /// The queues an `epoll_wait` on this instance sleeps on: its own and
    /// those of every file it watches (nested instances' too, `depth`
    /// levels down at most, as for readiness). `true` when some of them
    /// must be polled instead ([`FileDescription::wait_queues`]).
    pub fn wait_queues(&self, out: &mut Vec<WaitQueue>, depth: u32) -> bool {
        out.push(self.waiters.clone());
        let files: Vec<Arc<FileDescription>> = self
            .interests
            .locked()
            .values()
            .filter(|i| !i.disabled)
            .filter_map(|i| i.file.upgrade())
            .collect();
        let mut polled = false;
        for f in files {
            polled |= f.wait_queues(out, depth + 1);
        }
        polled
    }

    /// Whether any interest is ready, without changing state.
    pub fn any_ready(&self, caller: &dyn Caller, depth: u32) -> bool {
        let map = self.interests.locked();
        map.values().any(|i| {
            !i.disabled
                && i.file.upgrade().is_some_and(|f| {
                    let want = (i.events & 0xffff) as i16 | poll::POLLERR | poll::POLLHUP;
                    f.poll_ready(caller, want, depth + 1) & want != 0
                })
        })
    }
}

fn total_len(bufs: &[GuestSlice]) -> usize {
    bufs.iter().map(GuestSlice::len).sum()
}

/// `POLLIN | POLLRDNORM` when `ready`.
fn readable_bits(ready: bool) -> i16 {
    if ready {
        poll::POLLIN | poll::POLLRDNORM
    } else {
        0
    }
}

impl FileImpl for EventFd {
    fn read(
        &self,
        file: &FileDescription,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
    ) -> Result<u64, Errno> {
        if at.is_some() {
            return Err(Errno::ESPIPE);
        }
        if total_len(bufs) < 8 {
            return Err(Errno::EINVAL);
        }
        blk.block_on(
            std::slice::from_ref(&self.waiters),
            file.nonblocking(),
            || Ok(self.try_read()),
            || self.state().0,
        )
        .map(|v| copy_to_slices(bufs, &v.to_ne_bytes()))
    }

    fn write(
        &self,
        file: &FileDescription,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        _at: Option<u64>,
    ) -> Result<u64, Errno> {
        let mut raw = [0u8; 8];
        if copy_from_slices(bufs, &mut raw) < 8 {
            return Err(Errno::EINVAL);
        }
        let v = u64::from_ne_bytes(raw);
        if v == u64::MAX {
            return Err(Errno::EINVAL);
        }
        blk.block_on(
            std::slice::from_ref(&self.waiters),
            file.nonblocking(),
            || Ok(self.try_write(v)),
            || self.state().1,
        )?;
        Ok(8)
    }

    fn poll(&self, _caller: &dyn Caller, _events: i16, _depth: u32) -> i16 {
        let (r, w) = self.state();
        readable_bits(r)
            | if w {
                poll::POLLOUT | poll::POLLWRNORM
            } else {
                0
            }
    }

    fn generation(&self) -> u64 {
        EventFd::generation(self)
    }

    fn wait_queues(&self, out: &mut Vec<WaitQueue>, _depth: u32) -> bool {
        out.push(self.waiters.clone());
        false
    }

    fn link_name(&self) -> Option<Vec<u8>> {
        Some(b"anon_inode:[eventfd]".to_vec())
    }

    fn fdinfo(&self) -> String {
        format!("eventfd-count: {:16x}\n", self.count())
    }
}

impl FileImpl for TimerFd {
    fn read(
        &self,
        file: &FileDescription,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        _at: Option<u64>,
    ) -> Result<u64, Errno> {
        if total_len(bufs) < 8 {
            return Err(Errno::EINVAL);
        }
        let count = &self.count;
        blk.block_on(
            std::slice::from_ref(&self.waiters),
            file.nonblocking(),
            || {
                let n = count.swap(0, Ordering::Relaxed);
                Ok((n > 0).then_some(n))
            },
            || count.load(Ordering::Relaxed) > 0,
        )
        .map(|v| copy_to_slices(bufs, &v.to_ne_bytes()))
    }

    fn poll(&self, _caller: &dyn Caller, _events: i16, _depth: u32) -> i16 {
        readable_bits(self.count.load(Ordering::Relaxed) > 0)
    }

    fn generation(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn wait_queues(&self, out: &mut Vec<WaitQueue>, _depth: u32) -> bool {
        out.push(self.waiters.clone());
        false
    }

    fn link_name(&self) -> Option<Vec<u8>> {
        Some(b"anon_inode:[timerfd]".to_vec())
    }
}

impl FileImpl for SignalFd {
    fn read(
        &self,
        file: &FileDescription,
        blk: Blocker<'_>,
        bufs: &[GuestSlice],
        _at: Option<u64>,
    ) -> Result<u64, Errno> {
        const SIZE: usize = 128;
        let len = total_len(bufs);
        if len < SIZE {
            return Err(Errno::EINVAL);
        }
        let mask = *self.mask.locked();
        let max = len / SIZE;
        let caller = blk.caller;
        // No queue: a signal sent to the caller wakes it itself.
        blk.block_on(
            &[],
            file.nonblocking(),
            || {
                let out: Vec<u8> = caller
                    .dequeue_signals(mask, max)
                    .iter()
                    .flat_map(signalfd_siginfo)
                    .collect();
                Ok((!out.is_empty()).then_some(out))
            },
            || caller.signals_pending() & mask != 0,
        )
        .map(|v| copy_to_slices(bufs, &v))
    }

    fn poll(&self, caller: &dyn Caller, _events: i16, _depth: u32) -> i16 {
        let mask = *self.mask.locked();
        readable_bits(caller.signals_pending() & mask != 0)
    }

    fn link_name(&self) -> Option<Vec<u8>> {
        Some(b"anon_inode:[signalfd]".to_vec())
    }
}

impl FileImpl for Epoll {
    fn poll(&self, caller: &dyn Caller, _events: i16, depth: u32) -> i16 {
        readable_bits(depth < 5 && self.any_ready(caller, depth))
    }

    fn wait_queues(&self, out: &mut Vec<WaitQueue>, depth: u32) -> bool {
        depth < 5 && Epoll::wait_queues(self, out, depth)
    }

    fn link_name(&self) -> Option<Vec<u8>> {
        Some(b"anon_inode:[eventpoll]".to_vec())
    }
}

/// `struct signalfd_siginfo` (128 bytes) for one dequeued signal.
fn signalfd_siginfo(info: &abi::SigInfo) -> [u8; 128] {
    let mut b = [0u8; 128];
    let w32 =
        |b: &mut [u8; 128], off: usize, v: u32| b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    w32(&mut b, 0, info.signo as u32);
    w32(&mut b, 4, info.errno as u32);
    w32(&mut b, 8, info.code as u32);
    if info.code == crate::kernel::task::si::TIMER {
        w32(&mut b, 24, info.fields[0] as u32); // ssi_tid (timer id)
        w32(&mut b, 32, (info.fields[0] >> 32) as u32); // ssi_overrun
    } else {
        w32(&mut b, 12, info.fields[0] as u32); // ssi_pid
        w32(&mut b, 16, (info.fields[0] >> 32) as u32); // ssi_uid
    }
    if info.code < 0 {
        // Queued and timer signals carry the sender's `sigval`.
        w32(&mut b, 44, info.fields[1] as u32); // ssi_int
        b[48..56].copy_from_slice(&info.fields[1].to_ne_bytes()); // ssi_ptr
    }
    if info.signo == abi::signal::SIGCHLD {
        w32(&mut b, 40, info.fields[1] as u32); // ssi_status
    }
    if matches!(
        info.signo,
        abi::signal::SIGSEGV | abi::signal::SIGBUS | abi::signal::SIGILL | abi::signal::SIGFPE
    ) {
        b[72..80].copy_from_slice(&info.fields[0].to_ne_bytes()); // ssi_addr
    }
    b
}
