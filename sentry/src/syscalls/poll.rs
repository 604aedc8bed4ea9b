//! `poll`, `ppoll`, `select` and `pselect6` over the Sentry's descriptors.

use std::time::{Duration, Instant};

use abi::{Errno, Timespec, Timeval};

use super::args::{Args, SyscallArgs};
use crate::kernel::task::Task;
use crate::kernel::wait::{Registration, WaitQueue};
use crate::vfs::file::FileDescription;

use crate::fsimpl::events::poll::*;

fn readiness(task: &Task, file: &FileDescription, events: i16) -> i16 {
    file.poll_ready(&*task.thread, events, 0)
}

/// Waits until `check` reports something (`Ok(n)`, `n > 0`), `deadline`
/// passes (`Ok(0)`) or a signal comes (`Err(signal)`), sleeping on the
/// wait queues of what is watched: `queues` adds them, and says whether
/// some of it cannot notify (the caller's own stdio), which is then
/// re-checked every few milliseconds. The queues are asked for anew after
/// each wake-up, since an epoll set may change during the wait.
pub(super) fn wait_ready(
    task: &Task,
    deadline: Option<Instant>,
    signal: Errno,
    mut queues: impl FnMut(&mut Vec<WaitQueue>) -> bool,
    mut check: impl FnMut() -> Result<u64, Errno>,
) -> Result<u64, Errno> {
    // Ready already, or a poll that never waits: no queue is touched.
    let n = check()?;
    if n > 0 || deadline.is_some_and(|d| Instant::now() >= d) {
        return Ok(n);
    }
    let waiter = &task.thread.waiter;
    let mut qs = Vec::new();
    loop {
        qs.clear();
        let polls_host = queues(&mut qs);
        let _registered = Registration::new(waiter, &qs);
        waiter.prepare();
        let n = check()?;
        if n > 0 {
            return Ok(n);
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(0);
        }
        if task.thread.interrupted() {
            return Err(signal);
        }
        let slice = polls_host.then(|| now + Duration::from_millis(20));
        let until = match (deadline, slice) {
            (Some(d), Some(s)) => Some(d.min(s)),
            (d, s) => d.or(s),
        };
        waiter.sleep(until);
    }
}

fn deadline_ms(ms: i32) -> Option<Instant> {
    (ms >= 0).then(|| Instant::now() + Duration::from_millis(ms as u64))
}

/// The deadline of a relative timeout (`EINVAL` for a bad one).
pub(super) fn deadline_of(ts: &Timespec) -> Result<Instant, Errno> {
    deadline_ts(ts)
}

