//! Event descriptors (`eventfd`, `timerfd`, `signalfd`, `epoll`) and
//! interval timers (`alarm`, `setitimer`, `timer_create`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abi::{Errno, OpenFlags, Timespec, Timeval};

use crate::fsimpl::events::{Epoll, EventFd, SignalFd, TimerFd};
use crate::kernel::task::{Task, UNBLOCKABLE};
use crate::kernel::timers::Target;
use crate::sync::Locked;
use crate::vfs::file::{FileDescription, FileKind};

fn install(task: &mut Task, kind: FileKind, flags: u32) -> Result<u64, Errno> {
    install_with(task, kind, flags, OpenFlags::RDWR.bits())
}

/// Installs an event descriptor opened with `access` (`O_RDONLY` or
/// `O_RDWR`); `flags` may hold `O_NONBLOCK` and `O_CLOEXEC`.
pub(super) fn install_with(
    task: &mut Task,
    kind: FileKind,
    flags: u32,
    access: u32,
) -> Result<u64, Errno> {
    let status = flags & OpenFlags::NONBLOCK.bits() | access;
    let file = FileDescription::new(kind, None, status);
    task.install_fd(file, flags & OpenFlags::CLOEXEC.bits() != 0)
}

fn check_flags(flags: u32, extra: u32) -> Result<(), Errno> {
    if flags & !(OpenFlags::CLOEXEC.bits() | OpenFlags::NONBLOCK.bits() | extra) != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

pub fn sys_eventfd2(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    const EFD_SEMAPHORE: u32 = 1;
    let flags = a[1] as u32;
    check_flags(flags, EFD_SEMAPHORE)?;
    install(
        task,
        FileKind::Impl(EventFd::new(a[0] as u32 as u64, flags & EFD_SEMAPHORE != 0)),
        flags,
    )
}

pub fn sys_eventfd(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    install(
        task,
        FileKind::Impl(EventFd::new(a[0] as u32 as u64, false)),
        0,
    )
}

fn duration(ts: &Timespec) -> Result<Duration, Errno> {
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(Errno::EINVAL);
    }
    Ok(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as i64,
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}

/// The clocks `timerfd_create` takes (`EINVAL` for others).
pub(crate) fn clock_ok(clock: i32) -> Result<(), Errno> {
    // CLOCK_REALTIME, MONOTONIC, BOOTTIME, REALTIME_ALARM, BOOTTIME_ALARM.
    if matches!(clock, 0 | 1 | 7 | 8 | 9) {
        Ok(())
    } else {
        Err(Errno::EINVAL)
    }
}

/// Relative time until absolute `when` on `clock`.
fn until(clock: i32, when: Duration) -> Result<Duration, Errno> {
    let now = crate::host::clock_gettime(if clock == 8 {
        0
    } else if clock == 9 {
        7
    } else {
        clock
    })?;
    let now = Duration::new(
        now.tv_sec.max(0) as u64,
        now.tv_nsec.clamp(0, 999_999_999) as u32,
    );
    // Already past: fire as soon as possible.
    Ok(when
        .checked_sub(now)
        .filter(|d| !d.is_zero())
        .unwrap_or(Duration::from_nanos(1)))
}

pub fn sys_timerfd_create(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let clock = a[0] as i32;
    let flags = a[1] as u32;
    clock_ok(clock)?;
    check_flags(flags, 0)?;
    let t = TimerFd::new(task.kernel.timers.clone(), clock).ok_or(Errno::ENOMEM)?;
    install(task, FileKind::Impl(Arc::new(t)), flags)
}

fn timerfd(file: &FileDescription) -> Result<&TimerFd, Errno> {
    file.downcast().ok_or(Errno::EINVAL)
}

/// `struct itimerspec`: interval then value.
fn read_itimerspec(task: &Task, addr: u64) -> Result<(Duration, Duration), Errno> {
    let v: [Timespec; 2] = task.mm().read_obj(addr)?;
    Ok((duration(&v[0])?, duration(&v[1])?))
}

fn write_itimerspec(
    task: &Task,
    addr: u64,
    (left, interval): (Duration, Duration),
) -> Result<(), Errno> {
    task.mm()
        .write_obj(addr, &[timespec(interval), timespec(left)])
}

pub fn sys_timerfd_settime(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    const TFD_TIMER_ABSTIME: u64 = 1;
    const TFD_TIMER_CANCEL_ON_SET: u64 = 2;
    let file = task.fds().file(a[0] as i32 as i64)?;
    let t = timerfd(&file)?;
    if a[1] & !(TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET) != 0 {
        return Err(Errno::EINVAL);
    }
    let (interval, mut value) = read_itimerspec(task, a[2])?;
    if a[1] & TFD_TIMER_ABSTIME != 0 && !value.is_zero() {
        value = until(t.clock, value)?;
    }
    t.count.store(0, std::sync::atomic::Ordering::Relaxed);
    let old = t
        .service()
        .arm(&task.kernel, t.id, value, interval)
        .ok_or(Errno::EINVAL)?;
    if a[3] != 0 {
        write_itimerspec(task, a[3], old)?;
    }
    Ok(0)
}

pub fn sys_timerfd_gettime(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let file = task.fds().file(a[0] as i32 as i64)?;
    let t = timerfd(&file)?;
    let cur = t.service().get(t.id).ok_or(Errno::EINVAL)?;
    write_itimerspec(task, a[1], cur).map(|()| 0)
}

fn signalfd(task: &mut Task, fd: i32, mask_addr: u64, size: u64, flags: u32) -> Result<u64, Errno> {
    if size != 8 {
        return Err(Errno::EINVAL);
    }
    check_flags(flags, 0)?;
    let mask = task.mm().read_obj::<u64>(mask_addr)? & !UNBLOCKABLE;
    if fd != -1 {
        let file = task.fds().file(fd.into())?;
        let Some(s) = file.downcast::<SignalFd>() else {
            return Err(Errno::EINVAL);
        };
        *s.mask.locked() = mask;
        return Ok(fd as u64);
    }
    install(
        task,
        FileKind::Impl(Arc::new(SignalFd {
            mask: Mutex::new(mask),
        })),
        flags,
    )
}

pub fn sys_signalfd4(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    signalfd(task, a[0] as i32, a[1], a[2], a[3] as u32)
}

pub fn sys_signalfd(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    signalfd(task, a[0] as i32, a[1], a[2], 0)
}

pub fn sys_epoll_create1(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let flags = a[0] as u32;
    if flags & !OpenFlags::CLOEXEC.bits() != 0 {
        return Err(Errno::EINVAL);
    }
    install(task, FileKind::Impl(Arc::new(Epoll::default())), flags)
}

pub fn sys_epoll_create(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    if (a[0] as i32) <= 0 {
        return Err(Errno::EINVAL);
    }
    install(task, FileKind::Impl(Arc::new(Epoll::default())), 0)
}

pub fn sys_epoll_ctl(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let epfile = task.fds().file(a[0] as i32 as i64)?;
    let target = task.fds().file(a[2] as i32 as i64)?;
    let Some(ep) = epfile.downcast::<Epoll>() else {
        return Err(Errno::EINVAL);
    };
    if Arc::ptr_eq(&epfile, &target) {
        return Err(Errno::EINVAL);
    }
    if !target.pollable() {
        return Err(Errno::EPERM);
    }
    let (events, data) = if a[1] != crate::fsimpl::events::EPOLL_CTL_DEL {
        // struct epoll_event is packed: u32 events, u64 data.
        let raw: [u8; 12] = task.mm().read_obj(a[3])?;
        let events = u32::from_ne_bytes([raw[0], raw[1], raw[2], raw[3]]);
        let mut d = [0u8; 8];
        d.copy_from_slice(&raw[4..]);
        (events, u64::from_ne_bytes(d))
    } else {
        (0, 0)
    };
    ep.ctl(a[1], a[2] as i32, &target, events, data).map(|()| 0)
}

fn epoll_wait(
    task: &mut Task,
    epfd: u64,
    events: u64,
    max: u64,
    deadline: Option<Instant>,
) -> Result<u64, Errno> {
    let max = max as i32;
    if max <= 0 || max > (i32::MAX / 12) {
        return Err(Errno::EINVAL);
    }
    let file = task.fds().file(epfd as i32 as i64)?;
    let Some(ep) = file.downcast::<Epoll>() else {
        return Err(Errno::EINVAL);
    };
    task.mm().slices(events, max as u64 * 12, true)?;
    let mut ready = Vec::new();
    let n = super::poll::wait_ready(
        task,
        deadline,
        Errno::EINTR,
        |qs| ep.wait_queues(qs, 0),
        || {
            ready = ep.collect(&*task.thread, max as usize, 0);
            Ok(ready.len() as u64)
        },
    )?;
    if n > 0 {
        let mut raw = Vec::with_capacity(ready.len() * 12);
        for (ev, data) in &ready {
            raw.extend_from_slice(&ev.to_ne_bytes());
            raw.extend_from_slice(&data.to_ne_bytes());
        }
        task.mm().copy_out(events, &raw)?;
    }
    Ok(n)
}

fn deadline_ms(ms: i32) -> Option<Instant> {
    (ms >= 0).then(|| Instant::now() + Duration::from_millis(ms as u64))
}

pub fn sys_epoll_wait(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    epoll_wait(task, a[0], a[1], a[2], deadline_ms(a[3] as i32))
}

fn with_mask(
    task: &mut Task,
    mask_addr: u64,
    size: u64,
    f: impl FnOnce(&mut Task) -> Result<u64, Errno>,
) -> Result<u64, Errno> {
    if mask_addr == 0 {
        return f(task);
    }
    if size != 8 {
        return Err(Errno::EINVAL);
    }
    let mask: u64 = task.mm().read_obj(mask_addr)?;
    let old = task.set_sigmask(mask);
    let r = f(task);
    if r == Err(Errno::EINTR) {
        // The handler runs with the temporary mask; the old one comes back
        // after it.
        task.saved_mask = Some(old);
    } else {
        task.set_sigmask(old);
    }
    r
}

pub fn sys_epoll_pwait(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let (epfd, ev, max, deadline) = (a[0], a[1], a[2], deadline_ms(a[3] as i32));
    with_mask(task, a[4], a[5], |t| epoll_wait(t, epfd, ev, max, deadline))
}

pub fn sys_epoll_pwait2(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let deadline = if a[3] != 0 {
        Some(Instant::now() + duration(&task.mm().read_obj(a[3])?)?)
    } else {
        None
    };
    let (epfd, ev, max) = (a[0], a[1], a[2]);
    with_mask(task, a[4], a[5], |t| epoll_wait(t, epfd, ev, max, deadline))
}

// Interval timers: ITIMER_REAL (also `alarm`) counts wall time and sends
// SIGALRM. ITIMER_VIRTUAL and ITIMER_PROF are approximated with wall time
// too (SIGVTALRM, SIGPROF): the Sentry does not yet account guest CPU time.

fn itimer(task: &mut Task, which: usize) -> Result<u64, Errno> {
    let sig = [
        abi::signal::SIGALRM,
        abi::signal::SIGVTALRM,
        abi::signal::SIGPROF,
    ][which];
    let mut st = task.proc_.state();
    if let Some(id) = st.itimers[which] {
        return Ok(id);
    }
    let id = task
        .kernel
        .timers
        .create(Target::Signal {
            pid: task.proc_.pid,
            sig,
            code: crate::kernel::task::si::KERNEL,
            timer: None,
        })
        .ok_or(Errno::EAGAIN)?;
    st.itimers[which] = Some(id);
    Ok(id)
}

fn timeval(d: Duration) -> Timeval {
    Timeval {
        tv_sec: d.as_secs() as i64,
        tv_usec: i64::from(d.subsec_micros()),
    }
}

fn tv_duration(tv: &Timeval) -> Result<Duration, Errno> {
    if tv.tv_sec < 0 || !(0..1_000_000).contains(&tv.tv_usec) {
        return Err(Errno::EINVAL);
    }
    Ok(Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000))
}

