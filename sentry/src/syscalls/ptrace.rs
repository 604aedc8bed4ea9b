//! `ptrace(2)` requests and `process_vm_readv`/`writev`: a tracer reads and
//! changes a stopped tracee through the copy its stop published (see
//! `kernel::ptrace`).

use crate::kernel::ptrace::user_regs as words;
use std::sync::{Arc, Mutex};

use abi::signal::SIGSTOP;
use abi::{Errno, SigInfo};
use platform::Regs;

use super::args::{Args, SyscallArgs};
use crate::kernel::auth::cap;
use crate::kernel::ptrace::{self, opt, How, Resume, StopKind, Tracee};
use crate::kernel::task::{user_info, Task, Thread};
use crate::mm::MemoryManager;
use crate::sync::Locked;

const TRACEME: u64 = 0;
const PEEKTEXT: u64 = 1;
const PEEKDATA: u64 = 2;
const PEEKUSR: u64 = 3;
const POKETEXT: u64 = 4;
const POKEDATA: u64 = 5;
const POKEUSR: u64 = 6;
const CONT: u64 = 7;
const KILL: u64 = 8;
const SINGLESTEP: u64 = 9;
const GETREGS: u64 = 12;
const SETREGS: u64 = 13;
const GETFPREGS: u64 = 14;
const SETFPREGS: u64 = 15;
const ATTACH: u64 = 16;
const DETACH: u64 = 17;
const SYSCALL: u64 = 24;
const SETOPTIONS: u64 = 0x4200;
const GETEVENTMSG: u64 = 0x4201;
const GETSIGINFO: u64 = 0x4202;
const SETSIGINFO: u64 = 0x4203;
const GETREGSET: u64 = 0x4204;
const SETREGSET: u64 = 0x4205;
const SEIZE: u64 = 0x4206;
const INTERRUPT: u64 = 0x4207;
const LISTEN: u64 = 0x4208;
const GET_SYSCALL_INFO: u64 = 0x420e;

/// `NT_PRSTATUS`, `NT_PRFPREG`, `NT_X86_XSTATE`: register sets.
const NT_PRSTATUS: u64 = 1;
const NT_PRFPREG: u64 = 2;
const NT_X86_XSTATE: u64 = 0x202;
/// `offsetof(struct user, u_debugreg)` and the size of `struct user`.
const USER_DEBUGREG: u64 = 848;
const USER_SIZE: u64 = USER_DEBUGREG + 8 * 8;
/// `AUDIT_ARCH_X86_64`.
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// The flags a tracer may change in `eflags` (Linux's `FLAG_MASK`).
const FLAG_MASK: u64 = 0x1
    | 0x4
    | 0x10
    | 0x40
    | 0x80
    | 0x100
    | 0x400
    | 0x800
    | 0x4000
    | 0x1_0000
    | 0x4_0000
    | 0x20_0000;
const REGS_SIZE: usize = std::mem::size_of::<Regs>();

/// `ptrace(request, pid, addr, data)`.
pub fn sys_ptrace(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (req, pid, addr, data) = (a.u64(0), a.fd(1), a.ptr(2), a.u64(3));
    match req {
        TRACEME => traceme(task),
        ATTACH | SEIZE => attach(task, pid, req == SEIZE, addr, data),
        _ => {
            let th = tracee(task, pid)?;
            request(task, &th, req, addr, data)
        }
    }
}

/// `PTRACE_TRACEME`: the parent becomes the tracer.
fn traceme(task: &mut Task) -> Result<u64, Errno> {
    let ppid = task.proc_.state().ppid;
    let parent = task.kernel.process(ppid).ok_or(Errno::EPERM)?;
    if task.thread.state().ptrace.is_some() {
        return Err(Errno::EPERM);
    }
    // A tracer in a Landlock domain may trace only its own or nested ones.
    let leader = parent.state().threads.first().cloned();
    let theirs = leader.and_then(|t| t.state().landlock.clone());
    if theirs.is_some_and(|d| !d.is_ancestor_of(task.landlock.as_ref())) {
        return Err(Errno::EPERM);
    }
    ptrace::link(&parent, &task.thread, Tracee::new(ppid, false, 0), None);
    Ok(0)
}

