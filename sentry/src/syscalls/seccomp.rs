//! `seccomp(2)` and `prctl(PR_SET_SECCOMP / PR_GET_SECCOMP)`: a guest's own
//! filters, checked and installed as Linux does, and the check made before
//! each call of a thread in strict or filter mode (Linux's
//! `__secure_computing()`). Everything happens in the Sentry: a guest's
//! filter is data it runs, never a filter on the host.

use abi::bpf::{self, Program, SeccompData, SockFilter, SockFprog};
use abi::signal::{SIGKILL, SIGSYS};
use abi::{nr, Errno, SigInfo};
use zerocopy::{FromZeros, IntoBytes};

use super::{Args, SyscallArgs};
use crate::kernel::auth::cap;
use crate::kernel::seccomp::{Action, Filter, Mode, Seccomp};
use crate::kernel::task::{ExitStatus, Task};

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
    let (ret, log) = {
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
                Some(f) => f.run(&data),
                None => return None,
            },
        }
    };
    let action = Action::of(ret);
    if log || !matches!(action, Action::Allow) {
        tracing::debug!(
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
        // No tracer can attach (ptrace is not offered), and no filter has
        // a listener: Linux answers both ENOSYS.
        Action::Trace(_) | Action::UserNotif => Some(Err(Errno::ENOSYS)),
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
    // User notification is not offered: no listener can be made.
    if has(bpf::SECCOMP_FILTER_FLAG_NEW_LISTENER) {
        return Err(Errno::EINVAL);
    }
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
    let filter = Filter::attach(prog, has(bpf::SECCOMP_FILTER_FLAG_LOG), current.filter)
        .map_err(|_| Errno::ENOMEM)?;
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