pub fn sys_setitimer(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let which = a[0] as usize;
    if which > 2 {
        return Err(Errno::EINVAL);
    }
    let (interval, value) = if a[1] != 0 {
        let v: [Timeval; 2] = task.mm().read_obj(a[1])?;
        (tv_duration(&v[0])?, tv_duration(&v[1])?)
    } else {
        (Duration::ZERO, Duration::ZERO)
    };
    let id = itimer(task, which)?;
    let (left, old_int) = task
        .kernel
        .timers
        .arm(&task.kernel, id, value, interval)
        .ok_or(Errno::EINVAL)?;
    if a[2] != 0 {
        task.mm()
            .write_obj(a[2], &[timeval(old_int), timeval(left)])?;
    }
    Ok(0)
}

pub fn sys_getitimer(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let which = a[0] as usize;
    if which > 2 {
        return Err(Errno::EINVAL);
    }
    let id = itimer(task, which)?;
    let (left, int) = task.kernel.timers.get(id).ok_or(Errno::EINVAL)?;
    task.mm()
        .write_obj(a[1], &[timeval(int), timeval(left)])
        .map(|()| 0)
}

pub fn sys_alarm(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let id = itimer(task, 0)?;
    let (left, _) = task
        .kernel
        .timers
        .arm(
            &task.kernel,
            id,
            Duration::from_secs(a[0] as u32 as u64),
            Duration::ZERO,
        )
        .ok_or(Errno::EINVAL)?;
    // alarm(2) rounds the old remainder to the nearest second, at least 1.
    let mut secs = left.as_secs();
    if left.subsec_micros() >= 500_000 {
        secs += 1;
    }
    if secs == 0 && !left.is_zero() {
        secs = 1;
    }
    Ok(secs)
}