/// `PTRACE_ATTACH` (which stops the tracee with `SIGSTOP`) and
/// `PTRACE_SEIZE` (which does not; `data` holds its options).
fn attach(task: &mut Task, pid: i32, seize: bool, addr: u64, data: u64) -> Result<u64, Errno> {
    if seize && (addr != 0 || data & !u64::from(opt::ALL) != 0) {
        return Err(Errno::EIO);
    }
    let th = task.kernel.thread(pid).ok_or(Errno::ESRCH)?;
    if th.process.pid == task.pid() {
        return Err(Errno::EPERM);
    }
    may_access(task, &th)?;
    {
        let t = th.state();
        if t.ptrace.is_some() || t.exiting {
            return Err(Errno::EPERM);
        }
    }
    let options = if seize { data as u32 } else { 0 };
    let link = Tracee::new(task.pid(), seize, options);
    let stop = (!seize).then(|| user_info(SIGSTOP, task.pid(), task.creds.uid[0], 0));
    ptrace::link(&task.proc_, &th, link, stop);
    th.waiter.wake();
    th.interrupt();
    Ok(0)
}

/// Linux's "ptrace access mode" check: the target is of the caller's own
/// process, or the caller's real user is the target's every user and the
/// target is dumpable, or the caller has `CAP_SYS_PTRACE`; and then a
/// caller in a Landlock domain reaches only threads in that domain or one
/// nested in it (landlock(7)), capability or not.
pub(crate) fn may_access(task: &Task, th: &Thread) -> Result<(), Errno> {
    if Arc::ptr_eq(&th.process, &task.proc_) {
        return Ok(());
    }
    if !task.capable(cap::SYS_PTRACE) {
        let dumpable = th.process.state().dumpable;
        let t = th.state();
        let me = task.creds.uid[0];
        if !dumpable || !t.uid[..3].iter().all(|&u| u == me) {
            return Err(Errno::EPERM);
        }
    }
    if let Some(d) = &task.landlock {
        if !d.is_ancestor_of(th.state().landlock.as_ref()) {
            return Err(Errno::EPERM);
        }
    }
    Ok(())
}

/// [`may_access`] for process `p`, by its leader (`ESRCH` once it has no
/// thread left).
pub(crate) fn may_access_process(
    task: &Task,
    p: &crate::kernel::task::Process,
) -> Result<(), Errno> {
    let leader = p.state().threads.first().cloned().ok_or(Errno::ESRCH)?;
    may_access(task, &leader)
}

/// The thread `pid` this task traces (`ESRCH` for any other).
fn tracee(task: &Task, pid: i32) -> Result<Arc<Thread>, Errno> {
    let me = task.pid();
    task.proc_
        .state()
        .tracees
        .iter()
        .find(|t| t.tid == pid)
        .filter(|t| {
            t.state()
                .ptrace
                .as_deref()
                .is_some_and(|l| l.tracer == me && !l.exited)
        })
        .cloned()
        .ok_or(Errno::ESRCH)
}

/// The tracee's address space, while it is stopped.
fn tracee_mm(th: &Thread) -> Result<Arc<Mutex<MemoryManager>>, Errno> {
    th.process.state().info.mm.upgrade().ok_or(Errno::ESRCH)
}

