//! Signal calls: dispositions, masks, the alternate stack, sending, waiting
//! for signals and returning from handlers.

use abi::signal::*;
use abi::{Errno, KSigaction, SigInfo, StackT};

use super::args::{Args, SyscallArgs};
use crate::kernel::auth::cap;
use crate::kernel::task::{si, user_info, Process, Task, Thread, UNBLOCKABLE};
use crate::vfs::file::FileKind;

fn sig_arg(sig: i32) -> Result<usize, Errno> {
    if !(1..=64).contains(&sig) {
        return Err(Errno::EINVAL);
    }
    Ok(sig as usize)
}

pub fn sys_rt_sigaction(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (act, oldact, sigsetsize) = (a.ptr(1), a.ptr(2), a.usize(3));
    if sigsetsize != 8 {
        return Err(Errno::EINVAL);
    }
    let sig = sig_arg(a.i32(0))?;
    let new: Option<KSigaction> = if act != 0 {
        Some(task.mm().read_obj(act)?)
    } else {
        None
    };
    if new.is_some() && (sig as i32 == SIGKILL || sig as i32 == SIGSTOP) {
        return Err(Errno::EINVAL);
    }
    let old = task.proc_.state().actions[sig - 1];
    if oldact != 0 {
        task.mm().write_obj(oldact, &old)?;
    }
    if let Some(mut n) = new {
        n.mask &= !UNBLOCKABLE;
        let mut st = task.proc_.state();
        st.actions[sig - 1] = n;
        // Setting a signal to be ignored discards it where pending (POSIX).
        let sig = sig as i32;
        if n.handler == SIG_IGN
            || (n.handler == SIG_DFL && crate::kernel::task::ignored_by_default(sig))
        {
            st.pending.clear(sig);
            for t in &st.threads {
                t.state().pending.clear(sig);
            }
        }
    }
    Ok(0)
}

pub fn sys_rt_sigprocmask(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (how, set, oldset, sigsetsize) = (a.u64(0), a.ptr(1), a.ptr(2), a.usize(3));
    if sigsetsize != 8 {
        return Err(Errno::EINVAL);
    }
    let set: Option<u64> = if set != 0 {
        Some(task.mm().read_obj(set)?)
    } else {
        None
    };
    let old = task.sigmask();
    if let Some(set) = set {
        let new = match how {
            SIG_BLOCK => old | set,
            SIG_UNBLOCK => old & !set,
            SIG_SETMASK => set,
            _ => return Err(Errno::EINVAL),
        };
        task.set_sigmask(new);
    }
    if oldset != 0 {
        task.mm().write_obj(oldset, &old)?;
    }
    Ok(0)
}

pub fn sys_rt_sigpending(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    if a.usize(1) > 8 {
        return Err(Errno::EINVAL);
    }
    let pending = {
        let p = task.proc_.state();
        let t = task.thread.state();
        (p.pending.bits | t.pending.bits) & t.mask
    };
    task.mm().write_obj(a.ptr(0), &pending).map(|()| 0)
}

pub fn sys_sigaltstack(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    const SS_AUTODISARM: i32 = 1 << 31;
    let (ss, old_ss) = (a.ptr(0), a.ptr(1));
    let new: Option<StackT> = if ss != 0 {
        Some(task.mm().read_obj(ss)?)
    } else {
        None
    };
    let cur = task.altstack;
    let rsp = task.regs.rsp;
    let on_stack = cur.flags & SS_DISABLE == 0 && rsp > cur.sp && rsp <= cur.sp + cur.size;
    if old_ss != 0 {
        let mut out = cur;
        if on_stack {
            out.flags |= SS_ONSTACK;
        }
        task.mm().write_obj(old_ss, &out)?;
    }
    if let Some(mut n) = new {
        if on_stack {
            return Err(Errno::EPERM);
        }
        let mode = n.flags & !SS_AUTODISARM;
        if mode != 0 && mode != SS_DISABLE && mode != SS_ONSTACK {
            return Err(Errno::EINVAL);
        }
        if mode == SS_DISABLE {
            n = StackT {
                sp: 0,
                flags: SS_DISABLE,
                pad: 0,
                size: 0,
            };
        } else {
            if n.size < MINSIGSTKSZ {
                return Err(Errno::ENOMEM);
            }
            n.flags &= SS_AUTODISARM;
        }
        task.altstack = n;
    }
    Ok(0)
}

