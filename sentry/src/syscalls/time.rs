//! Clocks and sleeping.

use std::time::{Duration, Instant};

use abi::{Errno, Timespec, Timeval};

use super::args::{Args, SyscallArgs};
use crate::host;
use crate::kernel::task::Task;

/// Host clock for a guest clock id, or `EINVAL`.
fn clock_arg(id: i32) -> Result<i32, Errno> {
    match id {
        0..=9 | 11 => Ok(id),
        // CPU-time clocks of this process or thread (`clock_getcpuclockid`
        // of pid 0 / the caller's own thread).
        -2 | -6 => Ok(libc::CLOCK_PROCESS_CPUTIME_ID),
        _ if id < 0 => Err(Errno::EINVAL),
        _ => Err(Errno::EINVAL),
    }
}

/// The time on `clock` as the guest sees it: from the vDSO's time page when
/// it covers the clock (so a call through the vDSO and one that traps
/// agree and never go backwards relative to each other), else the host's.
fn now(task: &Task, clock: i32) -> Result<Timespec, Errno> {
    if let Some(ts) = task.kernel.timekeeper.now(clock) {
        return Ok(ts);
    }
    Ok(host::clock_gettime(clock)?)
}

/// `CLOCK_REALTIME` as the guest sees it (socket timestamps).
pub(crate) fn realtime(task: &Task) -> Result<Timespec, Errno> {
    now(task, libc::CLOCK_REALTIME)
}

pub fn sys_clock_gettime(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let clock = clock_arg(a.i32(0))?;
    let ts = now(task, clock)?;
    task.mm().write_obj(a.ptr(1), &ts).map(|()| 0)
}

pub fn sys_clock_getres(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (clock, res) = (clock_arg(a.i32(0))?, a.ptr(1));
    let ts = host::clock_getres(clock)?;
    if res != 0 {
        task.mm().write_obj(res, &ts)?;
    }
    Ok(0)
}

pub fn sys_gettimeofday(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (tv, tz) = (a.ptr(0), a.ptr(1));
    if tv != 0 {
        let ts = now(task, libc::CLOCK_REALTIME)?;
        task.mm().write_obj(
            tv,
            &Timeval {
                tv_sec: ts.tv_sec,
                tv_usec: ts.tv_nsec / 1000,
            },
        )?;
    }
    if tz != 0 {
        task.mm().write_obj(tz, &[0i32; 2])?;
    }
    Ok(0)
}

pub fn sys_time(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let tloc = a.ptr(0);
    let ts = now(task, libc::CLOCK_REALTIME)?;
    if tloc != 0 {
        task.mm().write_obj(tloc, &ts.tv_sec)?;
    }
    Ok(ts.tv_sec as u64)
}

fn valid(ts: &Timespec) -> bool {
    ts.tv_sec >= 0 && (0..1_000_000_000).contains(&ts.tv_nsec)
}

/// Sleeps for `ts` (relative) or until `ts` on `clock` (absolute). A
/// signal cuts the sleep short: `Err(time left)` for relative sleeps.
pub fn sleep_for(
    task: &Task,
    ts: &Timespec,
    absolute: bool,
    clock: i32,
) -> Result<Result<(), Duration>, Errno> {
    if !valid(ts) {
        return Err(Errno::EINVAL);
    }
    let want = Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
    let dur = if absolute {
        let now = host::clock_gettime(clock)?;
        let now = Duration::new(
            now.tv_sec.max(0) as u64,
            now.tv_nsec.clamp(0, 999_999_999) as u32,
        );
        want.saturating_sub(now)
    } else {
        want
    };
    let deadline = Instant::now() + dur;
    // Only a signal to the thread ends the sleep early; it wakes the
    // thread's waiter.
    let w = &task.thread.waiter;
    loop {
        w.prepare();
        let now = Instant::now();
        if now >= deadline {
            return Ok(Ok(()));
        }
        if task.thread.interrupted() {
            return Ok(Err(deadline - now));
        }
        w.sleep(Some(deadline));
    }
}

fn write_rem(task: &Task, addr: u64, left: Duration) -> Result<(), Errno> {
    if addr != 0 {
        task.mm().write_obj(
            addr,
            &Timespec {
                tv_sec: left.as_secs() as i64,
                tv_nsec: i64::from(left.subsec_nanos()),
            },
        )?;
    }
    Ok(())
}

pub fn sys_nanosleep(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let ts: Timespec = task.mm().read_obj(a.ptr(0))?;
    match sleep_for(task, &ts, false, libc::CLOCK_MONOTONIC)? {
        Ok(()) => Ok(0),
        Err(left) => {
            write_rem(task, a.ptr(1), left)?;
            Err(Errno::EINTR)
        }
    }
}

pub fn sys_clock_nanosleep(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (clock, flags) = (clock_arg(a.i32(0))?, a.u64(1));
    if clock == libc::CLOCK_THREAD_CPUTIME_ID {
        return Err(Errno::EINVAL);
    }
    if flags & !1 != 0 {
        return Err(Errno::EINVAL);
    }
    let ts: Timespec = task.mm().read_obj(a.ptr(2))?;
    let absolute = flags & 1 != 0;
    match sleep_for(task, &ts, absolute, clock)? {
        Ok(()) => Ok(0),
        Err(left) => {
            if !absolute {
                write_rem(task, a.ptr(3), left)?;
            }
            // An absolute sleep restarts with the same deadline after a
            // handler with SA_RESTART; a relative one reports EINTR.
            Err(if absolute {
                Errno::ERESTARTNOHAND
            } else {
                Errno::EINTR
            })
        }
    }
}
