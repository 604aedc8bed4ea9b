//! Creating processes (`fork`, `vfork`, `clone`, `clone3`) and waiting for
//! them (`wait4`, `waitid`).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use abi::signal::SIGCHLD;
use abi::{Errno, OpenFlags, SigInfo};
use zerocopy::FromZeros;

use crate::kernel::ptrace;
use crate::kernel::task::{si, ExitStatus, Process, ProcessState, Task, Thread};
use crate::kernel::wait::Registration;
use crate::mm::MemoryManager;
use crate::sync::Locked;
use crate::vfs::file::FileDescription;

const CLONE_VM: u64 = 0x100;
const CLONE_FS: u64 = 0x200;
const CLONE_FILES: u64 = 0x400;
const CLONE_SIGHAND: u64 = 0x800;
const CLONE_PIDFD: u64 = 0x1000;
const CLONE_PTRACE: u64 = 0x2000;
const CLONE_VFORK: u64 = 0x4000;
const CLONE_PARENT: u64 = 0x8000;
const CLONE_THREAD: u64 = 0x10000;
const CLONE_NEWNS: u64 = 0x20000;
const CLONE_SYSVSEM: u64 = 0x40000;
const CLONE_SETTLS: u64 = 0x80000;
const CLONE_PARENT_SETTID: u64 = 0x0010_0000;
const CLONE_CHILD_CLEARTID: u64 = 0x0020_0000;
const CLONE_DETACHED: u64 = 0x0040_0000;
const CLONE_UNTRACED: u64 = 0x0080_0000;
const CLONE_CHILD_SETTID: u64 = 0x0100_0000;
const CLONE_IO: u64 = 0x8000_0000;
/// Namespace flags (`CLONE_NEWTIME` aside, which clone takes only in
/// `clone3`'s wider flags, and `unshare`).
const CLONE_NEWS: u64 =
    0x0200_0000 | 0x0400_0000 | 0x0800_0000 | 0x1000_0000 | 0x2000_0000 | 0x4000_0000 | CLONE_NEWNS;

/// The sandbox is one namespace of each kind and makes no new ones: it
/// answers `clone` and `unshare` as a kernel built without nested
/// namespaces, `EPERM` without the capability to make one, then `EINVAL`
/// (a user namespace: `EINVAL`).
fn no_new_namespaces(task: &Task, f: u64) -> Result<(), Errno> {
    const CLONE_NEWTIME: u64 = 0x80;
    const CLONE_NEWUSER: u64 = 0x1000_0000;
    if f & CLONE_NEWUSER != 0 {
        return Err(Errno::EINVAL);
    }
    if f & (CLONE_NEWS | CLONE_NEWTIME) != 0 {
        return Err(if task.capable(crate::kernel::auth::cap::SYS_ADMIN) {
            Errno::EINVAL
        } else {
            Errno::EPERM
        });
    }
    Ok(())
}

/// `unshare(2)`: the descriptor table (`CLONE_FILES`) and the working
/// directory, root and umask (`CLONE_FS`) become the caller's own copies;
/// `CLONE_THREAD`, `CLONE_SIGHAND` and `CLONE_VM` are allowed where
/// nothing is shared (`EINVAL` otherwise). The sandbox is one namespace of
/// each kind and makes no new ones.
pub fn sys_unshare(task: &mut Task, a: &super::args::Args) -> Result<u64, Errno> {
    use super::args::SyscallArgs;
    const CLONE_NEWTIME: u64 = 0x80;
    let f = a.u64(0);
    let known = CLONE_THREAD
        | CLONE_FS
        | CLONE_SIGHAND
        | CLONE_VM
        | CLONE_FILES
        | CLONE_SYSVSEM
        | CLONE_NEWS
        | CLONE_NEWTIME;
    if f & !known != 0 {
        return Err(Errno::EINVAL);
    }
    if f & (CLONE_THREAD | CLONE_SIGHAND | CLONE_VM) != 0
        && (task.proc_.state().threads.len() > 1 || task.mm().is_shared())
    {
        return Err(Errno::EINVAL);
    }
    no_new_namespaces(task, f)?;
    if f & CLONE_FILES != 0 && Arc::strong_count(&task.fds) > 1 {
        let own = task.fds().clone();
        task.fds = Arc::new(Mutex::new(own));
    }
    if f & CLONE_FS != 0 && Arc::strong_count(&task.fs) > 1 {
        let own = task.fs_ctx().clone();
        task.fs = Arc::new(Mutex::new(own));
    }
    // /proc/[pid] shows the leader's.
    if task.tid() == task.pid() {
        task.publish_info();
    }
    Ok(0)
}

