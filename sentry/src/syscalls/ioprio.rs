//! `ioprio_get(2)`, `ioprio_set(2)`: a priority kept per thread, which
//! the Sentry reports and inherits as Linux does (nothing schedules by it:
//! the host does the I/O).

use std::sync::Arc;

use abi::Errno;

use super::args::{Args, SyscallArgs};
use crate::kernel::auth::cap;
use crate::kernel::task::{Task, Thread};

const IOPRIO_WHO_PROCESS: i32 = 1;
const IOPRIO_WHO_PGRP: i32 = 2;
const IOPRIO_WHO_USER: i32 = 3;

const CLASS_NONE: i32 = 0;
const CLASS_RT: i32 = 1;
const CLASS_BE: i32 = 2;
const CLASS_IDLE: i32 = 3;

fn class(prio: i32) -> i32 {
    prio >> 13 & 7
}

/// The threads `which`/`who` names (`EINVAL` for an unknown `which`); no
/// thread is `ESRCH` for the caller to report.
fn targets(task: &Task, which: i32, who: i32) -> Result<Vec<Arc<Thread>>, Errno> {
    let procs = task.kernel.procs();
    let all = procs.threads.values();
    Ok(match which {
        IOPRIO_WHO_PROCESS if who == 0 => vec![task.thread.clone()],
        IOPRIO_WHO_PROCESS => procs.threads.get(&who).cloned().into_iter().collect(),
        IOPRIO_WHO_PGRP => {
            let pgrp = if who == 0 {
                task.proc_.state().pgid
            } else {
                who
            };
            all.filter(|t| t.process.state().pgid == pgrp)
                .cloned()
                .collect()
        }
        IOPRIO_WHO_USER => {
            let uid = if who == 0 {
                task.creds.uid[0]
            } else {
                who as u32
            };
            all.filter(|t| t.state().uid[0] == uid).cloned().collect()
        }
        _ => return Err(Errno::EINVAL),
    })
}

/// Linux's `ioprio_best`: the higher of two priorities, a class-less one
/// counting as best-effort level 4.
fn best(a: i32, b: i32) -> i32 {
    let norm = |p: i32| {
        if class(p) == CLASS_NONE {
            CLASS_BE << 13 | 4
        } else {
            p & 0xffff
        }
    };
    norm(a).min(norm(b))
}

pub fn sys_ioprio_get(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (which, who) = (a.i32(0), a.i32(1));
    let threads = targets(task, which, who)?;
    let mut prios = threads.iter().map(|t| t.state().ioprio);
    let first = prios.next().ok_or(Errno::ESRCH)?;
    if which == IOPRIO_WHO_PROCESS {
        return Ok(first as u64);
    }
    // A group's or user's: the best of them, even of one.
    Ok(prios.fold(best(first, first), best) as u64)
}

pub fn sys_ioprio_set(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (which, who, prio) = (a.i32(0), a.i32(1), a.i32(2));
    // ioprio_check_cap(): the value first.
    match class(prio) {
        CLASS_RT if !task.capable(cap::SYS_ADMIN) && !task.capable(cap::SYS_NICE) => {
            return Err(Errno::EPERM)
        }
        CLASS_RT | CLASS_BE | CLASS_IDLE => {}
        CLASS_NONE if prio & 7 == 0 => {}
        _ => return Err(Errno::EINVAL),
    }
    let threads = targets(task, which, who)?;
    if threads.is_empty() {
        return Err(Errno::ESRCH);
    }
    // set_task_ioprio(): the target's real user must be the caller's
    // real or effective one, or the caller has CAP_SYS_NICE.
    let me = (task.creds.uid[0], task.creds.uid[1]);
    let nice = task.capable(cap::SYS_NICE);
    for t in threads {
        let mut st = t.state();
        if st.uid[0] != me.0 && st.uid[0] != me.1 && !nice {
            return Err(Errno::EPERM);
        }
        st.ioprio = prio;
    }
    Ok(0)
}