pub fn sys_timer_create(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    const SIGEV_SIGNAL: i32 = 0;
    const SIGEV_NONE: i32 = 1;
    const SIGEV_THREAD_ID: i32 = 4;
    const SI_TIMER: i32 = -2;
    let clock = super::time::timer_clock(task, a[0] as i32)?;
    let next_id = {
        let st = task.proc_.state();
        (0..i32::MAX)
            .find(|i| !st.posix_timers.contains_key(i))
            .ok_or(Errno::EAGAIN)?
    };
    // struct sigevent: sigev_value (8), sigev_signo (4), sigev_notify (4).
    let (value, signo, notify) = if a[1] != 0 {
        let raw: [u32; 4] = task.mm().read_obj(a[1])?;
        (
            u64::from(raw[0]) | (u64::from(raw[1]) << 32),
            raw[2] as i32,
            raw[3] as i32,
        )
    } else {
        (next_id as u64, abi::signal::SIGALRM, SIGEV_SIGNAL)
    };
    let target = match notify {
        SIGEV_NONE => Target::Counter(Default::default(), Default::default()),
        SIGEV_SIGNAL | SIGEV_THREAD_ID => {
            if !(1..=64).contains(&signo) {
                return Err(Errno::EINVAL);
            }
            Target::Signal {
                pid: task.proc_.pid,
                sig: signo,
                code: SI_TIMER,
                timer: Some((next_id, value)),
            }
        }
        _ => return Err(Errno::EINVAL),
    };
    let id = task.kernel.timers.create(target).ok_or(Errno::EAGAIN)?;
    if let Err(e) = task.mm().write_obj(a[2], &next_id) {
        task.kernel.timers.delete(id);
        return Err(e);
    }
    task.proc_.state().posix_timers.insert(next_id, (id, clock));
    Ok(0)
}