/// Arguments of the clone family, normalised.
#[derive(Debug, Default)]
pub struct CloneArgs {
    flags: u64,
    exit_signal: i32,
    stack: u64,
    parent_tid: u64,
    child_tid: u64,
    tls: u64,
    /// where `CLONE_PIDFD` stores the child's pidfd
    pidfd: u64,
}

impl Task {
    /// Lets a `vfork` parent go on (the child exec'd or is exiting).
    pub fn vfork_release(&mut self) {
        self.proc_.state().vfork_done = true;
        self.proc_.waiters.notify();
    }
}

fn do_clone(task: &mut Task, args: CloneArgs) -> Result<u64, Errno> {
    let f = args.flags;
    if f & CLONE_THREAD != 0 && f & CLONE_SIGHAND == 0
        || f & CLONE_SIGHAND != 0 && f & CLONE_VM == 0
    {
        return Err(Errno::EINVAL);
    }
    // clone(2): a pidfd names a thread group, and is not given with the
    // legacy CLONE_DETACHED.
    if f & CLONE_PIDFD != 0 && f & (CLONE_THREAD | CLONE_DETACHED) != 0 {
        return Err(Errno::EINVAL);
    }
    no_new_namespaces(task, f)?;
    let _ = (CLONE_PTRACE, CLONE_DETACHED, CLONE_IO);
    if f & CLONE_SYSVSEM != 0 {
        // The undo list to share is made now (copy_semundo).
        task.proc_.state().sem_undo_list = true;
    }
    let kernel = task.kernel.clone();
    let thread_mode = f & CLONE_THREAD != 0;
    // CLONE_VM children share the address space, which needs several
    // guest threads per platform address space; without that, a vfork
    // child gets a copy (it only execs or exits while the parent sleeps).
    let share_vm =
        f & CLONE_VM != 0 && (f & CLONE_VFORK == 0 || kernel.platform.supports_threads());
    if share_vm && !kernel.platform.supports_threads() {
        tracing::warn!("clone with CLONE_VM: this platform cannot run threads yet");
        return Err(Errno::ENOSYS);
    }

    // Everything the child inherits, taken while the parent is stopped.
    let snapshot = if share_vm {
        None
    } else {
        Some(task.mm().fork_copy()?)
    };
    let shared_mm = share_vm.then(|| task.mm.clone());
    let mut regs = task.regs;
    regs.rax = 0;
    if args.stack != 0 {
        regs.rsp = args.stack;
    }
    if f & CLONE_SETTLS != 0 {
        regs.fs_base = args.tls;
    }
    let fds = if f & CLONE_FILES != 0 {
        task.fds.clone()
    } else {
        Arc::new(Mutex::new(task.fds().clone()))
    };
    let fs = if f & CLONE_FS != 0 {
        task.fs.clone()
    } else {
        Arc::new(Mutex::new(task.fs_ctx().clone()))
    };
    let mask = task.sigmask();
    // A new process sharing the address space (vfork) counts only what
    // runs there from now on.
    let vm_cpu = if share_vm {
        task.address_space_cpu()
    } else {
        std::time::Duration::ZERO
    };
    let (proc_, thread) = {
        let mut procs = kernel.procs();
        let id = procs.alloc_pid()?;
        let proc_ = if thread_mode {
            let p = task.proc_.clone();
            if p.state().group_exit.is_some() {
                return Err(Errno::EAGAIN);
            }
            p
        } else {
            let st = task.proc_.state();
            let ppid = if f & CLONE_PARENT != 0 {
                st.ppid
            } else {
                task.pid()
            };
            let p = Process::new(
                id,
                ProcessState::new(ppid, st.pgid, st.sid, args.exit_signal, st.actions),
            );
            {
                let mut ps = p.state();
                ps.info.cmdline = st.info.cmdline.clone();
                ps.info.environ = st.info.environ.clone();
                ps.info.auxv = st.info.auxv.clone();
                ps.as_cpu_start = vm_cpu;
                ps.rlimits = st.rlimits;
                ps.oom_score_adj = st.oom_score_adj;
                ps.oom_score_adj_min = st.oom_score_adj_min;
                ps.ctty = st.ctty.clone();
                ps.dumpable = st.dumpable;
                ps.personality = st.personality;
                // The address space is copied (or shared), and with it
                // its membarrier registrations.
                ps.membarrier = st.membarrier;
            }
            drop(st);
            procs.map.insert(id, p.clone());
            p
        };
        let thread = Thread::new(id, proc_.clone(), mask);
        let (affinity, nice, policy, ioprio, mempolicy) = {
            let t = task.thread.state();
            (t.affinity, t.nice, t.policy, t.ioprio, t.mempolicy)
        };
        {
            // (seen by /proc and capget from the start)
            let mut t = thread.state();
            t.affinity = affinity;
            t.nice = nice;
            t.policy = policy;
            // copy_io(): a priority with a class is inherited.
            t.ioprio = if ioprio >> 13 & 7 != 0 { ioprio } else { 0 };
            // copy_process() duplicates the memory policy.
            t.mempolicy = mempolicy;
            t.caps = task.creds.caps;
            t.no_new_privs = task.no_new_privs;
            t.uid = task.creds.uid;
            t.gid = task.creds.gid;
            t.groups.clone_from(&task.creds.groups);
            t.landlock.clone_from(&task.landlock);
        }
        {
            // Filters are inherited under the process's lock, which a
            // `TSYNC` holds too: a new thread gets either its parent's
            // filters and the sync after, or the synced ones.
            let mut ps = proc_.state();
            let seccomp = task.thread.state().seccomp.clone();
            thread.set_seccomp(&mut thread.state(), seccomp);
            ps.threads.push(thread.clone());
        }
        procs.threads.insert(id, thread.clone());
        (proc_, thread)
    };
    // A traced parent's new child is traced too when the tracer asked for
    // this kind of child; it starts in a stop of its own.
    let event = if f & CLONE_VFORK != 0 {
        ptrace::event::VFORK
    } else if args.exit_signal != SIGCHLD {
        ptrace::event::CLONE
    } else {
        ptrace::event::FORK
    };
    let trace_event = task
        .ptrace_options()
        .filter(|&(_, _, o)| f & CLONE_UNTRACED == 0 && o & (1 << event) != 0)
        .and_then(|(tracer, seized, options)| {
            let tp = kernel.process(tracer)?;
            let mut link = ptrace::Tracee::new(tracer, seized, options);
            link.interrupt = seized;
            let stop =
                (!seized).then(|| crate::kernel::task::user_info(abi::signal::SIGSTOP, 0, 0, 0));
            ptrace::link(&tp, &thread, link, stop);
            Some(event)
        });
    let id = thread.tid;
    // Takes the child out of the tables again when it cannot start.
    let unregister = || {
        proc_.state().threads.retain(|t| t.tid != id);
        let mut procs = kernel.procs();
        procs.threads.remove(&id);
        if !thread_mode {
            procs.map.remove(&id);
        }
    };
    // Linux ignores a parent_tid it cannot write (the child exists by now).
    if f & CLONE_PARENT_SETTID != 0 {
        let _ = task.mm().write_obj(args.parent_tid, &id);
    }
    // Linux stores the pidfd before the child runs, and fails the whole
    // clone (closing the descriptor) when it cannot.
    if f & CLONE_PIDFD != 0 {
        let stored = install_pidfd(task, proc_.clone(), 0).and_then(|fd| {
            task.mm()
                .write_obj(args.pidfd, &(fd as i32))
                .inspect_err(|_| {
                    let _ = task.fds().remove(fd as i64);
                })
        });
        if let Err(e) = stored {
            unregister();
            return Err(e);
        }
    }
    let creds = task.creds.clone();
    let landlock = task.landlock.clone();
    let keyrings = task.keyrings.for_child(f & CLONE_THREAD != 0);
    let (ids, exe, comm, no_new_privs) = (
        task.ids,
        task.exe.clone(),
        task.comm.clone(),
        task.no_new_privs,
    );
    // fork keeps the alternate signal stack; a new thread starts without.
    let altstack = if f & CLONE_VM != 0 {
        crate::kernel::task::no_altstack()
    } else {
        task.altstack
    };
    let child_tid = args.child_tid;
    let flags = f;
    // Every clone starts with the caller's FP state (MXCSR, x87 control,
    // vector registers), as Linux's fpu_clone copies it.
    let parent_fp = task.ctx.fpstate().ok();
    let k = kernel.clone();
    let child_thread = thread.clone();
    // The child's host side (a stub process, a host thread in it) is made
    // on the child's own host thread, which must be the one that traces
    // it; the parent waits for the outcome so that a host out of processes
    // (a pids cgroup limit, say) fails the clone with EAGAIN, as Linux's
    // fork(2) does, instead of starting a child that dies at once.
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<bool>(1);
    let spawn = std::thread::Builder::new()
        .name(format!("task-{id}"))
        .spawn(move || {
            let kernel = k;
            let setup = || -> Result<ChildParts, String> {
                let mm = match (shared_mm, snapshot) {
                    (Some(mm), _) => mm,
                    (None, Some(snap)) => {
                        let space = kernel
                            .platform
                            .new_address_space()
                            .map_err(|e| e.to_string())?;
                        let mm = MemoryManager::from_snapshot(
                            kernel.memory.clone(),
                            space,
                            kernel.platform.max_user_address(),
                            snap,
                        )
                        .map_err(|e| e.to_string())?;
                        Arc::new(Mutex::new(mm))
                    }
                    (None, None) => return Err("no address space".into()),
                };
                let mut ctx = kernel.platform.new_context().map_err(|e| e.to_string())?;
                if let Some(fp) = &parent_fp {
                    ctx.set_fpstate(fp).map_err(|e| e.to_string())?;
                }
                // Out of room for one more thread (the seccomp platform's
                // 1,024 per address space): EAGAIN, as Linux's thread limit.
                let space = mm.locked().address_space();
                space.prepare_thread().map_err(|e| e.to_string())?;
                if share_vm {
                    mm.locked().add_user();
                }
                Ok((mm, ctx))
            };
            let (mm, ctx) = match setup() {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!("clone: task {id} could not start: {e}");
                    let _ = ready_tx.send(false);
                    return;
                }
            };
            // The child's memory is reachable (/proc, process_vm_readv,
            // process_madvise) from the moment fork returns, as on Linux.
            if flags & CLONE_THREAD == 0 {
                child_thread.process.state().info.mm = Arc::downgrade(&mm);
            }
            let _ = ready_tx.send(true);
            child_thread.set_interrupter(Some(ctx.interrupter()));
            let mut child = Task {
                proc_: child_thread.process.clone(),
                thread: child_thread,
                kernel: kernel.clone(),
                regs,
                mm,
                ctx,
                fds,
                fs,
                ids,
                creds,
                keyrings,
                clear_child_tid: if flags & CLONE_CHILD_CLEARTID != 0 {
                    child_tid
                } else {
                    0
                },
                robust_list: (0, 0),
                exe,
                exit: None,
                comm,
                no_new_privs,
                restart: None,
                saved_mask: None,
                nowait: false,
                altstack,
                patch_checked: 0,
                stale_fault: None,
                // (picked up from the thread's state at its first call)
                seccomp_copy: Default::default(),
                landlock,
            };
            if flags & CLONE_CHILD_SETTID != 0 {
                let _ = child.mm().write_obj(child_tid, &id);
            }
            if flags & CLONE_THREAD == 0 {
                child.publish_info();
            }
            child.run_to_exit();
        });
    let started = match spawn {
        Ok(_) => ready_rx.recv().unwrap_or(false),
        Err(e) => {
            tracing::warn!("clone: no host thread: {e}");
            false
        }
    };
    if !started {
        unregister();
        return Err(Errno::EAGAIN);
    }
    if let Some(e) = trace_event {
        task.ptrace_event(e, id as u64);
    }
    if f & CLONE_VFORK != 0 {
        // The parent sleeps until the child execs or exits (the child's
        // queue), or its own group must exit (which wakes its threads).
        let waiter = &task.thread.waiter;
        let _registered = Registration::new(waiter, std::slice::from_ref(&proc_.waiters));
        loop {
            waiter.prepare();
            // One process lock at a time.
            let done = proc_.state().vfork_done;
            if done || task.proc_.state().group_exit.is_some() {
                break;
            }
            waiter.sleep(None);
        }
    }
    Ok(id as u64)
}

