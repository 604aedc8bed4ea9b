//! Clocks and sleeping.

use std::time::{Duration, Instant};

use std::sync::Arc;

use abi::{Errno, Timespec, Timeval};

use super::args::{Args, SyscallArgs};
use crate::host;
use crate::kernel::task::Task;

/// A guest clock id, decoded as Linux encodes it
/// (include/linux/posix-timers.h): the fixed clocks, and below zero the
/// CPU-time clocks of a process or thread (`!pid << 3 | which`, bit 2 for a
/// thread) and the clocks of descriptors (`which` 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Clock {
    /// a clock the host keeps: REALTIME, MONOTONIC, MONOTONIC_RAW, the
    /// coarse ones, BOOTTIME, the alarm clocks, TAI
    Host(i32),
    /// CPU time of a thread group (`pid` 0: the caller's); `which` 0 is
    /// user+system, 1 user, 2 scheduler time
    Process { pid: i32, which: i32 },
    /// CPU time of a thread of the caller's group (`tid` 0: the caller)
    Thread { tid: i32, which: i32 },
    /// a descriptor's clock (`CLOCKFD`): only PTP devices have one, and the
    /// sandbox has none
    Fd,
}

/// Scheduler-time `which` of a CPU-time clock.
const CPUCLOCK_SCHED: i32 = 2;

impl Clock {
    /// Decodes `id`, or `EINVAL` for an id that names no clock at all.
    pub(crate) fn decode(id: i32) -> Result<Clock, Errno> {
        match id {
            0 | 1 | 4..=9 | 11 => Ok(Clock::Host(id)),
            libc::CLOCK_PROCESS_CPUTIME_ID => Ok(Clock::Process {
                pid: 0,
                which: CPUCLOCK_SCHED,
            }),
            libc::CLOCK_THREAD_CPUTIME_ID => Ok(Clock::Thread {
                tid: 0,
                which: CPUCLOCK_SCHED,
            }),
            _ if id >= 0 => Err(Errno::EINVAL),
            _ if id & 7 == 3 => Ok(Clock::Fd),
            _ if id & 3 == 3 => Err(Errno::EINVAL),
            _ => {
                let pid = !(id >> 3);
                let which = id & 3;
                Ok(if id & 4 != 0 {
                    Clock::Thread { tid: pid, which }
                } else {
                    Clock::Process { pid, which }
                })
            }
        }
    }

    /// Whether the CPU-time clock names a task the caller may read:
    /// `EINVAL` for a pid that is no thread group leader (unless it is the
    /// caller and `gettime`), or a thread of another group, as Linux's
    /// `lookup_task` answers.
    pub(crate) fn check(self, task: &Task, gettime: bool) -> Result<Clock, Errno> {
        let thread = |tid: i32| task.kernel.procs().threads.get(&tid).cloned();
        match self {
            Clock::Process { pid, .. } if pid != 0 => {
                let leader = task
                    .kernel
                    .process(pid)
                    .is_some_and(|p| !p.state().threads.is_empty());
                if leader || (gettime && pid == task.thread.tid) {
                    Ok(self)
                } else {
                    Err(Errno::EINVAL)
                }
            }
            Clock::Thread { tid, .. } if tid != 0 => match thread(tid) {
                Some(t) if Arc::ptr_eq(&t.process, &task.thread.process) => Ok(self),
                _ => Err(Errno::EINVAL),
            },
            Clock::Fd => Err(Errno::EINVAL),
            _ => Ok(self),
        }
    }

    /// Whether this is the caller's own thread clock (which Linux does not
    /// sleep or settle on).
    fn is_own_thread(self, task: &Task) -> bool {
        matches!(self, Clock::Thread { tid, .. } if tid == 0 || tid == task.thread.tid)
    }
}

fn duration_ts(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as i64,
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}

/// The CPU time a valid CPU-time clock reads: the caller's process and
/// threads as `times` counts them, another process's as /proc does.
fn cpu_now(task: &Task, clock: Clock) -> Duration {
    let pick = |t: crate::kernel::task::CpuTimes, which: i32| match which {
        1 => t.user,
        _ => t.user + t.sys,
    };
    match clock {
        Clock::Process { pid, which } if pid != 0 && pid != task.proc_.pid => task
            .kernel
            .process(pid)
            .map(|p| pick(p.cpu_times(), which))
            .unwrap_or_default(),
        Clock::Process { which, .. } => pick(task.cpu_times(), which),
        // A thread's own CPU time is not kept apart: its group's.
        Clock::Thread { which, .. } => pick(task.cpu_times(), which),
        Clock::Host(_) | Clock::Fd => Duration::ZERO,
    }
}