fn request(
    task: &mut Task,
    th: &Arc<Thread>,
    req: u64,
    addr: u64,
    data: u64,
) -> Result<u64, Errno> {
    // Requests that need no stop.
    match req {
        KILL => {
            th.process.send_signal(
                &task.kernel,
                abi::signal::SIGKILL,
                user_info(abi::signal::SIGKILL, task.pid(), task.creds.uid[0], 0),
            );
            return Ok(0);
        }
        INTERRUPT => {
            let mut t = th.state();
            let l = t.ptrace.as_deref_mut().ok_or(Errno::ESRCH)?;
            if !l.seized {
                return Err(Errno::EIO);
            }
            if l.stopped.is_none() {
                l.interrupt = true;
            }
            drop(t);
            th.waiter.wake();
            th.interrupt();
            return Ok(0);
        }
        _ => {}
    }
    let mut t = th.state();
    let l = t
        .ptrace
        .as_deref_mut()
        .filter(|l| l.stopped.is_some())
        .ok_or(Errno::ESRCH)?;
    match req {
        PEEKTEXT | PEEKDATA => {
            drop(t);
            let mut word = [0u8; 8];
            tracee_mm(th)?
                .locked()
                .peek(addr, &mut word)
                .map_err(|_| Errno::EIO)?;
            task.mm().copy_out(data, &word)?;
            Ok(0)
        }
        POKETEXT | POKEDATA => {
            drop(t);
            let mm = tracee_mm(th)?;
            let mm = mm.locked();
            // Linux's FOLL_FORCE: a read-only private page gets a copy, but
            // a shared mapping that could never be writable (a file opened
            // read-only) is not written through.
            let end = addr.checked_add(7).ok_or(Errno::EIO)?;
            if [addr, end]
                .iter()
                .any(|&a| mm.find_vma(a).is_some_and(|v| v.shared && !v.may_write))
            {
                return Err(Errno::EIO);
            }
            mm.poke(addr, &data.to_ne_bytes()).map_err(|_| Errno::EIO)?;
            Ok(0)
        }
        PEEKUSR => {
            if !addr.is_multiple_of(8) || addr >= USER_SIZE {
                return Err(Errno::EIO);
            }
            let v = if (addr as usize) < REGS_SIZE {
                words(&l.regs)[addr as usize / 8]
            } else if addr >= USER_DEBUGREG {
                match (addr - USER_DEBUGREG) / 8 {
                    n @ (0..=3 | 7) => l.debugreg[n as usize],
                    // The bits Linux reports as always set.
                    6 => l.debugreg[6] | DR6_RESERVED,
                    _ => 0,
                }
            } else {
                0
            };
            drop(t);
            task.mm().write_obj(data, &v)?;
            Ok(0)
        }
        POKEUSR => {
            if !addr.is_multiple_of(8) || addr >= USER_SIZE {
                return Err(Errno::EIO);
            }
            if (addr as usize) < REGS_SIZE {
                let mut w = words(&l.regs);
                w[addr as usize / 8] = data;
                l.regs = checked_regs(&l.regs, from_words(&w))?;
                return Ok(0);
            }
            if addr < USER_DEBUGREG {
                return Ok(0);
            }
            set_debugreg(&mut l.debugreg, ((addr - USER_DEBUGREG) / 8) as usize, data)?;
            Ok(0)
        }
        GETREGS => {
            let regs = l.regs;
            drop(t);
            task.mm().copy_out(data, &regs_bytes(&regs))?;
            Ok(0)
        }
        SETREGS => {
            let old = l.regs;
            drop(t);
            let mut b = [0u8; REGS_SIZE];
            task.mm().copy_in(data, &mut b)?;
            let new = checked_regs(&old, regs_from_bytes(&old, &b))?;
            set_regs(th, new);
            Ok(0)
        }
        GETFPREGS => {
            let fp = fxsave(&l.fp);
            drop(t);
            task.mm().copy_out(data, &fp)?;
            Ok(0)
        }
        SETFPREGS => {
            drop(t);
            let mut fp = [0u8; 512];
            task.mm().copy_in(data, &mut fp)?;
            set_fp(th, &fp);
            Ok(0)
        }
        GETREGSET | SETREGSET => {
            drop(t);
            regset(task, th, req == SETREGSET, addr, data)
        }
        SETOPTIONS => {
            if data & !u64::from(opt::ALL) != 0 {
                return Err(Errno::EINVAL);
            }
            l.options = data as u32;
            Ok(0)
        }
        GETEVENTMSG => {
            let msg = l.event_msg;
            drop(t);
            task.mm().write_obj(data, &msg)?;
            Ok(0)
        }
        GETSIGINFO => {
            if l.stopped != Some(StopKind::Signal) {
                return Err(Errno::EINVAL);
            }
            let info = l.siginfo;
            drop(t);
            task.mm().write_obj(data, &info)?;
            Ok(0)
        }
        SETSIGINFO => {
            if l.stopped != Some(StopKind::Signal) {
                return Err(Errno::EINVAL);
            }
            drop(t);
            let info: SigInfo = task.mm().read_obj(data)?;
            if let Some(l) = th.state().ptrace.as_deref_mut() {
                l.siginfo = info;
            }
            Ok(0)
        }
        GET_SYSCALL_INFO => {
            let (kind, regs) = (l.stopped, l.regs);
            drop(t);
            syscall_info(task, kind, &regs, addr, data)
        }
        CONT | SYSCALL | SINGLESTEP | DETACH | LISTEN => {
            if data > 64 {
                return Err(Errno::EIO);
            }
            let how = match req {
                CONT => How::Cont,
                SYSCALL => How::Syscall,
                SINGLESTEP => How::Step,
                DETACH => How::Detach,
                _ => {
                    if !l.seized || !matches!(l.stopped, Some(StopKind::Event | StopKind::Group)) {
                        return Err(Errno::EIO);
                    }
                    How::Listen
                }
            };
            l.resume = Some(Resume {
                how,
                sig: data as i32,
            });
            l.report = None;
            drop(t);
            if how == How::Detach {
                task.proc_.state().tracees.retain(|x| !Arc::ptr_eq(x, th));
            }
            th.waiter.wake();
            Ok(0)
        }
        _ => Err(Errno::EIO),
    }
}

