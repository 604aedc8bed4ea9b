//! Signal calls. Dispositions and masks are kept exactly; delivery to guest
//! handlers arrives with the process issue, so today a signal sent to the
//! sandbox's only process takes its default action or is dropped when a
//! handler is installed (logged).

use abi::signal::*;
use abi::{Errno, KSigaction, StackT};

use crate::task::{ExitStatus, Task};

fn sig_arg(sig: u64) -> Result<usize, Errno> {
    let s = sig as i32;
    if !(1..=64).contains(&s) {
        return Err(Errno::EINVAL);
    }
    Ok(s as usize)
}

/// Signals that cannot be caught, blocked or ignored.
const UNBLOCKABLE: u64 = (1 << (SIGKILL - 1)) | (1 << (SIGSTOP - 1));

pub fn sys_rt_sigaction(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    if a[3] != 8 {
        return Err(Errno::EINVAL);
    }
    let sig = sig_arg(a[0])?;
    let new: Option<KSigaction> = if a[1] != 0 {
        Some(task.mm.read_obj(a[1])?)
    } else {
        None
    };
    if new.is_some() && (sig as i32 == SIGKILL || sig as i32 == SIGSTOP) {
        return Err(Errno::EINVAL);
    }
    if a[2] != 0 {
        task.mm.write_obj(a[2], &task.signals.actions[sig - 1])?;
    }
    if let Some(mut n) = new {
        n.mask &= !UNBLOCKABLE;
        task.signals.actions[sig - 1] = n;
    }
    Ok(0)
}

pub fn sys_rt_sigprocmask(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    if a[3] != 8 {
        return Err(Errno::EINVAL);
    }
    let old = task.signals.mask;
    if a[1] != 0 {
        let set: u64 = task.mm.read_obj(a[1])?;
        let new = match a[0] {
            SIG_BLOCK => old | set,
            SIG_UNBLOCK => old & !set,
            SIG_SETMASK => set,
            _ => return Err(Errno::EINVAL),
        };
        task.signals.mask = new & !UNBLOCKABLE;
    }
    if a[2] != 0 {
        task.mm.write_obj(a[2], &old)?;
    }
    Ok(0)
}

pub fn sys_rt_sigpending(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    if a[1] > 8 {
        return Err(Errno::EINVAL);
    }
    task.mm.write_obj(a[0], &0u64).map(|()| 0)
}

pub fn sys_sigaltstack(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    const SS_AUTODISARM: i32 = 1 << 31;
    let new: Option<StackT> = if a[0] != 0 {
        Some(task.mm.read_obj(a[0])?)
    } else {
        None
    };
    if let Some(n) = &new {
        let mode = n.flags & !SS_AUTODISARM;
        if mode != 0 && mode != SS_DISABLE && mode != SS_ONSTACK {
            return Err(Errno::EINVAL);
        }
        if mode != SS_DISABLE && n.size < MINSIGSTKSZ {
            return Err(Errno::ENOMEM);
        }
    }
    if a[1] != 0 {
        task.mm.write_obj(a[1], &task.signals.altstack)?;
    }
    if let Some(mut n) = new {
        if n.flags & !SS_AUTODISARM == SS_DISABLE {
            n = StackT {
                sp: 0,
                flags: SS_DISABLE,
                pad: 0,
                size: 0,
            };
        } else {
            n.flags &= SS_AUTODISARM;
        }
        task.signals.altstack = n;
    }
    Ok(0)
}

/// Whether signal `sig`'s default action is to ignore it.
fn ignored_by_default(sig: i32) -> bool {
    matches!(sig, SIGCHLD | SIGURG | SIGWINCH | SIGCONT)
}

fn is_stop(sig: i32) -> bool {
    matches!(sig, SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU)
}

/// Sends `sig` to the sandbox's only task.
fn send_self(task: &mut Task, sig: i32) -> Result<u64, Errno> {
    if sig == 0 {
        return Ok(0);
    }
    let action = task.signals.actions[sig as usize - 1];
    let bit = 1u64 << (sig - 1);
    if sig == SIGKILL {
        return task.exit(ExitStatus::Signal(sig));
    }
    if action.handler == SIG_IGN
        || (action.handler == SIG_DFL && (ignored_by_default(sig) || is_stop(sig)))
    {
        return Ok(0);
    }
    if task.signals.mask & bit != 0 {
        tracing::warn!(
            "signal {sig} stays pending: blocked (pending signals arrive with the process issue)"
        );
        return Ok(0);
    }
    if action.handler == SIG_DFL {
        return task.exit(ExitStatus::Signal(sig));
    }
    tracing::warn!("signal {sig} dropped: delivery to guest handlers is not implemented yet");
    Ok(0)
}

pub fn sys_kill(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let sig = a[1] as i32;
    if !(0..=64).contains(&sig) {
        return Err(Errno::EINVAL);
    }
    let pid = a[0] as i32;
    if pid != task.tid() && pid != 0 && pid != -1 && pid != -task.tid() {
        return Err(Errno::ESRCH);
    }
    send_self(task, sig)
}

pub fn sys_tkill(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let sig = a[1] as i32;
    if !(0..=64).contains(&sig) || (a[0] as i32) <= 0 {
        return Err(Errno::EINVAL);
    }
    if a[0] as i32 != task.tid() {
        return Err(Errno::ESRCH);
    }
    send_self(task, sig)
}

pub fn sys_tgkill(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let sig = a[2] as i32;
    if !(0..=64).contains(&sig) || (a[0] as i32) <= 0 || (a[1] as i32) <= 0 {
        return Err(Errno::EINVAL);
    }
    if a[0] as i32 != task.tid() || a[1] as i32 != task.tid() {
        return Err(Errno::ESRCH);
    }
    send_self(task, sig)
}
