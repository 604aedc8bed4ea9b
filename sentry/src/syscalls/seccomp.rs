//! `seccomp(2)` and `prctl(PR_SET_SECCOMP / PR_GET_SECCOMP)`: a guest's own
//! filters, checked and installed as Linux does, the check made before
//! each call of a thread in strict or filter mode (Linux's
//! `__secure_computing()`), and the user-notification listener's ioctls
//! (seccomp_unotify(2)). Everything happens in the Sentry: a guest's filter
//! is data it runs, never a filter on the host.

use std::sync::Arc;

use abi::bpf::{self, Program, SeccompData, SockFilter, SockFprog};
use abi::signal::{SIGKILL, SIGSYS};
use abi::{nr, Errno, OpenFlags, SigInfo};
use zerocopy::{FromZeros, IntoBytes};

use super::{Args, SyscallArgs};
use crate::fsimpl::seccomp_notify::SeccompListener;
use crate::kernel::auth::cap;
use crate::kernel::seccomp::{Action, Filter, Mode, Notifier, Reply, Seccomp};
use crate::kernel::task::{ExitStatus, Task, Thread};
use crate::kernel::wait::{wait_until, Sleeper, Waiter};
use crate::sync::Locked;
use crate::vfs::file::{FdEntry, FileDescription};

/// The calls strict mode allows (the kernel's `mode1_syscalls`): note
/// `exit`, not `exit_group`.
const STRICT_CALLS: [u64; 4] = [nr::READ, nr::WRITE, nr::EXIT, nr::RT_SIGRETURN];

/// `si_code` of a `SIGSYS` a filter's `SECCOMP_RET_TRAP` raises.
const SYS_SECCOMP: i32 = 1;

/// The check before a call of a thread whose seccomp flags are on: `None`
/// to make the call, else what the call returns instead (after a kill the
/// task has ended and the value goes nowhere).
pub fn secure_computing(task: &mut Task, nr: u64, args: &Args) -> Option<Result<u64, Errno>> {
    let data = SeccompData {
        nr: nr as i32,
        arch: bpf::AUDIT_ARCH_X86_64,
        // (the address after the `syscall` instruction)
        instruction_pointer: task.regs.rip,
        args: *args,
    };
    let (ret, log, notifier) = {
        let s = task.seccomp();
        match s.mode {
            Mode::Disabled => return None,
            Mode::Strict => {
                if STRICT_CALLS.contains(&nr) {
                    return None;
                }
                // Linux's `do_exit(SIGKILL)`: the thread, not its group.
                tracing::debug!("seccomp strict mode: call {nr} kills task {}", task.tid());
                task.exit(ExitStatus::Signal(SIGKILL)).ok();
                return Some(Ok(0));
            }
            Mode::Filter => match &s.filter {
                Some(f) => {
                    let (ret, matched) = f.run(&data);
                    // (the listener only for a call it gets: an atomic
                    // count otherwise spent on every call)
                    let notifier = matched
                        .filter(|_| Action::of(ret) == Action::UserNotif)
                        .and_then(|m| m.notifier.clone());
                    (ret, matched.is_some_and(|m| m.log), notifier)
                }
                None => return None,
            },
        }
    };
    let action = Action::of(ret);
    if log || !matches!(action, Action::Allow) {
        tracing::trace!(
            "seccomp: task {} call {nr} at {:#x}: {action:?}",
            task.tid(),
            data.instruction_pointer
        );
    }
    match action {
        Action::Allow | Action::Log => None,
        // (`ERRNO` with 0 makes the call succeed, unmade)
        Action::Errno(e) => Some(Ok((-i64::from(e)) as u64)),
        Action::Trap(reason) => {
            let mut info = SigInfo::new_zeroed();
            info.signo = SIGSYS;
            info.errno = i32::from(reason);
            info.code = SYS_SECCOMP;
            // `_sigsys`: the call's address, then its number and arch.
            info.fields[0] = data.instruction_pointer;
            info.fields[1] = u64::from(data.nr as u32) | u64::from(data.arch) << 32;
            task.force_signal(SIGSYS, info);
            // The handler sees the registers as they were: `rax` back to
            // the call's number (Linux's `syscall_rollback()`).
            Some(Ok(nr))
        }
        Action::UserNotif => match notifier {
            Some(n) => user_notification(task, &n, data),
            // (a filter without a listener, or whose listener closed)
            None => Some(Err(Errno::ENOSYS)),
        },
        // No tracer can attach (ptrace is not offered): Linux answers
        // ENOSYS without one.
        Action::Trace(_) => Some(Err(Errno::ENOSYS)),
        Action::KillThread if task.proc_.state().threads.len() > 1 => {
            task.exit(ExitStatus::Signal(SIGSYS)).ok();
            Some(Ok(0))
        }
        // A thread alone takes its process with it, as KILL_PROCESS does
        // (Linux dumps core then, ending the group).
        Action::KillThread | Action::KillProcess => {
            task.exit_group(ExitStatus::Signal(SIGSYS)).ok();
            Some(Ok(0))
        }
    }
}