/// The host clock a POSIX timer on guest clock `id` runs on (CPU-time
/// clocks run in real time), or Linux's refusal of the id.
pub(crate) fn timer_clock(task: &Task, id: i32) -> Result<i32, Errno> {
    match Clock::decode(id)? {
        Clock::Host(4..=6) | Clock::Fd => Err(Errno::EOPNOTSUPP),
        Clock::Host(c @ (8 | 9)) if host_res(c).is_err() => Err(Errno::EOPNOTSUPP),
        Clock::Host(c) => Ok(c),
        cpu => cpu
            .check(task, false)
            .map(|_| libc::CLOCK_PROCESS_CPUTIME_ID),
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
    let ts = match Clock::decode(a.i32(0))?.check(task, true)? {
        Clock::Host(c) => now(task, c)?,
        cpu => duration_ts(cpu_now(task, cpu)),
    };
    task.mm().write_obj(a.ptr(1), &ts).map(|()| 0)
}

/// Where [`host::clock_resolutions`] keeps the tick of CPU-time clocks.
const TICK: i32 = 12;

/// The host's resolution of fixed clock `c` (or [`TICK`]); `EINVAL` for a
/// clock the host lacks (the alarm clocks without a real-time clock).
fn host_res(c: i32) -> Result<Timespec, Errno> {
    host::clock_resolutions()
        .get(c as usize)
        .copied()
        .flatten()
        .ok_or(Errno::EINVAL)
}

pub fn sys_clock_getres(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let res = a.ptr(1);
    let ts = match Clock::decode(a.i32(0))?.check(task, false)? {
        Clock::Host(c) => host_res(c)?,
        // Scheduler time counts in nanoseconds, the others in ticks.
        Clock::Process { which, .. } | Clock::Thread { which, .. } if which == CPUCLOCK_SCHED => {
            Timespec {
                tv_sec: 0,
                tv_nsec: 1,
            }
        }
        _ => host_res(TICK)?,
    };
    if res != 0 {
        task.mm().write_obj(res, &ts)?;
    }
    Ok(0)
}

/// `clock_settime`: the clocks are the host's, so a valid request for the
/// one settable clock is refused as Linux refuses a caller without
/// `CAP_SYS_TIME`; CPU-time clocks cannot be set at all.
pub fn sys_clock_settime(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let id = a.i32(0);
    match Clock::decode(id)? {
        Clock::Host(libc::CLOCK_REALTIME) => {
            let ts: Timespec = task.mm().read_obj(a.ptr(1))?;
            if !valid(&ts) {
                return Err(Errno::EINVAL);
            }
            Err(Errno::EPERM)
        }
        clock @ (Clock::Process { .. } | Clock::Thread { .. }) if id < 0 => {
            clock.check(task, false)?;
            Err(Errno::EPERM)
        }
        _ => Err(Errno::EINVAL),
    }
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
    let (id, flags) = (a.i32(0), a.u64(1));
    let clock = Clock::decode(id)?;
    // Clocks Linux has no sleep for.
    let unsupported = matches!(clock, Clock::Host(4..=6) | Clock::Fd)
        || id == libc::CLOCK_THREAD_CPUTIME_ID
        || (matches!(clock, Clock::Host(8 | 9)) && host_res(id).is_err());
    if unsupported {
        return Err(Errno::EOPNOTSUPP);
    }
    if clock.is_own_thread(task) {
        return Err(Errno::EINVAL);
    }
    let clock = clock.check(task, false)?;
    let ts: Timespec = task.mm().read_obj(a.ptr(2))?;
    let absolute = flags & 1 != 0;
    let host_clock = match clock {
        Clock::Host(8) => libc::CLOCK_REALTIME,
        Clock::Host(9) => libc::CLOCK_BOOTTIME,
        Clock::Host(c) => c,
        // CPU time runs no faster than real time: sleep in real time until
        // the CPU clock could have reached the deadline.
        cpu => {
            if !valid(&ts) {
                return Err(Errno::EINVAL);
            }
            let want = Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
            let left = if absolute {
                want.saturating_sub(cpu_now(task, cpu))
            } else {
                want
            };
            let rel = duration_ts(left);
            return match sleep_for(task, &rel, false, libc::CLOCK_MONOTONIC)? {
                Ok(()) => Ok(0),
                Err(left) if !absolute => {
                    write_rem(task, a.ptr(3), left)?;
                    Err(Errno::EINTR)
                }
                Err(_) => Err(Errno::ERESTARTNOHAND),
            };
        }
    };
    match sleep_for(task, &ts, absolute, host_clock)? {
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