/// What a child's host thread builds before it runs the guest.
type ChildParts = (Arc<Mutex<MemoryManager>>, Box<dyn platform::Context>);

pub fn sys_fork(task: &mut Task, _a: &[u64; 6]) -> Result<u64, Errno> {
    do_clone(
        task,
        CloneArgs {
            exit_signal: SIGCHLD,
            ..CloneArgs::default()
        },
    )
}

pub fn sys_vfork(task: &mut Task, _a: &[u64; 6]) -> Result<u64, Errno> {
    do_clone(
        task,
        CloneArgs {
            flags: CLONE_VM | CLONE_VFORK,
            exit_signal: SIGCHLD,
            ..CloneArgs::default()
        },
    )
}

/// `clone(flags, stack, parent_tid, child_tid, tls)` (x86-64 argument order).
pub fn sys_clone(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let exit_signal = (a[0] & 0xff) as i32;
    if exit_signal > 64 {
        return Err(Errno::EINVAL);
    }
    // clone(2) returns the pidfd through `parent_tid`, so it cannot also
    // store the child's ID there.
    if a[0] & CLONE_PIDFD != 0 && a[0] & CLONE_PARENT_SETTID != 0 {
        return Err(Errno::EINVAL);
    }
    do_clone(
        task,
        CloneArgs {
            flags: a[0] & !0xff,
            exit_signal,
            stack: a[1],
            parent_tid: a[2],
            child_tid: a[3],
            tls: a[4],
            pidfd: a[2],
        },
    )
}