/// Hands the call to the filter's listener and waits for the answer: a
/// value or an error the call returns unmade, or "make it" (`None`). A
/// signal withdraws the call, which is restarted (or fails with `EINTR`)
/// as a call interrupted in its wait; a closed listener is `ENOSYS`.
fn user_notification(
    task: &mut Task,
    n: &Arc<Notifier>,
    data: SeccompData,
) -> Option<Result<u64, Errno>> {
    let nofile = task.nofile();
    let Some(id) = n.queue_call(task.tid(), data, task.fds.clone(), nofile) else {
        return Some(Err(Errno::ENOSYS));
    };
    let queues = [n.queue.clone()];
    let sleeper = NotifiedCaller {
        thread: &task.thread,
        notifier: n,
        id,
    };
    match wait_until(&sleeper, &queues, None, || n.take_reply(id)) {
        Ok(Reply::Continue) => None,
        Ok(Reply::Return(v)) => Some(Ok(v as u64)),
        Err(_) => {
            n.withdraw(id);
            Some(Err(Errno::ERESTARTSYS))
        }
    }
}

/// A caller waiting for the listener: any signal ends its wait, but one
/// that does not end the process once the call is received when the
/// filter asked for `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`.
struct NotifiedCaller<'a> {
    thread: &'a Thread,
    notifier: &'a Notifier,
    id: u64,
}

impl Sleeper for NotifiedCaller<'_> {
    fn waiter(&self) -> &Arc<Waiter> {
        &self.thread.waiter
    }

    fn interrupted(&self) -> bool {
        if self.notifier.wait_killable && self.notifier.is_received(self.id) {
            self.thread.fatal_signal_pending()
        } else {
            self.thread.interrupted()
        }
    }
}

/// `ioctl(2)` on a listener.
pub fn listener_ioctl(
    task: &mut Task,
    n: &Arc<Notifier>,
    cmd: u32,
    arg: u64,
) -> Result<u64, Errno> {
    // `ADDFD` is an extensible-argument ioctl: its size is the caller's.
    const EA_MASK: u32 = 0xffff;
    match cmd {
        bpf::SECCOMP_IOCTL_NOTIF_RECV => {
            // A buffer that is not zeroed is refused, so that the structure
            // can grow.
            let buf: bpf::SeccompNotif = task.mm().read_obj(arg)?;
            if buf != bpf::SeccompNotif::default() {
                return Err(Errno::EINVAL);
            }
            let queues = [n.queue.clone()];
            let notif = wait_until(&*task.thread, &queues, None, || n.receive())
                .map_err(|_| Errno::ERESTARTSYS)?;
            if let Err(e) = task.mm().write_obj(arg, &notif) {
                n.unreceive(notif.id);
                return Err(e);
            }
            Ok(0)
        }
        bpf::SECCOMP_IOCTL_NOTIF_SEND => {
            let resp: bpf::SeccompNotifResp = task.mm().read_obj(arg)?;
            let cont = resp.flags & bpf::SECCOMP_USER_NOTIF_FLAG_CONTINUE != 0;
            if resp.flags & !bpf::SECCOMP_USER_NOTIF_FLAG_CONTINUE != 0
                || (cont && (resp.error != 0 || resp.val != 0))
            {
                return Err(Errno::EINVAL);
            }
            let reply = if cont {
                Reply::Continue
            } else if resp.error != 0 {
                Reply::Return(resp.error.into())
            } else {
                Reply::Return(resp.val)
            };
            n.answer(resp.id, reply).map(|()| 0)
        }
        bpf::SECCOMP_IOCTL_NOTIF_ID_VALID | bpf::SECCOMP_IOCTL_NOTIF_ID_VALID_WRONG_DIR => {
            let id: u64 = task.mm().read_obj(arg)?;
            if n.is_waiting(id) {
                Ok(0)
            } else {
                Err(Errno::ENOENT)
            }
        }
        bpf::SECCOMP_IOCTL_NOTIF_SET_FLAGS => {
            // The one flag is a scheduling hint.
            if arg & !bpf::SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP != 0 {
                return Err(Errno::EINVAL);
            }
            Ok(0)
        }
        c if c & EA_MASK == bpf::SECCOMP_IOCTL_NOTIF_ADDFD & EA_MASK => {
            add_fd(task, n, (c >> 16 & 0x3fff) as usize, arg)
        }
        _ => Err(Errno::EINVAL),
    }
}