/// Whether the caller may send `sig` to process `p` (or its thread `t`)
/// (kill(2)): its real or effective uid is the target's real or saved
/// uid, or it holds `CAP_KILL`; `SIGCONT` also goes anywhere in the
/// caller's session. A target whose credentials are gone (a zombie) may
/// be signalled: the signal goes nowhere. A caller whose Landlock domain
/// scopes signals reaches only its own process and its domain's.
fn may_signal(task: &Task, p: &Process, t: Option<&Thread>, sig: i32) -> bool {
    if let Some(d) = &task.landlock {
        if !std::ptr::eq(p, &*task.proc_) {
            let target = t.map(|t| t.state().landlock.clone()).or_else(|| {
                let leader = p.state().threads.first().cloned();
                leader.map(|l| l.state().landlock.clone())
            });
            // (a zombie has no thread left: its signal goes nowhere)
            if let Some(theirs) = target {
                if d.scoped_out(abi::landlock::scope::SIGNAL, theirs.as_ref()) {
                    return false;
                }
            }
        }
    }
    if task.capable(cap::KILL) {
        return true;
    }
    let (session, leader) = {
        let st = p.state();
        (st.sid, st.threads.first().cloned())
    };
    if sig == SIGCONT && session == task.proc_.state().sid {
        return true;
    }
    let Some(target) = t
        .map(|t| t.state().uid)
        .or_else(|| leader.map(|l| l.state().uid))
    else {
        return true;
    };
    let me = task.creds.uid;
    [me[0], me[1]]
        .iter()
        .any(|u| *u == target[0] || *u == target[2])
}

/// `kill(2)` targets: a process, a process group, or everyone. A group or
/// everyone is signalled where permitted, `EPERM` when nowhere.
pub fn sys_kill(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (pid, sig) = (a.i32(0), a.i32(1));
    if !(0..=64).contains(&sig) {
        return Err(Errno::EINVAL);
    }
    let me = task.pid();
    let my_pgid = task.proc_.state().pgid;
    let targets: Vec<_> = {
        let procs = task.kernel.procs();
        procs
            .map
            .values()
            // Zombies count until they are reaped: kill(2) on one succeeds
            // (the signal goes nowhere), as on Linux.
            .filter(|p| {
                let st = p.state();
                match pid {
                    p_ if p_ > 0 => p.pid == p_,
                    0 => st.pgid == my_pgid,
                    -1 => p.pid != 1 && p.pid != me,
                    // (-INT_MIN names no group: ESRCH, as on Linux)
                    g => g.checked_neg() == Some(st.pgid),
                }
            })
            .cloned()
            .collect()
    };
    if targets.is_empty() {
        return Err(Errno::ESRCH);
    }
    let info = user_info(sig, me, task.creds.uid[0], si::USER);
    let mut sent = false;
    for t in targets {
        if may_signal(task, &t, None, sig) {
            t.send_signal(&task.kernel, sig, info);
            sent = true;
        }
    }
    if !sent {
        return Err(Errno::EPERM);
    }
    Ok(0)
}

/// Sends `sig` to thread `tid` (of thread group `tgid` when given), with
/// `info`, or a `tkill` siginfo from the caller when `None`.
fn thread_kill(
    task: &mut Task,
    tgid: Option<i32>,
    tid: i32,
    sig: i32,
    info: Option<u64>,
) -> Result<u64, Errno> {
    if !(0..=64).contains(&sig) || tid <= 0 || tgid.is_some_and(|g| g <= 0) {
        return Err(Errno::EINVAL);
    }
    let info = match info {
        Some(uinfo) => queued_info(task, tgid.unwrap_or(tid), sig, uinfo)?,
        None => user_info(sig, task.pid(), task.creds.uid[0], si::TKILL),
    };
    let target = task
        .kernel
        .procs()
        .threads
        .get(&tid)
        .cloned()
        .ok_or(Errno::ESRCH)?;
    if tgid.is_some_and(|g| g != target.process.pid) {
        return Err(Errno::ESRCH);
    }
    if !may_signal(task, &target.process, Some(&target), sig) {
        return Err(Errno::EPERM);
    }
    target.send_signal(&task.kernel, sig, info);
    Ok(0)
}

pub fn sys_tkill(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    thread_kill(task, None, a.i32(0), a.i32(1), None)
}