fn deadline_ts(ts: &Timespec) -> Result<Instant, Errno> {
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(Errno::EINVAL);
    }
    Ok(Instant::now() + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

fn do_poll(task: &mut Task, addr: u64, nfds: u64, deadline: Option<Instant>) -> Result<u64, Errno> {
    if nfds > task.nofile().max(1024) {
        return Err(Errno::EINVAL);
    }
    let mut raw = vec![0u8; nfds as usize * 8];
    task.mm().copy_in(addr, &mut raw)?;
    let entries: Vec<(i32, i16)> = raw
        .chunks(8)
        .map(|c| {
            (
                i32::from_ne_bytes([c[0], c[1], c[2], c[3]]),
                i16::from_ne_bytes([c[4], c[5]]),
            )
        })
        .collect();
    let files: Vec<Option<std::sync::Arc<FileDescription>>> = entries
        .iter()
        .map(|&(fd, _)| {
            if fd < 0 {
                None
            } else {
                task.fds().file(fd.into()).ok()
            }
        })
        .collect();
    let mut revents = vec![0i16; entries.len()];
    let queues = |qs: &mut Vec<WaitQueue>| {
        let mut polled = false;
        for f in files.iter().flatten() {
            polled |= f.wait_queues(qs, 0);
        }
        polled
    };
    let n = wait_ready(task, deadline, Errno::ERESTARTNOHAND, queues, || {
        let mut n = 0;
        for (i, &(fd, events)) in entries.iter().enumerate() {
            revents[i] = if fd < 0 {
                0
            } else {
                match &files[i] {
                    Some(f) => readiness(task, f, events),
                    None => POLLNVAL,
                }
            };
            if revents[i] != 0 {
                n += 1;
            }
        }
        Ok(n)
    })?;
    for (i, r) in revents.iter().enumerate() {
        raw[i * 8 + 6..i * 8 + 8].copy_from_slice(&r.to_ne_bytes());
    }
    task.mm().copy_out(addr, &raw)?;
    Ok(n)
}

pub fn sys_poll(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    do_poll(task, a.ptr(0), a.u64(1), deadline_ms(a.i32(2)))
}

/// Swaps in a temporary signal mask for `ppoll`/`pselect6`; the old one
/// comes back when the call returns, or after the handler that interrupted
/// it.
/// Runs `f` with the signal mask at `mask_addr` (none: as it is), as
/// `ppoll` and `io_pgetevents` do.
pub(super) fn with_mask_pub(
    task: &mut Task,
    mask_addr: u64,
    size: u64,
    f: impl FnOnce(&mut Task) -> Result<u64, Errno>,
) -> Result<u64, Errno> {
    with_mask(task, mask_addr, size, f)
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
    if r.as_ref().is_err_and(|e| e.is_restart()) {
        task.saved_mask = Some(old);
        return r;
    }
    task.set_sigmask(old);
    r
}

pub fn sys_ppoll(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (addr, nfds, tsp, sigmask, sigsetsize) = (a.ptr(0), a.u64(1), a.ptr(2), a.ptr(3), a.u64(4));
    let deadline = if tsp != 0 {
        Some(deadline_ts(&task.mm().read_obj(tsp)?)?)
    } else {
        None
    };
    with_mask(task, sigmask, sigsetsize, |t| {
        do_poll(t, addr, nfds, deadline)
    })
}

fn do_select(
    task: &mut Task,
    nfds: u64,
    sets: [u64; 3],
    deadline: Option<Instant>,
) -> Result<u64, Errno> {
    let nfds = nfds as i32;
    if nfds < 0 || nfds as u64 > task.nofile().max(1024) {
        return Err(Errno::EINVAL);
    }
    let words = (nfds as usize).div_ceil(64);
    let mut bits = [vec![0u64; words], vec![0u64; words], vec![0u64; words]];
    for (k, &addr) in sets.iter().enumerate() {
        if addr != 0 {
            for (w, word) in bits[k].iter_mut().enumerate() {
                *word = task.mm().read_obj(addr + 8 * w as u64)?;
            }
        }
    }
    let mut files = Vec::new();
    for fd in 0..nfds as usize {
        let wanted = (0..3).any(|k| bits[k][fd / 64] & (1 << (fd % 64)) != 0);
        if wanted {
            files.push((fd, task.fds().file(fd as i64).map_err(|_| Errno::EBADF)?));
        }
    }
    let mut out = [vec![0u64; words], vec![0u64; words], vec![0u64; words]];
    let queues = |qs: &mut Vec<WaitQueue>| {
        let mut polled = false;
        for (_, f) in &files {
            polled |= f.wait_queues(qs, 0);
        }
        polled
    };
    let n = wait_ready(task, deadline, Errno::ERESTARTNOHAND, queues, || {
        let mut n = 0;
        out = [vec![0u64; words], vec![0u64; words], vec![0u64; words]];
        for (fd, f) in &files {
            let (w, b) = (fd / 64, 1u64 << (fd % 64));
            let r = readiness(task, f, POLLIN | POLLOUT | POLLPRI);
            let checks = [
                r & (POLLIN | POLLHUP | POLLERR) != 0,
                r & (POLLOUT | POLLERR) != 0,
                r & POLLPRI != 0,
            ];
            for k in 0..3 {
                if bits[k][w] & b != 0 && checks[k] {
                    out[k][w] |= b;
                    n += 1;
                }
            }
        }
        Ok(n)
    })?;
    for (k, &addr) in sets.iter().enumerate() {
        if addr != 0 {
            for (w, word) in out[k].iter().enumerate() {
                task.mm().write_obj(addr + 8 * w as u64, word)?;
            }
        }
    }
    Ok(n)
}

pub fn sys_select(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (nfds, sets, tvp) = (a.u64(0), [a.ptr(1), a.ptr(2), a.ptr(3)], a.ptr(4));
    let deadline = if tvp != 0 {
        let tv: Timeval = task.mm().read_obj(tvp)?;
        if tv.tv_sec < 0 || !(0..1_000_000).contains(&tv.tv_usec) {
            return Err(Errno::EINVAL);
        }
        Some(Instant::now() + Duration::new(tv.tv_sec as u64, tv.tv_usec as u32 * 1000))
    } else {
        None
    };
    let n = do_select(task, nfds, sets, deadline)?;
    if let (Some(d), true) = (deadline, tvp != 0) {
        let left = d.saturating_duration_since(Instant::now());
        task.mm().write_obj(
            tvp,
            &Timeval {
                tv_sec: left.as_secs() as i64,
                tv_usec: i64::from(left.subsec_micros()),
            },
        )?;
    }
    Ok(n)
}

pub fn sys_pselect6(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (nfds, sets, tsp, sig) = (a.u64(0), [a.ptr(1), a.ptr(2), a.ptr(3)], a.ptr(4), a.ptr(5));
    let deadline = if tsp != 0 {
        Some(deadline_ts(&task.mm().read_obj(tsp)?)?)
    } else {
        None
    };
    // The sixth argument points at { const sigset_t *ss; size_t ss_len; }.
    let (mask_addr, size) = if sig != 0 {
        let pair: [u64; 2] = task.mm().read_obj(sig)?;
        (pair[0], pair[1])
    } else {
        (0, 8)
    };
    let r = with_mask(task, mask_addr, size, |t| {
        do_select(t, nfds, sets, deadline)
    });
    // Like Linux, the time left goes back to the caller (glibc's `select`
    // is built on this call and relies on it).
    if let Some(d) = deadline {
        let left = d.saturating_duration_since(Instant::now());
        let ts = Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        if r.as_ref().is_err_and(|e| e.is_restart()) {
            // An interrupted call restarts with what is left.
            let _ = task.mm().write_obj(tsp, &ts);
        } else if r.is_ok() {
            task.mm().write_obj(tsp, &ts)?;
        }
    }
    r
}