/// `SECCOMP_IOCTL_NOTIF_ADDFD`: puts a copy of one of the listener's
/// descriptors in the caller's table, at the lowest free number or at
/// `newfd`; with `SECCOMP_ADDFD_FLAG_SEND` the call returns its number.
fn add_fd(task: &mut Task, n: &Arc<Notifier>, size: usize, arg: u64) -> Result<u64, Errno> {
    let ver0 = std::mem::size_of::<bpf::SeccompNotifAddfd>();
    if size < ver0 || size >= 4096 {
        return Err(Errno::EINVAL);
    }
    // A larger structure's tail must be zero (copy_struct_from_user).
    let mut raw = vec![0u8; size];
    task.mm().copy_in(arg, &mut raw)?;
    if raw[ver0..].iter().any(|&b| b != 0) {
        return Err(Errno::E2BIG);
    }
    let mut a = bpf::SeccompNotifAddfd::default();
    a.as_mut_bytes().copy_from_slice(&raw[..ver0]);
    let cloexec = OpenFlags::CLOEXEC.bits();
    let known = bpf::SECCOMP_ADDFD_FLAG_SETFD | bpf::SECCOMP_ADDFD_FLAG_SEND;
    let setfd = a.flags & bpf::SECCOMP_ADDFD_FLAG_SETFD != 0;
    if a.newfd_flags & !cloexec != 0 || a.flags & !known != 0 || (a.newfd != 0 && !setfd) {
        return Err(Errno::EINVAL);
    }
    let file = task.fds().file(i64::from(a.srcfd as i32))?;
    let entry = FdEntry {
        file,
        cloexec: a.newfd_flags & cloexec != 0,
    };
    let send = a.flags & bpf::SECCOMP_ADDFD_FLAG_SEND != 0;
    n.add_fd(a.id, send, |fds, nofile| {
        let mut fds = fds.locked();
        if setfd {
            let at = usize::try_from(a.newfd as i32).map_err(|_| Errno::EBADF)?;
            // (what it replaces closes when the last reference goes)
            fds.insert_at(at, entry, nofile).map(|_| at as i64)
        } else {
            fds.insert_from(0, entry, nofile)
        }
    })
    .map(|fd| fd as u64)
}

/// `seccomp(op, flags, uargs)`.
pub fn sys_seccomp(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    do_seccomp(task, a.u32(0), a.u32(1), a.ptr(2))
}

/// `prctl(PR_GET_SECCOMP)`: the mode (a thread in strict mode never gets
/// here: the call kills it).
pub fn prctl_get_seccomp(task: &mut Task) -> Result<u64, Errno> {
    Ok(task.seccomp().mode.number().into())
}

/// `prctl(PR_SET_SECCOMP, mode, filter)`: `seccomp(2)` without flags; strict
/// mode ignores `filter`.
pub fn prctl_set_seccomp(task: &mut Task, mode: u64, filter: u64) -> Result<u64, Errno> {
    match mode {
        m if m == u64::from(bpf::SECCOMP_MODE_STRICT) => {
            do_seccomp(task, bpf::SECCOMP_SET_MODE_STRICT, 0, 0)
        }
        m if m == u64::from(bpf::SECCOMP_MODE_FILTER) => {
            do_seccomp(task, bpf::SECCOMP_SET_MODE_FILTER, 0, filter)
        }
        _ => Err(Errno::EINVAL),
    }
}