/// `clone3(struct clone_args *, size)`.
pub fn sys_clone3(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let size = a[1] as usize;
    if !(64..=4096).contains(&size) {
        return Err(Errno::EINVAL);
    }
    let mut raw = [0u64; 11];
    let n = size.min(88) / 8;
    for (i, w) in raw.iter_mut().enumerate().take(n) {
        *w = task.mm().read_obj(a[0] + 8 * i as u64)?;
    }
    // flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup
    let [flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, _set_tid, set_tid_size, _cgroup] =
        raw;
    if exit_signal > 64 || set_tid_size != 0 || flags & 0xff != 0 {
        return Err(Errno::EINVAL);
    }
    let stack = if stack != 0 { stack + stack_size } else { 0 };
    do_clone(
        task,
        CloneArgs {
            flags,
            exit_signal: exit_signal as i32,
            stack,
            parent_tid,
            child_tid,
            tls,
            pidfd,
        },
    )
}

const WNOHANG: u64 = 1;
const WUNTRACED: u64 = 2;
const WSTOPPED: u64 = 2;
const WEXITED: u64 = 4;
const WCONTINUED: u64 = 8;
const WNOWAIT: u64 = 0x0100_0000;
const WNOTHREAD: u64 = 0x2000_0000;
const WALL: u64 = 0x4000_0000;
const WCLONE: u64 = 0x8000_0000;