pub fn sys_tgkill(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    thread_kill(task, Some(a.i32(0)), a.i32(1), a.i32(2), None)
}

/// The caller's `siginfo` for `rt_sigqueueinfo`/`rt_tgsigqueueinfo`: the
/// signal number is forced to `sig`, and only the caller may claim a
/// kernel-sent or `tkill` code for itself (Linux's rule against forging).
fn queued_info(task: &Task, target_pid: i32, sig: i32, uinfo: u64) -> Result<SigInfo, Errno> {
    let mut info: SigInfo = task.mm().read_obj(uinfo)?;
    if (info.code >= 0 || info.code == si::TKILL) && target_pid != task.pid() {
        return Err(Errno::EPERM);
    }
    info.signo = sig;
    Ok(info)
}

/// `rt_sigqueueinfo(2)`: like `kill` to one process, with the caller's data.
pub fn sys_rt_sigqueueinfo(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (pid, sig) = (a.i32(0), a.i32(1));
    if !(0..=64).contains(&sig) {
        return Err(Errno::EINVAL);
    }
    let info = queued_info(task, pid, sig, a.ptr(2))?;
    let target = task.kernel.process(pid).ok_or(Errno::ESRCH)?;
    if !may_signal(task, &target, None, sig) {
        return Err(Errno::EPERM);
    }
    target.send_signal(&task.kernel, sig, info);
    Ok(0)
}

/// `pidfd_send_signal` scope flags (Linux 6.9): the pidfd's thread, its
/// thread group (the default for a process pidfd), or the process group
/// whose ID is the pidfd's process ID.
const PIDFD_SIGNAL_THREAD: u64 = 1;
const PIDFD_SIGNAL_THREAD_GROUP: u64 = 2;
const PIDFD_SIGNAL_PROCESS_GROUP: u64 = 4;

/// `pidfd_send_signal(pidfd, sig, info, flags)`: `kill` aimed through a
/// pidfd, or through a descriptor of a `/proc/[pid]` directory as Linux
/// also accepts. A zombie takes (and drops) the signal as `kill(2)` does;
/// `ESRCH` once the process has been reaped.
pub fn sys_pidfd_send_signal(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (pidfd, sig, uinfo, flags) = (a.fd(0), a.i32(1), a.ptr(2), a.u64(3));
    let scopes = PIDFD_SIGNAL_THREAD | PIDFD_SIGNAL_THREAD_GROUP | PIDFD_SIGNAL_PROCESS_GROUP;
    if flags & !scopes != 0 || flags.count_ones() > 1 || !(0..=64).contains(&sig) {
        return Err(Errno::EINVAL);
    }
    let file = task.fds().file(pidfd.into())?;
    let held = file.downcast::<crate::fsimpl::pidfd::PidFd>();
    let target = match (&file.kind, file.location.as_ref().map(|l| l.node())) {
        _ if held.is_some() => held.map(|p| p.0.clone()).ok_or(Errno::EBADF)?,
        (FileKind::SynthDir, Some(n))
            if let Some(crate::fsimpl::proc::ProcNode::Pid(pid, None)) =
                crate::fsimpl::proc::ProcInode::of(n) =>
        {
            task.kernel.process(*pid).ok_or(Errno::ESRCH)?
        }
        _ => return Err(Errno::EBADF),
    };
    // Reaped: the process table no longer holds this very process.
    if !task
        .kernel
        .process(target.pid)
        .is_some_and(|p| std::sync::Arc::ptr_eq(&p, &target))
    {
        return Err(Errno::ESRCH);
    }
    let info = if uinfo == 0 {
        let code = if flags == PIDFD_SIGNAL_THREAD {
            si::TKILL
        } else {
            si::USER
        };
        user_info(sig, task.pid(), task.creds.uid[0], code)
    } else {
        let info: SigInfo = task.mm().read_obj(uinfo)?;
        // Unlike rt_sigqueueinfo, the number in `info` must match; and
        // only a signal to the caller's own process may claim any code.
        if info.signo != sig {
            return Err(Errno::EINVAL);
        }
        if flags == PIDFD_SIGNAL_PROCESS_GROUP && (info.code >= 0 || info.code == si::TKILL) {
            return Err(Errno::EPERM);
        }
        queued_info(task, target.pid, sig, uinfo)?
    };
    if flags != PIDFD_SIGNAL_PROCESS_GROUP && !may_signal(task, &target, None, sig) {
        return Err(Errno::EPERM);
    }
    match flags {
        PIDFD_SIGNAL_THREAD => {
            let leader = task.kernel.procs().threads.get(&target.pid).cloned();
            let leader = leader
                .filter(|t| std::sync::Arc::ptr_eq(&t.process, &target))
                .ok_or(Errno::ESRCH)?;
            leader.send_signal(&task.kernel, sig, info);
        }
        PIDFD_SIGNAL_PROCESS_GROUP => {
            let members: Vec<_> = {
                let procs = task.kernel.procs();
                procs
                    .map
                    .values()
                    .filter(|p| p.state().pgid == target.pid)
                    .cloned()
                    .collect()
            };
            if members.is_empty() {
                return Err(Errno::ESRCH);
            }
            let members: Vec<_> = members
                .into_iter()
                .filter(|p| may_signal(task, p, None, sig))
                .collect();
            if members.is_empty() {
                return Err(Errno::EPERM);
            }
            for p in members {
                p.send_signal(&task.kernel, sig, info);
            }
        }
        _ => target.send_signal(&task.kernel, sig, info),
    }
    Ok(0)
}