fn do_seccomp(task: &mut Task, op: u32, flags: u32, uargs: u64) -> Result<u64, Errno> {
    match op {
        bpf::SECCOMP_SET_MODE_STRICT => {
            if flags != 0 || uargs != 0 {
                return Err(Errno::EINVAL);
            }
            set_mode_strict(task)
        }
        bpf::SECCOMP_SET_MODE_FILTER => set_mode_filter(task, flags, uargs),
        bpf::SECCOMP_GET_ACTION_AVAIL => {
            if flags != 0 {
                return Err(Errno::EINVAL);
            }
            let action: u32 = task.mm().read_obj(uargs)?;
            if available(action) {
                Ok(0)
            } else {
                Err(Errno::EOPNOTSUPP)
            }
        }
        bpf::SECCOMP_GET_NOTIF_SIZES => {
            if flags != 0 {
                return Err(Errno::EINVAL);
            }
            task.mm()
                .write_obj(uargs, &bpf::SECCOMP_NOTIF_SIZES)
                .map(|()| 0)
        }
        _ => Err(Errno::EINVAL),
    }
}

/// Whether `action` (the whole value, data bits too) is one Linux has:
/// `SECCOMP_GET_ACTION_AVAIL`.
fn available(action: u32) -> bool {
    bpf::SECCOMP_ACTIONS.contains(&action)
}

/// Strict mode, unless the thread already has filters (`EINVAL`).
fn set_mode_strict(task: &mut Task) -> Result<u64, Errno> {
    if task.seccomp().mode == Mode::Filter {
        return Err(Errno::EINVAL);
    }
    // (Linux also turns `rdtsc` off in strict mode; guest code runs on the
    // host CPU here, and keeps it.)
    task.assign_seccomp(Seccomp {
        mode: Mode::Strict,
        filter: None,
    });
    Ok(0)
}

/// Reads and checks the program at `uargs` (a `struct sock_fprog`) in
/// Linux's order: the header (`EFAULT`), its length (`EINVAL`), the
/// privilege (`EACCES`: `no_new_privs` or `CAP_SYS_ADMIN`, so that a
/// filter cannot fool a set-user-ID program it then runs), the
/// instructions (`EINVAL` for none, `EFAULT`), then the kernel's checks
/// (`EINVAL`).
fn prepare_filter(task: &mut Task, uargs: u64) -> Result<Program, Errno> {
    let fprog: SockFprog = task.mm().read_obj(uargs)?;
    let len = usize::from(fprog.len);
    if len == 0 || len > bpf::BPF_MAXINSNS {
        return Err(Errno::EINVAL);
    }
    if !task.no_new_privs && !task.capable(cap::SYS_ADMIN) {
        return Err(Errno::EACCES);
    }
    if fprog.filter == 0 {
        return Err(Errno::EINVAL);
    }
    let mut insns = vec![SockFilter::default(); len];
    task.mm().copy_in(fprog.filter, insns.as_mut_bytes())?;
    Program::check(&insns).map_err(|e| {
        tracing::debug!("seccomp: task {} filter refused: {e}", task.tid());
        Errno::EINVAL
    })
}