/// [`words`] back into registers.
fn from_words(w: &[u64; 27]) -> Regs {
    let [r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8, rax, rcx, rdx, rsi, rdi, orig_rax, rip, cs, eflags, rsp, ss, fs_base, gs_base, ds, es, fs, gs] =
        *w;
    Regs {
        r15,
        r14,
        r13,
        r12,
        rbp,
        rbx,
        r11,
        r10,
        r9,
        r8,
        rax,
        rcx,
        rdx,
        rsi,
        rdi,
        orig_rax,
        rip,
        cs,
        eflags,
        rsp,
        ss,
        fs_base,
        gs_base,
        ds,
        es,
        fs,
        gs,
    }
}

/// The registers as `struct user_regs_struct`'s bytes.
fn regs_bytes(r: &Regs) -> Vec<u8> {
    words(r).iter().flat_map(|w| w.to_ne_bytes()).collect()
}

/// Registers from (a prefix of) `struct user_regs_struct`'s bytes over
/// `old`.
fn regs_from_bytes(old: &Regs, b: &[u8]) -> Regs {
    let mut w = words(old);
    for (i, c) in b.chunks_exact(8).enumerate().take(27) {
        w[i] = u64::from_ne_bytes(c.try_into().unwrap_or_default());
    }
    from_words(&w)
}

/// The registers a tracer set, with what it may not change kept: the
/// segment selectors, the privileged flags, a non-canonical base.
fn checked_regs(old: &Regs, mut new: Regs) -> Result<Regs, Errno> {
    const USER_TOP: u64 = 1 << 47;
    if new.fs_base >= USER_TOP || new.gs_base >= USER_TOP {
        return Err(Errno::EIO);
    }
    new.cs = old.cs;
    new.ss = old.ss;
    new.ds = old.ds;
    new.es = old.es;
    new.fs = old.fs;
    new.gs = old.gs;
    new.eflags = (old.eflags & !FLAG_MASK) | (new.eflags & FLAG_MASK);
    Ok(new)
}

fn set_regs(th: &Thread, regs: Regs) {
    if let Some(l) = th.state().ptrace.as_deref_mut() {
        l.regs = regs;
    }
}

/// The `FXSAVE` part of a saved floating-point state.
fn fxsave(fp: &[u8]) -> [u8; 512] {
    let mut out = [0u8; 512];
    let n = fp.len().min(512);
    out[..n].copy_from_slice(&fp[..n]);
    out
}