fn posix_timer(task: &Task, tid: u64) -> Result<(u64, i32), Errno> {
    task.proc_
        .state()
        .posix_timers
        .get(&(tid as i32))
        .copied()
        .ok_or(Errno::EINVAL)
}

pub fn sys_timer_settime(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let (id, clock) = posix_timer(task, a[0])?;
    if a[1] & !1 != 0 {
        return Err(Errno::EINVAL);
    }
    let (interval, mut value) = read_itimerspec(task, a[2])?;
    if a[1] & 1 != 0 && !value.is_zero() {
        value = until(clock, value)?;
    }
    let old = task
        .kernel
        .timers
        .arm(&task.kernel, id, value, interval)
        .ok_or(Errno::EINVAL)?;
    if a[3] != 0 {
        write_itimerspec(task, a[3], old)?;
    }
    Ok(0)
}

pub fn sys_timer_gettime(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let (id, _) = posix_timer(task, a[0])?;
    let cur = task.kernel.timers.get(id).ok_or(Errno::EINVAL)?;
    write_itimerspec(task, a[1], cur).map(|()| 0)
}

pub fn sys_timer_getoverrun(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let (id, _) = posix_timer(task, a[0])?;
    task.kernel
        .timers
        .overrun(id)
        .map(|n| n.min(i32::MAX as u64))
        .ok_or(Errno::EINVAL)
}

pub fn sys_timer_delete(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let (id, _) = posix_timer(task, a[0])?;
    task.proc_.state().posix_timers.remove(&(a[0] as i32));
    task.kernel.timers.delete(id);
    Ok(0)
}