/// `rt_tgsigqueueinfo(2)`: like `tgkill`, with the caller's data.
pub fn sys_rt_tgsigqueueinfo(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    thread_kill(task, Some(a.i32(0)), a.i32(1), a.i32(2), Some(a.ptr(3)))
}

pub fn sys_rt_sigreturn(task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    match task.sigreturn() {
        Ok(v) => Ok(v),
        Err(_) => {
            // A frame the guest corrupted: Linux kills with SIGSEGV.
            task.force_signal(
                SIGSEGV,
                crate::kernel::task::fault_info(SIGSEGV, si::KERNEL, 0),
            );
            Ok(task.regs.rax)
        }
    }
}

/// Blocks until a signal the (temporary) mask lets through is pending
/// (a signal sent to the thread wakes it).
fn wait_for_signal(task: &Task) {
    let w = &task.thread.waiter;
    loop {
        w.prepare();
        if task.thread.interrupted() {
            return;
        }
        w.sleep(None);
    }
}

pub fn sys_pause(task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    wait_for_signal(task);
    Err(Errno::ERESTARTNOHAND)
}

pub fn sys_rt_sigsuspend(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    if a.usize(1) != 8 {
        return Err(Errno::EINVAL);
    }
    let mask: u64 = task.mm().read_obj(a.ptr(0))?;
    task.saved_mask = Some(task.set_sigmask(mask));
    wait_for_signal(task);
    Err(Errno::ERESTARTNOHAND)
}

pub fn sys_rt_sigtimedwait(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (uthese, uinfo, uts, sigsetsize) = (a.ptr(0), a.ptr(1), a.ptr(2), a.usize(3));
    if sigsetsize != 8 {
        return Err(Errno::EINVAL);
    }
    let set: u64 = task.mm().read_obj::<u64>(uthese)? & !UNBLOCKABLE;
    let deadline = if uts != 0 {
        let ts: abi::Timespec = task.mm().read_obj(uts)?;
        if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
            return Err(Errno::EINVAL);
        }
        Some(
            std::time::Instant::now()
                + std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32),
        )
    } else {
        None
    };
    let w = task.thread.waiter.clone();
    loop {
        w.prepare();
        {
            let mut p = task.proc_.state();
            let mut t = task.thread.state();
            let ready = (t.pending.bits | p.pending.bits) & set;
            if ready != 0 {
                let sig = ready.trailing_zeros() as i32 + 1;
                let info = if t.pending.has(sig) {
                    t.pending.dequeue(sig)
                } else {
                    p.pending.dequeue(sig)
                };
                drop(t);
                drop(p);
                if uinfo != 0 {
                    task.mm().write_obj(uinfo, &info)?;
                }
                return Ok(sig as u64);
            }
            // (a save of the sandbox also ends the wait; it restarts)
            let saving =
                crate::kernel::task::CHECKPOINT_ASKED.load(std::sync::atomic::Ordering::Relaxed);
            if p.group_exit.is_some()
                || saving
                || (t.pending.bits | p.pending.bits) & !t.mask & !set != 0
            {
                return Err(Errno::EINTR);
            }
        }
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Err(Errno::EAGAIN);
        }
        w.sleep(deadline);
    }
}