/// Replaces the first `new.len()` bytes of the tracee's floating-point
/// state (the `FXSAVE` part, or all of an `XSAVE` area).
fn set_fp(th: &Thread, new: &[u8]) {
    if let Some(l) = th.state().ptrace.as_deref_mut() {
        if l.fp.len() < new.len() {
            l.fp.resize(new.len(), 0);
        }
        l.fp[..new.len()].copy_from_slice(new);
        // MXCSR's reserved bits would fault the restore.
        if l.fp.len() >= 28 {
            let mut m = u32::from_ne_bytes(l.fp[24..28].try_into().unwrap_or_default());
            m &= 0xffff;
            l.fp[24..28].copy_from_slice(&m.to_ne_bytes());
        }
        l.fp_changed = true;
    }
}

/// DR6 bits that read as 1.
const DR6_RESERVED: u64 = 0xffff_0ff0;

/// A tracer's write of debug register `n`, checked as Linux checks the
/// breakpoints it would make of it (see [`crate::kernel::ptrace::Watch`]
/// for how they fire).
fn set_debugreg(dr: &mut [u64; 8], n: usize, v: u64) -> Result<(), Errno> {
    // The highest user address (Linux's TASK_SIZE_MAX).
    const TOP: u64 = 0x7fff_ffff_f000;
    match n {
        0..=3 => {
            if v >= TOP {
                return Err(Errno::EINVAL);
            }
            dr[n] = v;
        }
        6 => dr[6] = v & !DR6_RESERVED,
        7 => {
            for (i, rw, len) in crate::kernel::ptrace::dr7_slots(v) {
                // I/O breakpoints do not exist; an execute breakpoint is
                // one byte; a watched range is aligned to its length.
                let bad = rw == 2
                    || (rw == 0 && len != 1)
                    || !dr[i].is_multiple_of(len as u64)
                    || dr[i] + len as u64 > TOP;
                if bad {
                    return Err(Errno::EINVAL);
                }
            }
            dr[7] = v;
        }
        _ => return Err(Errno::EIO),
    }
    Ok(())
}

/// `PTRACE_GETREGSET`/`SETREGSET` with an `iovec` at `iov`.
fn regset(task: &mut Task, th: &Thread, set: bool, kind: u64, iov: u64) -> Result<u64, Errno> {
    // One statement each: two `mm()` guards in one expression deadlock.
    let base: u64 = task.mm().read_obj(iov)?;
    let len: u64 = task.mm().read_obj(iov + 8)?;
    let (regs, fp) = {
        let t = th.state();
        let l = t.ptrace.as_deref().ok_or(Errno::ESRCH)?;
        (l.regs, l.fp.clone())
    };
    let mut bytes = match kind {
        NT_PRSTATUS => regs_bytes(&regs),
        NT_PRFPREG => fxsave(&fp).to_vec(),
        // Bytes 464..472 of the area are the software's: Linux puts XCR0
        // there, and debuggers read the register layout from it.
        NT_X86_XSTATE if fp.len() > 512 => {
            let mut x = fp;
            x[464..472].copy_from_slice(&crate::host::xcr0().to_ne_bytes());
            x
        }
        _ => return Err(Errno::EINVAL),
    };
    let n = (len as usize).min(bytes.len());
    if set {
        task.mm().copy_in(base, &mut bytes[..n])?;
        match kind {
            NT_PRSTATUS => {
                let new = regs_from_bytes(&regs, &bytes[..n]);
                set_regs(th, checked_regs(&regs, new)?);
            }
            _ => set_fp(th, &bytes[..n]),
        }
    } else {
        task.mm().copy_out(base, &bytes[..n])?;
    }
    task.mm().write_obj(iov + 8, &(n as u64))?;
    Ok(0)
}