fn set_mode_filter(task: &mut Task, flags: u32, uargs: u64) -> Result<u64, Errno> {
    let has = |f: u32| flags & f != 0;
    if flags & !bpf::SECCOMP_FILTER_FLAGS != 0 {
        return Err(Errno::EINVAL);
    }
    // With both, a thread id and a listener descriptor could not be told
    // apart.
    if has(bpf::SECCOMP_FILTER_FLAG_TSYNC)
        && has(bpf::SECCOMP_FILTER_FLAG_NEW_LISTENER)
        && !has(bpf::SECCOMP_FILTER_FLAG_TSYNC_ESRCH)
    {
        return Err(Errno::EINVAL);
    }
    if has(bpf::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)
        && !has(bpf::SECCOMP_FILTER_FLAG_NEW_LISTENER)
    {
        return Err(Errno::EINVAL);
    }
    let prog = prepare_filter(task, uargs)?;
    // The listener's descriptor is taken first (Linux reserves it before
    // any lock) and given back if the filter is not attached.
    let listener = if has(bpf::SECCOMP_FILTER_FLAG_NEW_LISTENER) {
        let n = Notifier::new(has(bpf::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV));
        let file = FileDescription::of_impl(
            Arc::new(SeccompListener(n.clone())),
            None,
            OpenFlags::RDWR.bits(),
        );
        Some((n, task.install_fd(file, true)?))
    } else {
        None
    };
    let r = attach_filter(task, flags, prog, listener.as_ref().map(|(n, _)| n.clone()));
    match (r, listener) {
        (Ok(0), Some((_, fd))) => Ok(fd),
        (r, Some((_, fd))) => {
            let _ = task.fds().remove(fd as i64);
            r
        }
        (r, None) => r,
    }
}

/// Attaches `prog` to the calling thread (and, with `TSYNC`, to all its
/// process's threads); 0, or a thread that could not be synced.
fn attach_filter(
    task: &mut Task,
    flags: u32,
    prog: Program,
    notifier: Option<Arc<Notifier>>,
) -> Result<u64, Errno> {
    let has = |f: u32| flags & f != 0;
    let tsync = has(bpf::SECCOMP_FILTER_FLAG_TSYNC);
    // The process's lock keeps the thread list still while the filter is
    // checked against and given to every thread: a thread cloned meanwhile
    // gets its parent's filters under the same lock.
    let proc_ = task.proc_.clone();
    let p = proc_.state();
    let current = task.seccomp().clone();
    if current.mode == Mode::Strict {
        return Err(Errno::EINVAL);
    }
    // One listener per chain.
    if notifier.is_some() && current.filter.as_ref().is_some_and(|f| f.has_listener()) {
        return Err(Errno::EBUSY);
    }
    let log = has(bpf::SECCOMP_FILTER_FLAG_LOG);
    let filter = Filter::attach(prog, log, notifier, current.filter).map_err(|_| Errno::ENOMEM)?;
    let me = task.tid();
    let others = || p.threads.iter().filter(|t| t.tid != me);
    if tsync {
        // Each other thread must have no filter or an older part of the
        // caller's chain; the first that has not is the answer.
        for t in others() {
            let st = t.state();
            if st.exiting || st.exit_now {
                continue;
            }
            let syncable = match st.seccomp.mode {
                Mode::Disabled => true,
                Mode::Filter => filter.descends_from(st.seccomp.filter.as_ref()),
                Mode::Strict => false,
            };
            if !syncable {
                return if has(bpf::SECCOMP_FILTER_FLAG_TSYNC_ESRCH) {
                    Err(Errno::ESRCH)
                } else {
                    Ok(t.tid as u64)
                };
            }
        }
    }
    let new = Seccomp {
        mode: Mode::Filter,
        filter: Some(filter),
    };
    task.assign_seccomp(new.clone());
    if tsync {
        let nnp = task.no_new_privs;
        for t in others() {
            let mut st = t.state();
            if st.exiting || st.exit_now {
                continue;
            }
            t.set_seccomp(&mut st, new.clone());
            // The caller's no_new_privs goes with its filter.
            if nnp {
                st.no_new_privs = true;
                st.seccomp_sets_no_new_privs = true;
            }
        }
    }
    drop(p);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_linux_lists_is_available_and_nothing_else() {
        for a in bpf::SECCOMP_ACTIONS {
            assert!(available(a), "{a:#x}");
        }
        // (data bits make it another value: Linux answers EOPNOTSUPP)
        assert!(!available(bpf::SECCOMP_RET_ERRNO | 1));
        assert!(!available(0x0001_0000));
        assert!(!available(u32::MAX));
    }

    #[test]
    fn strict_mode_allows_exit_and_not_exit_group() {
        assert!(STRICT_CALLS.contains(&nr::EXIT));
        assert!(!STRICT_CALLS.contains(&nr::EXIT_GROUP));
    }
}