/// Which children a wait call selects.
#[derive(Clone, Copy, Debug)]
enum Which {
    Any,
    Pid(i32),
    Pgid(i32),
}

/// What a wait found.
#[derive(Debug)]
struct Found {
    pid: i32,
    code: i32,
    status: i32,
    wstatus: i32,
    /// CPU time of the child and its waited-for children
    cpu: crate::kernel::task::CpuTimes,
}

fn wait_common(
    task: &mut Task,
    which: Which,
    options: u64,
    deadline: Option<Instant>,
) -> Result<Option<Found>, Errno> {
    let me = task.pid();
    let kernel = task.kernel.clone();
    let waiter = task.thread.waiter.clone();
    let chld = [task.proc_.wait_chld.clone()];
    let mut registered = None;
    loop {
        if registered.is_some() {
            waiter.prepare();
        }
        {
            let mut procs = kernel.procs();
            let mut any = false;
            let mut found = None;
            for p in procs.map.values() {
                if p.pid == me {
                    continue;
                }
                let mut st = p.state();
                if st.ppid != me {
                    continue;
                }
                let selected = match which {
                    Which::Any => true,
                    Which::Pid(pid) => p.pid == pid,
                    Which::Pgid(g) => st.pgid == g,
                };
                if !selected {
                    continue;
                }
                any = true;
                if let (Some(status), true) = (st.exit, options & WEXITED != 0) {
                    let (code, s) = match status {
                        ExitStatus::Code(c) => (si::CLD_EXITED, c & 0xff),
                        ExitStatus::Signal(s) => (si::CLD_KILLED, s),
                    };
                    found = Some((
                        Found {
                            pid: p.pid,
                            code,
                            status: s,
                            wstatus: status.wait_status(),
                            cpu: st.cpu + st.children_cpu,
                        },
                        options & WNOWAIT == 0,
                    ));
                    break;
                }
                match st.wait_report {
                    Some(Some(sig)) if options & WSTOPPED != 0 => {
                        if options & WNOWAIT == 0 {
                            st.wait_report = None;
                        }
                        found = Some((
                            Found {
                                pid: p.pid,
                                code: si::CLD_STOPPED,
                                status: sig,
                                wstatus: 0x7f | (sig << 8),
                                cpu: Default::default(),
                            },
                            false,
                        ));
                        break;
                    }
                    Some(None) if options & WCONTINUED != 0 => {
                        if options & WNOWAIT == 0 {
                            st.wait_report = None;
                        }
                        found = Some((
                            Found {
                                pid: p.pid,
                                code: si::CLD_CONTINUED,
                                status: abi::signal::SIGCONT,
                                wstatus: 0xffff,
                                cpu: Default::default(),
                            },
                            false,
                        ));
                        break;
                    }
                    _ => {}
                }
            }
            let found = match found {
                Some(x) => Some(x),
                None => tracee_report(task, which, options, &mut any).map(|f| (f, false)),
            };
            if let Some((f, reap)) = found {
                if reap {
                    procs.map.remove(&f.pid);
                    let mut me = task.proc_.state();
                    me.children_cpu = me.children_cpu + f.cpu;
                    drop(me);
                    drop(procs);
                    // Another thread's wait may have been for this child
                    // (it now finds none, ECHILD).
                    task.proc_.wait_chld.notify();
                }
                return Ok(Some(f));
            }
            if !any {
                return Err(Errno::ECHILD);
            }
        }
        if options & WNOHANG != 0 {
            return Ok(None);
        }
        if task.thread.interrupted() {
            return Err(Errno::ERESTARTSYS);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(None);
        }
        if registered.is_none() {
            // Registered, then looked at again before the first sleep.
            registered = Some(Registration::new(&waiter, &chld));
            continue;
        }
        waiter.sleep(deadline);
    }
}