/// `PTRACE_GET_SYSCALL_INFO`: what the stop is, in `struct
/// ptrace_syscall_info`; returns the size Linux fills.
fn syscall_info(
    task: &Task,
    kind: Option<StopKind>,
    r: &Regs,
    size: u64,
    buf: u64,
) -> Result<u64, Errno> {
    let mut out = [0u8; 88];
    let (op, len): (u8, usize) = match kind {
        Some(StopKind::SyscallEnter) => (1, 80),
        Some(StopKind::SyscallExit) => (2, 33),
        _ => (0, 24),
    };
    out[0] = op;
    out[4..8].copy_from_slice(&AUDIT_ARCH_X86_64.to_ne_bytes());
    out[8..16].copy_from_slice(&r.rip.to_ne_bytes());
    out[16..24].copy_from_slice(&r.rsp.to_ne_bytes());
    match op {
        1 => {
            out[24..32].copy_from_slice(&r.orig_rax.to_ne_bytes());
            for (i, v) in r.syscall_args().iter().enumerate() {
                out[32 + 8 * i..40 + 8 * i].copy_from_slice(&v.to_ne_bytes());
            }
        }
        2 => {
            let rval = r.rax as i64;
            out[24..32].copy_from_slice(&rval.to_ne_bytes());
            out[32] = u8::from((-4095..0).contains(&rval));
        }
        _ => {}
    }
    let n = (size as usize).min(len);
    task.mm().copy_out(buf, &out[..n])?;
    Ok(len as u64)
}

/// `process_vm_readv` and `process_vm_writev`: copies between this
/// process's memory and another's, under the ptrace access check.
fn process_vm(task: &mut Task, a: &Args, write: bool) -> Result<u64, Errno> {
    let (pid, liov, lcnt, riov, rcnt, flags) =
        (a.fd(0), a.ptr(1), a.u64(2), a.ptr(3), a.u64(4), a.u64(5));
    if flags != 0 || lcnt > 1024 || rcnt > 1024 {
        return Err(Errno::EINVAL);
    }
    let target = task.kernel.process(pid).ok_or(Errno::ESRCH)?;
    may_access_process(task, &target)?;
    let read_iovs = |task: &Task, at: u64, n: u64| -> Result<Vec<(u64, u64)>, Errno> {
        (0..n)
            .map(|i| {
                let base: u64 = task.mm().read_obj(at + 16 * i)?;
                let len: u64 = task.mm().read_obj(at + 16 * i + 8)?;
                Ok((base, len))
            })
            .collect()
    };
    let local = read_iovs(task, liov, lcnt)?;
    let remote = read_iovs(task, riov, rcnt)?;
    let total: u64 = local.iter().map(|&(_, l)| l).sum::<u64>().min(1 << 30);
    let mut buf = vec![0u8; total as usize];
    let other = target.state().info.mm.upgrade().ok_or(Errno::ESRCH)?;
    let same = Arc::ptr_eq(&other, &task.mm);
    if write {
        let mut at = 0usize;
        for &(base, len) in &local {
            let n = (len as usize).min(buf.len() - at);
            task.mm().copy_in(base, &mut buf[at..at + n])?;
            at += n;
        }
    }
    // Remote pieces, as far as they go: a partial transfer stops at the
    // first piece that faults.
    let mut done = 0usize;
    {
        let guard;
        let mm: &MemoryManager = if same {
            guard = task.mm.locked();
            &guard
        } else {
            guard = other.locked();
            &guard
        };
        for &(base, len) in &remote {
            let n = (len as usize).min(buf.len() - done);
            if n == 0 {
                break;
            }
            let r = if write {
                mm.copy_out(base, &buf[done..done + n])
            } else {
                mm.copy_in(base, &mut buf[done..done + n])
            };
            if r.is_err() {
                if done == 0 {
                    return Err(Errno::EFAULT);
                }
                break;
            }
            done += n;
        }
    }
    if !write {
        let mut at = 0usize;
        for &(base, len) in &local {
            let n = (len as usize).min(done - at);
            task.mm().copy_out(base, &buf[at..at + n])?;
            at += n;
            if at == done {
                break;
            }
        }
    }
    Ok(done as u64)
}

pub fn sys_process_vm_readv(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    process_vm(task, a, false)
}

pub fn sys_process_vm_writev(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    process_vm(task, a, true)
}