/// A report of a thread this process traces that `which` selects: a
/// ptrace-stop, or its exit (a traced child process's exit is the child
/// path's to report). Sets `any` when such a tracee exists.
fn tracee_report(task: &Task, which: Which, options: u64, any: &mut bool) -> Option<Found> {
    let me = task.pid();
    let tracees = task.proc_.state().tracees.clone();
    let mut gone = Vec::new();
    let mut found = None;
    for th in &tracees {
        let leader = th.tid == th.process.pid;
        let (ppid, pgid) = {
            let st = th.process.state();
            (st.ppid, st.pgid)
        };
        let selected = match which {
            Which::Any => true,
            Which::Pid(pid) => th.tid == pid,
            Which::Pgid(g) => pgid == g,
        };
        // Other threads than a leader are "clone children": only __WALL
        // and __WCLONE see them.
        if !selected || (!leader && options & (WALL | WCLONE) == 0) {
            continue;
        }
        let mut t = th.state();
        let Some(l) = t.ptrace.as_deref_mut().filter(|l| l.tracer == me) else {
            gone.push(th.tid);
            continue;
        };
        if l.exited && leader && ppid == me {
            // (its parent's wait reports it)
            gone.push(th.tid);
            continue;
        }
        *any = true;
        let Some(ws) = l.report else {
            continue;
        };
        if l.exited {
            if options & WEXITED == 0 {
                continue;
            }
            let (code, status) = if ws & 0x7f == 0 {
                (si::CLD_EXITED, (ws >> 8) & 0xff)
            } else {
                (si::CLD_KILLED, ws & 0x7f)
            };
            if options & WNOWAIT == 0 {
                l.report = None;
                gone.push(th.tid);
            }
            found = Some(Found {
                pid: th.tid,
                code,
                status,
                wstatus: ws,
                cpu: Default::default(),
            });
        } else {
            if options & WNOWAIT == 0 {
                l.report = None;
            }
            found = Some(Found {
                pid: th.tid,
                code: ptrace::CLD_TRAPPED,
                status: (ws >> 8) & 0xff,
                wstatus: ws,
                cpu: Default::default(),
            });
        }
        break;
    }
    if !gone.is_empty() {
        task.proc_
            .state()
            .tracees
            .retain(|t| !gone.contains(&t.tid));
    }
    found
}

/// The `rusage` a wait reports for the child it found.
fn rusage(f: &Found) -> abi::Rusage {
    let mut ru = abi::Rusage::new_zeroed();
    ru.utime = super::process::timeval(f.cpu.user);
    ru.stime = super::process::timeval(f.cpu.sys);
    ru
}

pub fn sys_wait4(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let options = a[2];
    if options & !(WNOHANG | WUNTRACED | WCONTINUED | WNOTHREAD | WALL | WCLONE) != 0 {
        return Err(Errno::EINVAL);
    }
    let pid = a[0] as i32;
    // (before the negation below, which INT_MIN would overflow)
    if pid == i32::MIN {
        return Err(Errno::ESRCH);
    }
    let which = match pid {
        -1 => Which::Any,
        0 => Which::Pgid(task.proc_.state().pgid),
        p if p > 0 => Which::Pid(p),
        p => Which::Pgid(-p),
    };
    match wait_common(
        task,
        which,
        (options & (WNOHANG | WUNTRACED | WCONTINUED | WALL | WCLONE)) | WEXITED,
        None,
    )? {
        Some(f) => {
            if a[1] != 0 {
                task.mm().write_obj(a[1], &f.wstatus)?;
            }
            if a[3] != 0 {
                task.mm().write_obj(a[3], &rusage(&f))?;
            }
            Ok(f.pid as u64)
        }
        None => Ok(0),
    }
}

pub fn sys_waitid(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    const P_ALL: u64 = 0;
    const P_PID: u64 = 1;
    const P_PGID: u64 = 2;
    const P_PIDFD: u64 = 3;
    let mut options = a[3];
    if options & !(WNOHANG | WSTOPPED | WEXITED | WCONTINUED | WNOWAIT | WNOTHREAD | WALL | WCLONE)
        != 0
        || options & (WEXITED | WSTOPPED | WCONTINUED) == 0
    {
        return Err(Errno::EINVAL);
    }
    let which = match a[0] {
        P_ALL => Which::Any,
        P_PID => {
            if (a[1] as i32) <= 0 {
                return Err(Errno::EINVAL);
            }
            Which::Pid(a[1] as i32)
        }
        P_PGID => Which::Pgid(if a[1] as i32 == 0 {
            task.proc_.state().pgid
        } else {
            a[1] as i32
        }),
        P_PIDFD => {
            let file = task.fds().file(a[1] as i32 as i64)?;
            let (target, live) = pidfd_process(task, &file)?;
            // Reaped, its ID perhaps reused: no longer a child to wait for.
            if !live {
                return Err(Errno::ECHILD);
            }
            // waitid(2): a non-blocking pidfd makes the wait for a child
            // that has not changed state fail with EAGAIN.
            if file.nonblocking() && options & WNOHANG == 0 {
                options |= WNOHANG;
                if wait_common(task, Which::Pid(target.pid), options | WNOWAIT, None)?.is_none() {
                    return Err(Errno::EAGAIN);
                }
                options &= !WNOHANG;
            }
            Which::Pid(target.pid)
        }
        _ => return Err(Errno::EINVAL),
    };
    let found = wait_common(task, which, options, None)?;
    if a[2] != 0 {
        let mut info = SigInfo::new_zeroed();
        if let Some(f) = &found {
            info.signo = SIGCHLD;
            info.code = f.code;
            info.fields[0] = (f.pid as u32 as u64) | (u64::from(task.ids.0) << 32);
            info.fields[1] = f.status as u32 as u64;
        }
        task.mm().write_obj(a[2], &info)?;
    }
    if a[4] != 0 {
        let ru = found.as_ref().map_or_else(abi::Rusage::new_zeroed, rusage);
        task.mm().write_obj(a[4], &ru)?;
    }
    Ok(0)
}

/// `PIDFD_NONBLOCK`: `O_NONBLOCK`, the only flag `pidfd_open` takes.
const PIDFD_NONBLOCK: u32 = 0o4000;

/// The process pidfd `file` names (`EBADF` for another kind of file), and
/// whether it is still the live one of its ID (not reaped, its ID not
/// reused).
pub(super) fn pidfd_process(
    task: &Task,
    file: &crate::vfs::file::FileDescription,
) -> Result<(Arc<Process>, bool), Errno> {
    let Some(crate::fsimpl::pidfd::PidFd(target)) = file.downcast() else {
        return Err(Errno::EBADF);
    };
    let live = task
        .kernel
        .process(target.pid)
        .is_some_and(|p| Arc::ptr_eq(&p, target));
    Ok((target.clone(), live))
}

/// Opens a pidfd for `target` (close-on-exec, as every pidfd is);
/// `nonblock` is `0` or `O_NONBLOCK`.
fn install_pidfd(task: &Task, target: Arc<Process>, nonblock: u32) -> Result<u64, Errno> {
    let file = FileDescription::of_impl(
        Arc::new(crate::fsimpl::pidfd::PidFd(target)),
        None,
        OpenFlags::RDWR.bits() | nonblock,
    );
    task.install_fd(file, true)
}

/// `pidfd_getfd(pidfd, targetfd, flags)`: a new descriptor, close-on-exec,
/// for the open file description behind another process's `targetfd`,
/// under the ptrace access check. A zombie's descriptors are gone
/// (`EBADF`); a reaped process is `ESRCH`.
pub fn sys_pidfd_getfd(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    if a[2] as u32 != 0 {
        return Err(Errno::EINVAL);
    }
    let file = task.fds().file(a[0] as i32 as i64)?;
    let (target, live) = pidfd_process(task, &file)?;
    if !live {
        return Err(Errno::ESRCH);
    }
    let leader = target
        .state()
        .threads
        .first()
        .cloned()
        .ok_or(Errno::EBADF)?;
    super::ptrace::may_access(task, &leader)?;
    let theirs = super::kcmp::file_of(&leader, a[1])?;
    task.install_fd(theirs, true)
}

/// `pidfd_open(pid, flags)`: a descriptor for the process `pid`, which
/// must be a thread-group leader (`ENOENT` for another thread: thread
/// pidfds, `PIDFD_THREAD`, are not supported; `ESRCH` once the process has
/// been reaped, while a zombie still has one).
pub fn sys_pidfd_open(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let (pid, flags) = (a[0] as i32, a[1] as u32);
    if flags & !PIDFD_NONBLOCK != 0 || pid <= 0 {
        return Err(Errno::EINVAL);
    }
    let target = {
        let procs = task.kernel.procs();
        match procs.map.get(&pid) {
            Some(p) => p.clone(),
            // Linux 6.9 and later (older kernels said EINVAL).
            None if procs.threads.contains_key(&pid) => return Err(Errno::ENOENT),
            None => return Err(Errno::ESRCH),
        }
    };
    install_pidfd(task, target, flags & PIDFD_NONBLOCK)
}
