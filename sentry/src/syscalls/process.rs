//! Process identity, limits, `execve`, `exit`, and other per-task calls. The
//! sandbox holds one process today, PID 1 in its own numbering.

use abi::landlock::access;
use abi::{Errno, Rlimit, Rusage, Tms, Utsname};
use zerocopy::FromZeros;

use super::args::{Args, SyscallArgs};
use super::path_arg;
use crate::kernel::auth::cap;
use crate::kernel::task::{ExitStatus, Task};
use crate::loader::{self, ExecRequest};
use crate::sync::Locked;

pub fn sys_exit(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    task.exit(ExitStatus::Code(a.i32(0) & 0xff))
}

pub fn sys_exit_group(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    task.exit_group(ExitStatus::Code(a.i32(0) & 0xff))
}

pub fn sys_gettid(task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    Ok(task.tid() as u64)
}

pub fn sys_getpid(task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    Ok(task.pid() as u64)
}

/// The first process's parent is outside the sandbox, so it reads as 0, as
/// for init in a PID namespace.
pub fn sys_getppid(task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    Ok(task.proc_.state().ppid as u64)
}

fn target(task: &Task, pid: i32) -> Result<std::sync::Arc<crate::kernel::task::Process>, Errno> {
    if pid == 0 || pid == task.pid() {
        return Ok(task.proc_.clone());
    }
    if pid < 0 {
        return Err(Errno::ESRCH);
    }
    task.kernel
        .process(pid)
        .filter(|p| p.state().exit.is_none())
        .ok_or(Errno::ESRCH)
}

/// Whether `pid` names the caller: 0, its process, or its own thread ID
/// (the scheduling and robust-list calls take a thread ID; glibc's
/// `pthread_getattr_np` asks `sched_getaffinity` about the calling thread
/// by its TID, which the JVM does for every thread it starts).
fn is_self(task: &Task, pid: i32) -> bool {
    pid == 0 || pid == task.pid() || pid == task.tid()
}

pub fn sys_getpgid(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    Ok(target(task, a.i32(0))?.state().pgid as u64)
}

pub fn sys_getpgrp(task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    Ok(task.proc_.state().pgid as u64)
}

pub fn sys_getsid(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    Ok(target(task, a.i32(0))?.state().sid as u64)
}

pub fn sys_setpgid(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let pgid = a.i32(1);
    if pgid < 0 {
        return Err(Errno::EINVAL);
    }
    let me = task.pid();
    let t = target(task, a.i32(0))?;
    let my_sid = task.proc_.state().sid;
    if t.pid != me {
        let st = t.state();
        if st.ppid != me {
            return Err(Errno::ESRCH);
        }
        if st.sid != my_sid {
            return Err(Errno::EPERM);
        }
        if st.did_exec {
            return Err(Errno::EACCES);
        }
    }
    let pgid = if pgid == 0 { t.pid } else { pgid };
    {
        let st = t.state();
        if st.sid == t.pid {
            // A session leader cannot change its group.
            return Err(Errno::EPERM);
        }
    }
    if pgid != t.pid {
        // Joining a group needs a member in the caller's session.
        let procs = task.kernel.procs();
        let ok = procs.map.values().any(|p| {
            let st = p.state();
            st.exit.is_none() && st.pgid == pgid && st.sid == my_sid
        });
        if !ok {
            return Err(Errno::EPERM);
        }
    }
    t.state().pgid = pgid;
    Ok(0)
}

/// `vhangup(2)`: with `CAP_SYS_TTY_CONFIG`, the caller's controlling
/// terminal (if it has one) is hung up for every description open on it,
/// as a modem's carrier loss would (`login` and `getty` call it before
/// giving the terminal to the next user).
pub fn sys_vhangup(task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    if !task.capable(cap::SYS_TTY_CONFIG) {
        return Err(Errno::EPERM);
    }
    let ctty = task.proc_.state().ctty.clone();
    if let Some(pty) = ctty.as_ref().and_then(crate::fsimpl::devpts::Pty::of) {
        pty.vhangup();
    }
    Ok(0)
}

pub fn sys_setsid(task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    let me = task.pid();
    let leader = task
        .kernel
        .procs()
        .map
        .values()
        .any(|p| p.pid != me && p.state().pgid == me);
    let mut st = task.proc_.state();
    if st.pgid == me || leader {
        return Err(Errno::EPERM);
    }
    st.pgid = me;
    st.sid = me;
    // A new session starts without a controlling terminal.
    st.ctty = None;
    Ok(me as u64)
}

pub fn sys_getuid(task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    Ok(task.creds.uid[0].into())
}

pub fn sys_geteuid(task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    Ok(task.creds.uid[1].into())
}

pub fn sys_getgid(task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    Ok(task.creds.gid[0].into())
}

pub fn sys_getegid(task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    Ok(task.creds.gid[1].into())
}

fn write_three(task: &Task, a: &Args, v: [u32; 3]) -> Result<u64, Errno> {
    for (p, x) in [a.ptr(0), a.ptr(1), a.ptr(2)].into_iter().zip(v) {
        task.mm().write_obj(p, &x)?;
    }
    Ok(0)
}

pub fn sys_getresuid(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let u = task.creds.uid;
    write_three(task, a, [u[0], u[1], u[2]])
}

pub fn sys_getresgid(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let g = task.creds.gid;
    write_three(task, a, [g[0], g[1], g[2]])
}

pub fn sys_getgroups(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (size, list) = (a.i32(0), a.ptr(1));
    if size < 0 {
        return Err(Errno::EINVAL);
    }
    let groups = task.creds.groups.clone();
    if size == 0 {
        return Ok(groups.len() as u64);
    }
    if (size as usize) < groups.len() {
        return Err(Errno::EINVAL);
    }
    for (i, g) in groups.iter().enumerate() {
        task.mm().write_obj(list + 4 * i as u64, g)?;
    }
    Ok(groups.len() as u64)
}

/// Set-id calls (credentials(7)): a task with `CAP_SETUID` (`CAP_SETGID`
/// for group ids) may take any id; others may only move between their
/// real, effective and saved ids. `ids` = `[real, effective, saved, fs]`.
fn set_ids(
    ids: &mut [u32; 4],
    privileged: bool,
    r: Option<u32>,
    e: Option<u32>,
    sv: Option<u32>,
    classic: bool,
) -> Result<(), Errno> {
    let old = *ids;
    let allowed = |x: u32| privileged || x == old[0] || x == old[1] || x == old[2];
    for x in [r, e, sv].into_iter().flatten() {
        if !allowed(x) {
            return Err(Errno::EPERM);
        }
    }
    if let Some(x) = r {
        ids[0] = x;
    }
    if let Some(x) = e {
        ids[1] = x;
    }
    match sv {
        Some(x) => ids[2] = x,
        // setreuid: the saved id follows the effective one when the real
        // id is set or the effective one changes to a non-real value.
        None if classic && (r.is_some() || e.is_some_and(|x| x != old[0])) => ids[2] = ids[1],
        None => {}
    }
    ids[3] = ids[1];
    Ok(())
}

fn id_arg(v: u32) -> Option<u32> {
    (v != u32::MAX).then_some(v)
}

/// The ids new files get and permission checks use: the file-system ones.
/// A change of the effective or file-system ids leaves the process
/// undumpable (Linux's `commit_creds`, with `suid_dumpable` 0): what the
/// old ids could read must not be inspected by the new ones.
fn sync_ids(task: &mut Task) {
    task.ids = (task.creds.uid[3], task.creds.gid[3]);
    let (uid, gid) = {
        let t = task.thread.state();
        (t.uid, t.gid)
    };
    let (new_uid, new_gid) = (task.creds.uid, task.creds.gid);
    if uid[1] != new_uid[1] || uid[3] != new_uid[3] || gid[1] != new_gid[1] || gid[3] != new_gid[3]
    {
        task.proc_.state().dumpable = false;
    }
    task.publish_privileges();
}

/// After a change of user ids from `old`: what it does to the
/// capabilities, shown to /proc.
fn uids_changed(task: &mut Task, old: [u32; 4]) {
    if task.creds.uid != old {
        task.creds.fix_caps_after_uid_change(old);
        task.publish_privileges();
    }
}

pub fn sys_setuid(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let uid = id_arg(a.u32(0)).ok_or(Errno::EINVAL)?;
    let privileged = task.capable(cap::SETUID);
    let old = task.creds.uid;
    if privileged {
        task.creds.uid = [uid; 4];
    } else {
        set_ids(&mut task.creds.uid, false, None, Some(uid), None, false)?;
    }
    sync_ids(task);
    uids_changed(task, old);
    Ok(0)
}

pub fn sys_setgid(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let gid = id_arg(a.u32(0)).ok_or(Errno::EINVAL)?;
    if task.capable(cap::SETGID) {
        task.creds.gid = [gid; 4];
    } else {
        set_ids(&mut task.creds.gid, false, None, Some(gid), None, false)?;
    }
    sync_ids(task);
    Ok(0)
}

/// The real/effective/saved IDs of `setre[ug]id` and `setres[ug]id`
/// (`re`: the saved ID follows the effective one as `setre*id` says).
fn change_ids(task: &mut Task, group: bool, ids: [Option<u32>; 3], re: bool) -> Result<u64, Errno> {
    let privileged = task.capable(if group { cap::SETGID } else { cap::SETUID });
    let old = task.creds.uid;
    let set = if group {
        &mut task.creds.gid
    } else {
        &mut task.creds.uid
    };
    set_ids(set, privileged, ids[0], ids[1], ids[2], re)?;
    sync_ids(task);
    uids_changed(task, old);
    Ok(0)
}

pub fn sys_setreuid(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    change_ids(
        task,
        false,
        [id_arg(a.u32(0)), id_arg(a.u32(1)), None],
        true,
    )
}

pub fn sys_setregid(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    change_ids(task, true, [id_arg(a.u32(0)), id_arg(a.u32(1)), None], true)
}

pub fn sys_setresuid(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let ids = [id_arg(a.u32(0)), id_arg(a.u32(1)), id_arg(a.u32(2))];
    change_ids(task, false, ids, false)
}

pub fn sys_setresgid(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let ids = [id_arg(a.u32(0)), id_arg(a.u32(1)), id_arg(a.u32(2))];
    change_ids(task, true, ids, false)
}

pub fn sys_setfsuid(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let before = task.creds.uid;
    let old = before[3];
    // -1 is no user id: the call only reports the current one (the C
    // library's way to read it).
    let u = a.u32(0);
    if u != u32::MAX && (task.capable(cap::SETUID) || task.creds.uid.contains(&u)) {
        task.creds.uid[3] = u;
    }
    sync_ids(task);
    uids_changed(task, before);
    Ok(old.into())
}

pub fn sys_setfsgid(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let old = task.creds.gid[3];
    let g = a.u32(0);
    if g != u32::MAX && (task.capable(cap::SETGID) || task.creds.gid.contains(&g)) {
        task.creds.gid[3] = g;
    }
    sync_ids(task);
    Ok(old.into())
}

/// `setgroups(2)`: `CAP_SETGID` is checked before the size.
pub fn sys_setgroups(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    if !task.capable(cap::SETGID) {
        return Err(Errno::EPERM);
    }
    let (n, list) = (a.i32(0), a.ptr(1));
    if !(0..=65536).contains(&n) {
        return Err(Errno::EINVAL);
    }
    let mut v = Vec::with_capacity(n as usize);
    for i in 0..n as u64 {
        v.push(task.mm().read_obj::<u32>(list + 4 * i)?);
    }
    // Kept sorted, as Linux keeps them (getgroups and /proc list them so).
    v.sort_unstable();
    task.creds.groups = v;
    task.publish_privileges();
    Ok(0)
}

fn field<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut f = [0u8; N];
    let n = s.len().min(N - 1);
    f[..n].copy_from_slice(&s[..n]);
    f
}

/// `sethostname(2)` and `setdomainname(2)`: `CAP_SYS_ADMIN` first, then
/// the length (at most 64 bytes); the names are the sandbox's own.
fn set_uts_name(task: &mut Task, a: &Args, domain: bool) -> Result<u64, Errno> {
    if !task.capable(cap::SYS_ADMIN) {
        return Err(Errno::EPERM);
    }
    let len = a.i32(1);
    if !(0..=64).contains(&len) {
        return Err(Errno::EINVAL);
    }
    let mut name = vec![0u8; len as usize];
    task.mm().copy_in(a.ptr(0), &mut name)?;
    let mut uts = task.kernel.uts();
    if domain {
        uts.domain = name;
    } else {
        uts.host = name;
    }
    Ok(0)
}

pub fn sys_sethostname(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    set_uts_name(task, a, false)
}

pub fn sys_setdomainname(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    set_uts_name(task, a, true)
}

pub fn sys_uname(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let mut u = Utsname::new_zeroed();
    u.sysname = field(b"Linux");
    let uts = task.kernel.uts();
    u.nodename = field(&uts.host);
    u.domainname = field(&uts.domain);
    drop(uts);
    u.release = field(crate::kernel::UTS_RELEASE.as_bytes());
    u.version = field(crate::kernel::UTS_VERSION.as_bytes());
    u.machine = field(b"x86_64");
    task.mm().write_obj(a.ptr(0), &u).map(|()| 0)
}

fn rlimit_index(res: u32) -> Result<usize, Errno> {
    let i = res as usize;
    if i >= abi::rlimit::RLIM_NLIMITS {
        return Err(Errno::EINVAL);
    }
    Ok(i)
}

pub fn sys_getrlimit(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let i = rlimit_index(a.u32(0))?;
    let r = task.proc_.state().rlimits[i];
    task.mm().write_obj(a.ptr(1), &r).map(|()| 0)
}

/// `setrlimit(2)`: `prlimit64` of the caller with no old value wanted
/// (x86-64's `struct rlimit` is `struct rlimit64`).
pub fn sys_setrlimit(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    sys_prlimit64(task, &[0, a[0], a[1], 0, 0, 0])
}

pub fn sys_prlimit64(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (pid, new_rlim, old_rlim) = (a.i32(0), a.ptr(2), a.ptr(3));
    let target = if is_self(task, pid) {
        task.proc_.clone()
    } else {
        // Another process of the sandbox (all of its processes run with
        // the sandbox's one set of credentials).
        task.kernel
            .process(pid)
            .filter(|p| p.state().exit.is_none())
            .ok_or(Errno::ESRCH)?
    };
    let i = rlimit_index(a.u32(1))?;
    let new: Option<Rlimit> = if new_rlim != 0 {
        Some(task.mm().read_obj(new_rlim)?)
    } else {
        None
    };
    let old = target.state().rlimits[i];
    if let Some(n) = &new {
        if n.cur > n.max {
            return Err(Errno::EINVAL);
        }
        if n.max > old.max && !task.capable(cap::SYS_RESOURCE) {
            return Err(Errno::EPERM);
        }
        if i == abi::rlimit::RLIMIT_NOFILE as usize && n.max > 1 << 20 {
            return Err(Errno::EPERM);
        }
    }
    if old_rlim != 0 {
        task.mm().write_obj(old_rlim, &old)?;
    }
    if let Some(n) = new {
        target.state().rlimits[i] = n;
    }
    Ok(0)
}

pub fn sys_getrusage(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let who = a.i32(0);
    if !matches!(who, -1..=1) {
        return Err(Errno::EINVAL);
    }
    const RUSAGE_CHILDREN: i32 = -1;
    let mut ru = Rusage::new_zeroed();
    let cpu = if who == RUSAGE_CHILDREN {
        task.proc_.state().children_cpu
    } else {
        task.cpu_times()
    };
    ru.utime = timeval(cpu.user);
    ru.stime = timeval(cpu.sys);
    // Peak resident size is approximated by the mapped private memory.
    let kib: u64 = task
        .mm()
        .vmas()
        .filter(|v| v.prot.write && !v.shared)
        .map(|v| v.end - v.start)
        .sum::<u64>()
        / 1024;
    ru.rest[0] = kib.max(1) as i64;
    task.mm().write_obj(a.ptr(1), &ru).map(|()| 0)
}

/// A duration as a `timeval`.
pub fn timeval(d: std::time::Duration) -> abi::Timeval {
    abi::Timeval {
        tv_sec: d.as_secs() as i64,
        tv_usec: i64::from(d.subsec_micros()),
    }
}

pub fn sys_times(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let buf = a.ptr(0);
    if buf != 0 {
        // Clock ticks at USER_HZ (100 per second).
        let ticks = |d: std::time::Duration| (d.as_millis() / 10) as i64;
        let me = task.cpu_times();
        let kids = task.proc_.state().children_cpu;
        let mut t = Tms::new_zeroed();
        t.utime = ticks(me.user);
        t.stime = ticks(me.sys);
        t.cutime = ticks(kids.user);
        t.cstime = ticks(kids.sys);
        task.mm().write_obj(buf, &t)?;
    }
    let t = crate::host::clock_gettime(libc::CLOCK_BOOTTIME)?;
    Ok((t.tv_sec * 100 + t.tv_nsec / 10_000_000) as u64)
}

pub fn sys_sysinfo(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let mut s = abi::Sysinfo::new_zeroed();
    let up = crate::host::clock_gettime(libc::CLOCK_BOOTTIME)?;
    s.uptime = up.tv_sec;
    s.totalram = task.kernel.total_memory();
    s.freeram = s.totalram / 2;
    s.procs = 1;
    s.mem_unit = 1;
    task.mm().write_obj(a.ptr(0), &s).map(|()| 0)
}

pub fn sys_sched_yield(_task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    std::thread::yield_now();
    Ok(0)
}

pub fn sys_sched_getaffinity(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    if !is_self(task, a.i32(0)) {
        return Err(Errno::ESRCH);
    }
    let len = a.usize(1);
    let cpus = task.kernel.cpus.max(1);
    let need = cpus.div_ceil(64) * 8;
    if len < need || !len.is_multiple_of(8) {
        return Err(Errno::EINVAL);
    }
    let mut mask = vec![0u8; need];
    let allowed = task.thread.state().affinity;
    for c in 0..cpus {
        if allowed == 0 || (c < 64 && allowed & (1 << c) != 0) {
            mask[c / 8] |= 1 << (c % 8);
        }
    }
    task.mm().copy_out(a.ptr(2), &mask)?;
    Ok(need as u64)
}

pub fn sys_sched_setaffinity(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    if !is_self(task, a.i32(0)) {
        return Err(Errno::ESRCH);
    }
    let mut b = vec![0u8; a.usize(1).min(128)];
    task.mm().copy_in(a.ptr(2), &mut b)?;
    // Only the sandbox's CPUs count; a mask without any of them is invalid.
    let cpus = task.kernel.cpus.clamp(1, 64);
    let mut want = 0u64;
    for c in 0..cpus.min(b.len() * 8) {
        if b[c / 8] & (1 << (c % 8)) != 0 {
            want |= 1 << c;
        }
    }
    if want == 0 {
        return Err(Errno::EINVAL);
    }
    let all = if cpus == 64 {
        u64::MAX
    } else {
        (1 << cpus) - 1
    };
    task.thread.state().affinity = if want == all { 0 } else { want };
    Ok(0)
}

pub fn sys_sched_getparam(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    if !is_self(task, a.i32(0)) {
        return Err(Errno::ESRCH);
    }
    task.mm().write_obj(a.ptr(1), &0i32).map(|()| 0)
}

/// `personality(2)`: returns the old persona; `0xffffffff` only asks.
/// Linux checks nothing; the sandbox runs every persona as Linux's (its
/// flags are kept for programs that read them back, as `setarch` does),
/// and `ADDR_NO_RANDOMIZE` fixes the next `execve`'s layout.
pub fn sys_personality(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let new = a.u64(0) as u32;
    let mut st = task.proc_.state();
    let old = st.personality;
    if new != u32::MAX {
        st.personality = new;
    }
    Ok(u64::from(old))
}

/// `sched_rr_get_interval(2)`: every task is SCHED_OTHER here, whose
/// interval Linux gives as the scheduler's current slice; 4 ms stands for
/// it.
pub fn sys_sched_rr_get_interval(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    if a.i32(0) < 0 {
        return Err(Errno::EINVAL);
    }
    if !is_self(task, a.i32(0)) {
        return Err(Errno::ESRCH);
    }
    let slice = abi::Timespec {
        tv_sec: 0,
        tv_nsec: 4_000_000,
    };
    task.mm().write_obj(a.ptr(1), &slice).map(|()| 0)
}

/// The thread `tid` names for the scheduling calls (0: the caller).
fn sched_target(
    task: &Task,
    tid: i32,
) -> Result<std::sync::Arc<crate::kernel::task::Thread>, Errno> {
    if tid == 0 || tid == task.tid() {
        return Ok(task.thread.clone());
    }
    task.kernel.thread(tid).ok_or(Errno::ESRCH)
}

/// Whether the caller may change `th`'s scheduling: its own, one of its
/// effective user's, or with `CAP_SYS_NICE` (Linux's `set_one_prio_perm`).
fn may_reschedule(task: &Task, th: &crate::kernel::task::Thread) -> bool {
    let euid = task.creds.uid[1];
    let t = th.state();
    euid == t.uid[0] || euid == t.uid[1] || task.capable(cap::SYS_NICE)
}

/// `sched_setscheduler(2)` and `sched_setparam(2)` (`policy` `None`: keep
/// it): SCHED_OTHER, SCHED_BATCH and SCHED_IDLE at priority 0, kept per
/// thread (the host scheduler is not asked); no real-time policy is
/// granted (EPERM, as to a caller without `CAP_SYS_NICE`), nor leaving
/// SCHED_IDLE without it (`RLIMIT_NICE` is 0).
fn set_scheduler(task: &mut Task, pid: i32, policy: Option<i32>, param: u64) -> Result<u64, Errno> {
    if pid < 0 || param == 0 {
        return Err(Errno::EINVAL);
    }
    let prio: i32 = task.mm().read_obj(param)?;
    let th = sched_target(task, pid)?;
    // (SCHED_RESET_ON_FORK may be or-ed in)
    let policy = match (policy.map(|p| p & !0x4000_0000), prio) {
        (None, 0) => return Ok(0),
        (Some(p @ (0 | 3 | 5)), 0) => p as u8,
        (Some(1 | 2), 1..=99) => return Err(Errno::EPERM),
        _ => return Err(Errno::EINVAL),
    };
    if !may_reschedule(task, &th) {
        return Err(Errno::EPERM);
    }
    let mut t = th.state();
    if t.policy == 5 && policy != 5 && !task.capable(cap::SYS_NICE) {
        return Err(Errno::EPERM);
    }
    t.policy = policy;
    Ok(0)
}

/// `struct sched_attr`'s first version (`SCHED_ATTR_SIZE_VER0`) and the
/// one with utilisation clamps, which is what Linux fills.
const SCHED_ATTR_VER0: u32 = 48;
const SCHED_ATTR_SIZE: u32 = 56;
const SCHED_FLAG_KEEP_POLICY: u64 = 8;
const SCHED_FLAG_KEEP_PARAMS: u64 = 0x10;
const SCHED_FLAG_ALL: u64 = 0x7f;

/// `sched_getattr(2)`: policy and nice value (utilisation clamps as
/// unclamped: 0 and 1024).
pub fn sys_sched_getattr(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (pid, addr, size) = (a.i32(0), a.ptr(1), a.u64(2));
    if pid < 0 || addr == 0 || a.u64(3) != 0 || size < u64::from(SCHED_ATTR_VER0) || size > 4096 {
        return Err(Errno::EINVAL);
    }
    let th = sched_target(task, pid)?;
    let (policy, nice) = {
        let t = th.state();
        (t.policy, t.nice)
    };
    let n = SCHED_ATTR_SIZE.min(size as u32);
    let mut b = [0u8; SCHED_ATTR_SIZE as usize];
    b[0..4].copy_from_slice(&n.to_ne_bytes());
    b[4..8].copy_from_slice(&u32::from(policy).to_ne_bytes());
    b[16..20].copy_from_slice(&i32::from(nice).to_ne_bytes());
    b[52..56].copy_from_slice(&1024u32.to_ne_bytes());
    task.mm().copy_out(addr, &b[..n as usize])?;
    Ok(0)
}

/// `sched_setattr(2)`: a fair policy with its nice value, as
/// [`set_scheduler`] and `setpriority` allow them.
pub fn sys_sched_setattr(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (pid, addr) = (a.i32(0), a.ptr(1));
    if pid < 0 || addr == 0 || a.u64(2) != 0 {
        return Err(Errno::EINVAL);
    }
    let mut size: u32 = task.mm().read_obj(addr)?;
    if size == 0 {
        size = SCHED_ATTR_VER0;
    }
    // Too short, too long, or longer than known with bytes set past it:
    // E2BIG, the known size written back (`sched_copy_attr`).
    let mut b = vec![0u8; size.clamp(SCHED_ATTR_VER0, 4096) as usize];
    let too_big = !(SCHED_ATTR_VER0..=4096).contains(&size) || {
        task.mm().copy_in(addr, &mut b)?;
        b.get(SCHED_ATTR_SIZE as usize..)
            .is_some_and(|r| r.iter().any(|&x| x != 0))
    };
    if too_big {
        task.mm().write_obj(addr, &SCHED_ATTR_SIZE)?;
        return Err(Errno::E2BIG);
    }
    let word = |at: usize| u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    // (Linux clamps the nice value it is given)
    let (policy, nice, prio) = (word(4), (word(16) as i32).clamp(-20, 19), word(20));
    let flags = u64::from(word(8)) | u64::from(word(12)) << 32;
    if flags & !SCHED_FLAG_ALL != 0 {
        return Err(Errno::EINVAL);
    }
    let th = sched_target(task, pid)?;
    let keep_policy = flags & SCHED_FLAG_KEEP_POLICY != 0;
    let policy = match (keep_policy, policy, prio) {
        (true, ..) => th.state().policy,
        (false, p @ (0 | 3 | 5), 0) => p as u8,
        (false, 1 | 2, 1..=99) | (false, 6, 0) => return Err(Errno::EPERM),
        _ => return Err(Errno::EINVAL),
    };
    if !may_reschedule(task, &th) {
        return Err(Errno::EPERM);
    }
    let mut t = th.state();
    // Only the fair policies (OTHER, BATCH) have a nice value.
    let keep_nice = flags & SCHED_FLAG_KEEP_PARAMS != 0 || policy == 5;
    let privileged = task.capable(cap::SYS_NICE);
    if (!keep_nice && (nice as i8) < t.nice || t.policy == 5 && policy != 5) && !privileged {
        return Err(Errno::EPERM);
    }
    t.policy = policy;
    if !keep_nice {
        t.nice = nice as i8;
    }
    Ok(0)
}

pub fn sys_sched_setscheduler(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    set_scheduler(task, a.i32(0), Some(a.i32(1)), a.ptr(2))
}

pub fn sys_sched_setparam(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    set_scheduler(task, a.i32(0), None, a.ptr(1))
}

pub fn sys_sched_get_priority_max(_task: &mut Task, a: &Args) -> Result<u64, Errno> {
    match a.i32(0) {
        0 | 3 | 5 | 6 => Ok(0),
        1 | 2 => Ok(99),
        _ => Err(Errno::EINVAL),
    }
}

pub fn sys_sched_get_priority_min(_task: &mut Task, a: &Args) -> Result<u64, Errno> {
    match a.i32(0) {
        0 | 3 | 5 | 6 => Ok(0),
        1 | 2 => Ok(1),
        _ => Err(Errno::EINVAL),
    }
}

pub fn sys_sched_getscheduler(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    if a.i32(0) < 0 {
        return Err(Errno::EINVAL);
    }
    let th = sched_target(task, a.i32(0))?;
    let policy = th.state().policy;
    Ok(u64::from(policy))
}

/// The threads `which`/`who` name for `getpriority`/`setpriority`: a
/// thread (PRIO_PROCESS), a process group's (PRIO_PGRP) or a real user's
/// (PRIO_USER) threads.
fn prio_targets(
    task: &Task,
    which: u64,
    who: i32,
) -> Result<Vec<std::sync::Arc<crate::kernel::task::Thread>>, Errno> {
    let all = || {
        task.kernel
            .procs()
            .threads
            .values()
            .cloned()
            .collect::<Vec<_>>()
    };
    let found: Vec<_> = match which {
        0 => return sched_target(task, who).map(|t| vec![t]),
        1 => {
            let pgid = if who == 0 {
                task.proc_.state().pgid
            } else {
                who
            };
            all()
                .into_iter()
                .filter(|t| t.process.state().pgid == pgid)
                .collect()
        }
        2 => {
            let uid = if who == 0 {
                task.creds.uid[0]
            } else {
                who as u32
            };
            all()
                .into_iter()
                .filter(|t| t.state().uid[0] == uid)
                .collect()
        }
        _ => return Err(Errno::EINVAL),
    };
    if found.is_empty() {
        return Err(Errno::ESRCH);
    }
    Ok(found)
}

/// `getpriority(2)`: the highest priority (lowest nice) of the targets,
/// as the raw call reports it (20 - nice).
pub fn sys_getpriority(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let targets = prio_targets(task, a.u64(0), a.i32(1))?;
    let nice = targets.iter().map(|t| t.state().nice).min().unwrap_or(0);
    Ok((20 - i64::from(nice)) as u64)
}

/// `setpriority(2)`: the nice value, clamped to -20..=19, of each target
/// the caller may change; lowering it needs `CAP_SYS_NICE` (with
/// `RLIMIT_NICE` at its default of 0). Kept per thread and shown in /proc;
/// the host scheduler is not asked.
pub fn sys_setpriority(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let targets = prio_targets(task, a.u64(0), a.i32(1))?;
    let nice = a.i32(2).clamp(-20, 19) as i8;
    let mut r = Ok(0);
    for th in targets {
        if !may_reschedule(task, &th) {
            r = Err(Errno::EPERM);
            continue;
        }
        let mut t = th.state();
        if nice < t.nice && !task.capable(cap::SYS_NICE) {
            r = Err(Errno::EACCES);
            continue;
        }
        t.nice = nice;
    }
    r
}

pub fn sys_getcpu(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (cpu, node) = (a.ptr(0), a.ptr(1));
    if cpu != 0 {
        task.mm().write_obj(cpu, &0u32)?;
    }
    if node != 0 {
        task.mm().write_obj(node, &0u32)?;
    }
    Ok(0)
}

pub fn sys_getrandom(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    const GRND_NONBLOCK: u64 = 1;
    const GRND_RANDOM: u64 = 2;
    const GRND_INSECURE: u64 = 4;
    let flags = a.u64(2);
    if flags & !(GRND_NONBLOCK | GRND_RANDOM | GRND_INSECURE) != 0
        || flags & (GRND_RANDOM | GRND_INSECURE) == (GRND_RANDOM | GRND_INSECURE)
    {
        return Err(Errno::EINVAL);
    }
    let len = a.usize(1).min(32 << 20);
    if len == 0 {
        return Ok(0);
    }
    // Filled a piece at a time: the Sentry never holds the guest's length.
    let bufs = task.mm().slices(a.ptr(0), len as u64, true)?;
    crate::vfs::file::fill_random(&crate::mm::guestio::GuestBufs::new(&bufs));
    Ok(len as u64)
}

pub fn sys_set_tid_address(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    task.clear_child_tid = a.ptr(0);
    Ok(task.tid() as u64)
}

pub fn sys_set_robust_list(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (head, len) = (a.ptr(0), a.u64(1));
    if len != std::mem::size_of::<abi::RobustListHead>() as u64 {
        return Err(Errno::EINVAL);
    }
    task.robust_list = (head, len);
    Ok(0)
}

pub fn sys_get_robust_list(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    if !is_self(task, a.i32(0)) {
        return Err(Errno::ESRCH);
    }
    task.mm().write_obj(a.ptr(1), &task.robust_list.0)?;
    task.mm().write_obj(a.ptr(2), &task.robust_list.1)?;
    Ok(0)
}

pub fn sys_arch_prctl(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    const ARCH_SET_GS: u64 = 0x1001;
    const ARCH_SET_FS: u64 = 0x1002;
    const ARCH_GET_FS: u64 = 0x1003;
    const ARCH_GET_GS: u64 = 0x1004;
    const ARCH_GET_CPUID: u64 = 0x1011;
    const ARCH_SET_CPUID: u64 = 0x1012;
    // Only canonical user addresses can be segment bases.
    let canonical = |v: u64| v < (1 << 47);
    // `addr` is a base to set or where to store one.
    let (code, addr) = (a.u64(0), a.u64(1));
    match code {
        ARCH_SET_FS => {
            if !canonical(addr) {
                return Err(Errno::EPERM);
            }
            task.regs.fs_base = addr;
            Ok(0)
        }
        ARCH_SET_GS => {
            if !canonical(addr) {
                return Err(Errno::EPERM);
            }
            task.regs.gs_base = addr;
            Ok(0)
        }
        ARCH_GET_FS => task.mm().write_obj(addr, &task.regs.fs_base).map(|()| 0),
        ARCH_GET_GS => task.mm().write_obj(addr, &task.regs.gs_base).map(|()| 0),
        ARCH_GET_CPUID => Ok(1),
        ARCH_SET_CPUID => Err(Errno::ENODEV),
        _ => Err(Errno::EINVAL),
    }
}

pub fn sys_prctl(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    const PR_SET_PDEATHSIG: u64 = 1;
    const PR_GET_PDEATHSIG: u64 = 2;
    const PR_GET_DUMPABLE: u64 = 3;
    const PR_SET_DUMPABLE: u64 = 4;
    const PR_SET_NAME: u64 = 15;
    const PR_GET_NAME: u64 = 16;
    const PR_GET_NO_NEW_PRIVS: u64 = 39;
    const PR_SET_NO_NEW_PRIVS: u64 = 38;
    const PR_SET_CHILD_SUBREAPER: u64 = 36;
    const PR_GET_CHILD_SUBREAPER: u64 = 37;
    const PR_CAPBSET_READ: u64 = 23;
    const PR_CAPBSET_DROP: u64 = 24;
    const PR_CAP_AMBIENT: u64 = 47;
    const PR_GET_KEEPCAPS: u64 = 7;
    const PR_SET_KEEPCAPS: u64 = 8;
    const PR_GET_SECUREBITS: u64 = 27;
    const PR_SET_SECUREBITS: u64 = 28;
    const PR_GET_SECCOMP: u64 = 21;
    const PR_SET_SECCOMP: u64 = 22;
    use crate::kernel::auth::secbit;
    let (option, arg2, arg3, arg4, arg5) = (a.u64(0), a.u64(1), a.u64(2), a.u64(3), a.u64(4));
    match option {
        PR_GET_KEEPCAPS => Ok(u64::from(task.creds.secure(secbit::KEEP_CAPS))),
        PR_SET_KEEPCAPS => {
            if arg2 > 1 {
                return Err(Errno::EINVAL);
            }
            // (a locked bit cannot even be set to the value it has)
            if task.creds.secure(secbit::KEEP_CAPS << 1) {
                return Err(Errno::EPERM);
            }
            if arg2 == 1 {
                task.creds.securebits |= secbit::KEEP_CAPS;
            } else {
                task.creds.securebits &= !secbit::KEEP_CAPS;
            }
            Ok(0)
        }
        PR_GET_SECUREBITS => Ok(task.creds.securebits.into()),
        PR_SET_SECUREBITS => {
            // Linux's cap_task_prctl: no change of a locked bit, no
            // unlocking, no unknown bit, and nothing without CAP_SETPCAP.
            let old = task.creds.securebits;
            let new = arg2;
            let locks = old & secbit::ALL_LOCKS;
            if u64::from(locks >> 1) & (u64::from(old) ^ new) != 0
                || u64::from(locks) & !new != 0
                || new & !u64::from(secbit::ALL_BITS | secbit::ALL_LOCKS) != 0
                || !task.capable(crate::kernel::auth::CAP_SETPCAP)
            {
                return Err(Errno::EPERM);
            }
            task.creds.securebits = new as u32;
            Ok(0)
        }
        PR_CAPBSET_READ => {
            let bit = cap_bit(arg2)?;
            Ok(u64::from(task.creds.caps.bounding & bit != 0))
        }
        PR_CAPBSET_DROP => {
            let bit = cap_bit(arg2)?;
            if !task.capable(crate::kernel::auth::CAP_SETPCAP) {
                return Err(Errno::EPERM);
            }
            task.creds.caps.bounding &= !bit;
            task.publish_privileges();
            Ok(0)
        }
        PR_CAP_AMBIENT => cap_ambient(task, a),
        PR_SET_NAME => {
            // The name may end before a page that is not mapped.
            let name = task.mm().read_cstr(arg2, 15);
            let name = match name {
                Ok(n) => n,
                Err(Errno::ENAMETOOLONG) => {
                    let mut b = vec![0u8; 15];
                    task.mm().copy_in(arg2, &mut b)?;
                    b
                }
                Err(e) => return Err(e),
            };
            task.comm = name;
            if task.tid() == task.pid() {
                task.publish_info();
            }
            Ok(0)
        }
        PR_GET_NAME => {
            let mut name = [0u8; 16];
            name[..task.comm.len().min(15)].copy_from_slice(&task.comm[..task.comm.len().min(15)]);
            task.mm().copy_out(arg2, &name).map(|()| 0)
        }
        PR_SET_PDEATHSIG => {
            if arg2 > 64 {
                return Err(Errno::EINVAL);
            }
            task.proc_.state().pdeathsig = arg2 as i32;
            Ok(0)
        }
        PR_GET_PDEATHSIG => {
            let sig = task.proc_.state().pdeathsig;
            task.mm().write_obj(arg2, &sig).map(|()| 0)
        }
        PR_GET_DUMPABLE => Ok(u64::from(task.proc_.state().dumpable)),
        PR_SET_DUMPABLE => {
            if arg2 > 1 {
                return Err(Errno::EINVAL);
            }
            task.proc_.state().dumpable = arg2 == 1;
            Ok(0)
        }
        PR_SET_NO_NEW_PRIVS => {
            if arg2 != 1 || arg3 != 0 || arg4 != 0 || arg5 != 0 {
                return Err(Errno::EINVAL);
            }
            task.no_new_privs = true;
            task.publish_privileges();
            Ok(0)
        }
        PR_GET_NO_NEW_PRIVS => Ok(u64::from(task.no_new_privs)),
        PR_GET_SECCOMP => super::seccomp::prctl_get_seccomp(task),
        PR_SET_SECCOMP => super::seccomp::prctl_set_seccomp(task, arg2, arg3),
        PR_SET_CHILD_SUBREAPER => {
            task.proc_.state().child_subreaper = arg2 != 0;
            Ok(0)
        }
        PR_GET_CHILD_SUBREAPER => {
            let on = i32::from(task.proc_.state().child_subreaper);
            task.mm().write_obj(arg2, &on).map(|()| 0)
        }
        _ => Err(Errno::EINVAL),
    }
}

/// The bit of capability `cap`; `EINVAL` past the last one.
fn cap_bit(cap: u64) -> Result<u64, Errno> {
    if cap > u64::from(crate::kernel::auth::CAP_LAST_CAP) {
        return Err(Errno::EINVAL);
    }
    Ok(1 << cap)
}

/// `prctl(PR_CAP_AMBIENT, op, cap, 0, 0)` (prctl(2)): a capability may
/// join the ambient set only when it is permitted and inheritable, and not
/// under `SECBIT_NO_CAP_AMBIENT_RAISE`.
fn cap_ambient(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    const IS_SET: u64 = 1;
    const RAISE: u64 = 2;
    const LOWER: u64 = 3;
    const CLEAR_ALL: u64 = 4;
    let no_raise = task
        .creds
        .secure(crate::kernel::auth::secbit::NO_CAP_AMBIENT_RAISE);
    let (op, which, arg4, arg5) = (a.u64(1), a.u64(2), a.u64(3), a.u64(4));
    let caps = &mut task.creds.caps;
    if op == CLEAR_ALL {
        if which | arg4 | arg5 != 0 {
            return Err(Errno::EINVAL);
        }
        caps.ambient = 0;
        task.publish_privileges();
        return Ok(0);
    }
    let bit = cap_bit(which)?;
    if arg4 | arg5 != 0 {
        return Err(Errno::EINVAL);
    }
    match op {
        IS_SET => return Ok(u64::from(caps.ambient & bit != 0)),
        RAISE => {
            if caps.permitted & caps.inheritable & bit == 0 || no_raise {
                return Err(Errno::EPERM);
            }
            caps.ambient |= bit;
        }
        LOWER => caps.ambient &= !bit,
        _ => return Err(Errno::EINVAL),
    }
    task.publish_privileges();
    Ok(0)
}

/// `_LINUX_CAPABILITY_VERSION_1`: 32 capabilities per set.
const CAP_VERSION_1: u32 = 0x1998_0330;
/// `_LINUX_CAPABILITY_VERSION_2` (deprecated) and `_3`: 64 per set.
const CAP_VERSION_2: u32 = 0x2007_1026;
const CAP_VERSION_3: u32 = 0x2008_0522;

/// How many data structs the header's version asks for; an unknown
/// version is answered with the preferred one written back and `EINVAL`
/// (capget(2)).
fn cap_version(task: &Task, header: u64) -> Result<(usize, i32), Errno> {
    let h: abi::CapUserHeader = task.mm().read_obj(header)?;
    match h.version {
        CAP_VERSION_1 => Ok((1, h.pid)),
        CAP_VERSION_2 | CAP_VERSION_3 => Ok((2, h.pid)),
        _ => {
            task.mm().write_obj(header, &CAP_VERSION_3)?;
            Err(Errno::EINVAL)
        }
    }
}

/// `capget(2)`: a thread's effective, permitted and inheritable sets.
pub fn sys_capget(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (header, data) = (a.ptr(0), a.ptr(1));
    let (n, pid) = match cap_version(task, header) {
        // (a probe for the version: no data pointer, no error)
        Err(Errno::EINVAL) if data == 0 => return Ok(0),
        r => r?,
    };
    if data == 0 {
        return Ok(0);
    }
    if pid < 0 {
        return Err(Errno::EINVAL);
    }
    let caps = if pid == 0 || pid == task.tid() {
        task.creds.caps
    } else {
        let thread = task.kernel.thread(pid);
        let thread = thread.ok_or(Errno::ESRCH)?;
        let caps = thread.state().caps;
        caps
    };
    for i in 0..n {
        let word = |set: u64| (set >> (32 * i)) as u32;
        let words = abi::CapUserData {
            effective: word(caps.effective),
            permitted: word(caps.permitted),
            inheritable: word(caps.inheritable),
        };
        task.mm().write_obj(data + 12 * i as u64, &words)?;
    }
    Ok(0)
}

/// `capset(2)`: the calling thread's own sets only. Nothing is gained:
/// the permitted set may only shrink, the effective one stays within it,
/// and the inheritable one within the bounding set (and, without
/// `CAP_SETPCAP`, within the old permitted set).
pub fn sys_capset(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (header, data) = (a.ptr(0), a.ptr(1));
    let (n, pid) = cap_version(task, header)?;
    if pid != 0 && pid != task.tid() {
        return Err(Errno::EPERM);
    }
    let (mut eff, mut prm, mut inh) = (0u64, 0u64, 0u64);
    for i in 0..n {
        let d: abi::CapUserData = task.mm().read_obj(data + 12 * i as u64)?;
        eff |= u64::from(d.effective) << (32 * i);
        prm |= u64::from(d.permitted) << (32 * i);
        inh |= u64::from(d.inheritable) << (32 * i);
    }
    let all = crate::kernel::auth::CAP_FULL_SET;
    let (eff, prm, inh) = (eff & all, prm & all, inh & all);
    let old = task.creds.caps;
    if !old.has(crate::kernel::auth::CAP_SETPCAP) && inh & !(old.inheritable | old.permitted) != 0 {
        return Err(Errno::EPERM);
    }
    if inh & !(old.inheritable | old.bounding) != 0 || prm & !old.permitted != 0 || eff & !prm != 0
    {
        return Err(Errno::EPERM);
    }
    task.creds.caps = crate::kernel::auth::CapSets {
        effective: eff,
        permitted: prm,
        inheritable: inh,
        ..old
    }
    .trim_ambient();
    task.publish_privileges();
    Ok(0)
}

/// `sync(2)`: what shared mappings of volume files hold goes to the host
/// (the host's own caches are the host's business).
pub fn sys_sync(task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    for cache in task.kernel.fs.page_caches.all() {
        if let Err(e) = cache.writeback(None) {
            tracing::debug!("sync: writeback failed: {e:?}");
        }
    }
    Ok(0)
}

/// `futex(2)`: the operations glibc and other runtimes use.
pub fn sys_futex(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    const FUTEX_WAIT: u64 = 0;
    const FUTEX_WAKE: u64 = 1;
    const FUTEX_REQUEUE: u64 = 3;
    const FUTEX_CMP_REQUEUE: u64 = 4;
    const FUTEX_WAKE_OP: u64 = 5;
    const FUTEX_WAIT_BITSET: u64 = 9;
    const FUTEX_WAKE_BITSET: u64 = 10;
    const FUTEX_LOCK_PI: u64 = 6;
    const FUTEX_UNLOCK_PI: u64 = 7;
    const FUTEX_TRYLOCK_PI: u64 = 8;
    const FUTEX_LOCK_PI2: u64 = 13;
    const FUTEX_CLOCK_REALTIME: u64 = 256;
    // `timeout` is `val2`, a count, for the requeue and wake-op commands.
    let (uaddr, op, val, timeout) = (a.ptr(0), a.u64(1), a.u32(2), a.u64(3));
    let (uaddr2, val3) = (a.ptr(4), a.u32(5));
    let cmd = op & 0x7f;
    // Relative timeouts for FUTEX_WAIT, absolute ones for WAIT_BITSET.
    let deadline = |task: &Task,
                    absolute: bool,
                    realtime: bool|
     -> Result<Option<std::time::Instant>, Errno> {
        if absolute {
            let clock = if realtime || op & FUTEX_CLOCK_REALTIME != 0 {
                libc::CLOCK_REALTIME
            } else {
                libc::CLOCK_MONOTONIC
            };
            return futex_deadline(task, timeout, clock);
        }
        if timeout == 0 {
            return Ok(None);
        }
        Ok(Some(
            std::time::Instant::now() + futex_timespec(task, timeout)?,
        ))
    };
    match cmd {
        FUTEX_WAIT => {
            let d = deadline(task, false, false)?;
            crate::kernel::futex::wait(task, uaddr, val, u32::MAX, d)
        }
        FUTEX_WAIT_BITSET => {
            let d = deadline(task, true, false)?;
            crate::kernel::futex::wait(task, uaddr, val, val3, d)
        }
        FUTEX_WAKE => crate::kernel::futex::wake(task, uaddr, val, u32::MAX),
        FUTEX_WAKE_BITSET => crate::kernel::futex::wake(task, uaddr, val, val3),
        FUTEX_REQUEUE => {
            crate::kernel::futex::requeue(task, uaddr, uaddr2, val, timeout as u32, None)
        }
        FUTEX_CMP_REQUEUE => {
            crate::kernel::futex::requeue(task, uaddr, uaddr2, val, timeout as u32, Some(val3))
        }
        FUTEX_WAKE_OP => {
            crate::kernel::futex::wake_op(task, uaddr, uaddr2, val, timeout as u32, val3)
        }
        // FUTEX_LOCK_PI's timeout is absolute on CLOCK_REALTIME; LOCK_PI2's
        // on CLOCK_MONOTONIC unless FUTEX_CLOCK_REALTIME says otherwise.
        FUTEX_LOCK_PI => {
            let d = deadline(task, true, true)?;
            crate::kernel::futex::lock_pi(task, uaddr, d, false)
        }
        FUTEX_LOCK_PI2 => {
            let d = deadline(task, true, false)?;
            crate::kernel::futex::lock_pi(task, uaddr, d, false)
        }
        FUTEX_TRYLOCK_PI => crate::kernel::futex::lock_pi(task, uaddr, None, true),
        FUTEX_UNLOCK_PI => crate::kernel::futex::unlock_pi(task, uaddr),
        _ => Err(Errno::ENOSYS),
    }
}

/// `futex_waitv(2)`: waits on up to 128 futexes at once, until a wake of
/// one of them (its index is the result) or an absolute timeout on
/// `CLOCK_MONOTONIC` or `CLOCK_REALTIME`.
pub fn sys_futex_waitv(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    const FUTEX_WAITV_MAX: u32 = 128;
    let (waiters, n, flags, timeout, clock) = (a.ptr(0), a.u32(1), a.u32(2), a.ptr(3), a.i32(4));
    if flags != 0 || n == 0 || n > FUTEX_WAITV_MAX || waiters == 0 {
        return Err(Errno::EINVAL);
    }
    let deadline = futex_deadline(task, timeout, clock)?;
    let list = futex2_waiters(task, waiters, n)?;
    let words: Vec<(u64, u32)> = list.iter().map(|w| (w.uaddr, w.val as u32)).collect();
    crate::kernel::futex::wait_multiple(task, &words, deadline)
}

/// futex2's `FUTEX2_*` flags.
const FUTEX2_SIZE_MASK: u32 = 3;
const FUTEX2_SIZE_U32: u32 = 2;
const FUTEX2_NUMA: u32 = 4;
const FUTEX2_MPOL: u32 = 8;
const FUTEX2_PRIVATE: u32 = 128;

/// Whether futex2 `flags` are valid: known bits, a 32-bit futex (the only
/// size Linux implements).
fn futex2_flags_ok(flags: u32) -> bool {
    let valid = FUTEX2_SIZE_MASK | FUTEX2_NUMA | FUTEX2_MPOL | FUTEX2_PRIVATE;
    flags & !valid == 0 && flags & FUTEX2_SIZE_MASK == FUTEX2_SIZE_U32
}

/// The futex2 word at `uaddr` with `flags`: aligned to its size (a NUMA
/// futex is two words, the value and its node), and a NUMA futex's node
/// is the one node there is.
fn futex2_word(task: &Task, uaddr: u64, flags: u32) -> Result<(), Errno> {
    /// `FUTEX_NO_NODE`: the kernel picks the node and writes it back.
    const NO_NODE: u32 = u32::MAX;
    let size = if flags & FUTEX2_NUMA != 0 { 8 } else { 4 };
    if !uaddr.is_multiple_of(size) {
        return Err(Errno::EINVAL);
    }
    if flags & FUTEX2_NUMA != 0 {
        let node: u32 = task.mm().read_obj(uaddr + 4)?;
        match node {
            0 => {}
            // Node 0, the only one, is the caller's.
            NO_NODE => task.mm().write_obj(uaddr + 4, &0u32)?,
            _ => return Err(Errno::EINVAL),
        }
    }
    Ok(())
}

/// A futex timeout's `struct timespec` at `addr` (`EINVAL` when negative
/// or not normalised).
fn futex_timespec(task: &Task, addr: u64) -> Result<std::time::Duration, Errno> {
    let ts: abi::Timespec = task.mm().read_obj(addr)?;
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return Err(Errno::EINVAL);
    }
    Ok(std::time::Duration::new(
        ts.tv_sec as u64,
        ts.tv_nsec as u32,
    ))
}

/// An absolute futex timeout at `timeout` on `clock` (`CLOCK_MONOTONIC`
/// or `CLOCK_REALTIME`) as an instant; `None` without one.
fn futex_deadline(
    task: &Task,
    timeout: u64,
    clock: i32,
) -> Result<Option<std::time::Instant>, Errno> {
    if timeout == 0 {
        return Ok(None);
    }
    if clock != libc::CLOCK_REALTIME && clock != libc::CLOCK_MONOTONIC {
        return Err(Errno::EINVAL);
    }
    let want = futex_timespec(task, timeout)?;
    let now = crate::host::clock_gettime(clock)?;
    let now = std::time::Duration::new(
        now.tv_sec.max(0) as u64,
        now.tv_nsec.clamp(0, 999_999_999) as u32,
    );
    Ok(Some(std::time::Instant::now() + want.saturating_sub(now)))
}

/// `n` `struct futex_waitv`s at `addr`: parsed whole first (EFAULT,
/// EINVAL), then the keys (alignment, a NUMA futex's node word), as Linux
/// does.
fn futex2_waiters(task: &Task, addr: u64, n: u32) -> Result<Vec<abi::FutexWaitv>, Errno> {
    let mut list = Vec::with_capacity(n as usize);
    for i in 0..u64::from(n) {
        let w: abi::FutexWaitv = task.mm().read_obj(addr + i * 24)?;
        if !futex2_flags_ok(w.flags) || w.reserved != 0 || w.val > u64::from(u32::MAX) {
            return Err(Errno::EINVAL);
        }
        list.push(w);
    }
    for w in &list {
        futex2_word(task, w.uaddr, w.flags)?;
    }
    Ok(list)
}

/// `futex_wake(uaddr, mask, nr, flags)` (Linux 6.7): wakes up to `nr`
/// waiters whose bitset meets `mask`; `nr` 0 wakes none.
pub fn sys_futex_wake(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (uaddr, mask, nr, flags) = (a.ptr(0), a.u64(1), a.i32(2), a.u32(3));
    if !futex2_flags_ok(flags) || mask > u64::from(u32::MAX) {
        return Err(Errno::EINVAL);
    }
    if mask == 0 {
        return Err(Errno::EINVAL);
    }
    futex2_word(task, uaddr, flags)?;
    match nr {
        0 => crate::kernel::futex::wake(task, uaddr, 0, mask as u32).map(|_| 0),
        // (a negative count still wakes one, as Linux's loop does)
        n => crate::kernel::futex::wake(task, uaddr, n.max(1) as u32, mask as u32),
    }
}

/// `futex_wait(uaddr, val, mask, flags, timeout, clockid)` (Linux 6.7):
/// sleeps while the word is `val`, until a wake meeting `mask` or the
/// absolute `timeout` on `clockid`.
pub fn sys_futex_wait(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (uaddr, val, mask, flags) = (a.ptr(0), a.u64(1), a.u64(2), a.u32(3));
    let (timeout, clock) = (a.ptr(4), a.i32(5));
    if !futex2_flags_ok(flags) || val > u64::from(u32::MAX) || mask > u64::from(u32::MAX) {
        return Err(Errno::EINVAL);
    }
    let deadline = futex_deadline(task, timeout, clock)?;
    futex2_word(task, uaddr, flags)?;
    crate::kernel::futex::wait(task, uaddr, val as u32, mask as u32, deadline)
}

/// `futex_requeue(waiters, flags, nr_wake, nr_requeue)` (Linux 6.7): the
/// first futex (whose word must still be its `val`: `EAGAIN`) has
/// `nr_wake` waiters woken and `nr_requeue` moved to the second.
pub fn sys_futex_requeue(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (waiters, flags, nr_wake, nr_requeue) = (a.ptr(0), a.u32(1), a.i32(2), a.i32(3));
    if flags != 0 || waiters == 0 {
        return Err(Errno::EINVAL);
    }
    let w = futex2_waiters(task, waiters, 2)?;
    if nr_wake < 0 || nr_requeue < 0 {
        return Err(Errno::EINVAL);
    }
    crate::kernel::futex::requeue(
        task,
        w[0].uaddr,
        w[1].uaddr,
        nr_wake as u32,
        nr_requeue as u32,
        Some(w[0].val as u32),
    )
}

/// Reads a NULL-terminated array of string pointers (`argv`, `envp`).
fn string_array(task: &Task, mut addr: u64) -> Result<Vec<Vec<u8>>, Errno> {
    const ARG_MAX: usize = 2 << 20;
    let mut out = Vec::new();
    let mut total = 0usize;
    if addr == 0 {
        return Ok(out);
    }
    loop {
        let p: u64 = task.mm().read_obj(addr)?;
        if p == 0 {
            return Ok(out);
        }
        let s = task.mm().read_cstr(p, 32 * 4096).map_err(|e| {
            if e == Errno::ENAMETOOLONG {
                Errno::E2BIG
            } else {
                e
            }
        })?;
        total += s.len() + 1 + 8;
        if total > ARG_MAX {
            return Err(Errno::E2BIG);
        }
        out.push(s);
        addr += 8;
    }
}

fn execve(task: &mut Task, dirfd: u64, path: Vec<u8>, argv: u64, envp: u64) -> Result<u64, Errno> {
    let argv = string_array(task, argv)?;
    let envp = string_array(task, envp)?;
    let (cmdline, environ) = (
        crate::kernel::join_nul(&argv),
        crate::kernel::join_nul(&envp),
    );
    let start = super::dir_arg(task, dirfd, &path)?;
    let kernel = task.kernel.clone();
    let root = task.root();
    // Landlock: the file is opened to read and to execute (open_exec()).
    let domain = task.landlock.clone();
    let landlock = move |loc: &crate::vfs::Location| match &domain {
        Some(d) => d.check(loc, access::READ_FILE | access::EXECUTE),
        None => Ok(()),
    };
    let req = ExecRequest {
        fs: &kernel.fs,
        root: &root,
        cwd: &start,
        path,
        argv,
        envp,
        creds: Some(&task.creds),
        may_exec: Some(&landlock),
        user_range: task.mm().user_range(),
    };
    let prepared = loader::prepare(req)?;
    // The credentials the program runs with: its set-ID bits honoured.
    let (creds, secure) = task.creds.on_exec(&prepared.exec_file(), task.no_new_privs);
    let mut aux = loader::AuxCreds::new(&creds, secure);
    // personality(2)'s ADDR_NO_RANDOMIZE (a debugger's); a set-ID program
    // drops it, as PER_CLEAR_ON_SETID says.
    const ADDR_NO_RANDOMIZE: u32 = 0x0040000;
    {
        let mut st = task.proc_.state();
        if secure {
            st.personality &= !ADDR_NO_RANDOMIZE;
        }
        aux.randomize = st.personality & ADDR_NO_RANDOMIZE == 0;
    }
    // Linux's `begin_new_exec`: a program that runs with other ids than
    // its real ones, or that the caller could not read, leaves the
    // process undumpable (its memory is not for the caller to inspect);
    // any other makes it dumpable again.
    let dumpable =
        !prepared.unreadable() && creds.uid[1] == creds.uid[0] && creds.gid[1] == creds.gid[0];
    kill_other_threads(task);
    task.patch_checked = 0;
    task.stale_fault = None;
    // The address space is kept (emptied by `commit`) when nothing else
    // uses it: making a new one (a new stub process) costs more than the
    // rest of an `execve`. One shared with a vfork parent, or still held
    // by a thread on its way out, stays with them: this process gets a
    // fresh one.
    let committed = if std::sync::Arc::strong_count(&task.mm) == 1 {
        task.settle_address_space_cpu();
        let mm = task.mm.clone();
        let mut mm = mm.locked();
        let loaded = loader::commit(&mut mm, prepared, aux, &kernel.timekeeper);
        drop(mm);
        // What the old program left in the FPU and vector registers goes
        // too, as a new stub thread would start.
        if loaded.is_ok() {
            if let Err(e) = task.ctx.reset_fpstate() {
                tracing::warn!("execve: resetting the FPU state: {e}");
            }
        }
        loaded
    } else {
        let space = match kernel.platform.new_address_space() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("execve: no address space: {e}");
                return Err(Errno::ENOMEM);
            }
        };
        task.settle_address_space_cpu();
        task.proc_.state().as_cpu_start = space.cpu_time().unwrap_or_default();
        let mut mm = crate::mm::MemoryManager::new(
            kernel.memory.clone(),
            space,
            kernel.platform.max_user_address(),
        );
        let loaded = loader::commit(&mut mm, prepared, aux, &kernel.timekeeper);
        if loaded.is_ok() {
            task.mm.locked().drop_user();
            task.mm = std::sync::Arc::new(std::sync::Mutex::new(mm));
        }
        loaded
    };
    match committed {
        Ok(loaded) => {
            task.regs = loaded.regs;
            task.comm = loaded.comm;
            task.exe = loaded.exe;
            task.proc_.state().info.auxv = loaded.auxv;
            // The descriptor table and fs context stop being shared.
            let fds = task.fds().clone();
            task.fds = std::sync::Arc::new(std::sync::Mutex::new(fds));
            let closing: Vec<_> = {
                let fds = task.fds();
                fds.open_fds()
                    .into_iter()
                    .filter(|&fd| fds.get(fd as i64).is_ok_and(|e| e.cloexec))
                    .filter_map(|fd| fds.file(fd as i64).ok())
                    .collect()
            };
            task.fds().close_on_exec();
            // Closing a descriptor drops the process's record locks on
            // its file.
            for f in &closing {
                super::fs::close_releases_locks(task, f);
            }
            let fs = task.fs_ctx().clone();
            task.fs = std::sync::Arc::new(std::sync::Mutex::new(fs));
            task.altstack = crate::kernel::task::no_altstack();
            task.keyrings.on_exec();
            task.clear_child_tid = 0;
            task.robust_list = (0, 0);
            {
                let mut st = task.proc_.state();
                st.reset_actions_for_exec();
                st.did_exec = true;
                // A new address space: no membarrier registrations.
                st.membarrier = 0;
                for (_, (id, _)) in std::mem::take(&mut st.posix_timers) {
                    kernel.timers.delete(id);
                }
            }
            {
                let mut p = task.proc_.state();
                p.info.cmdline = cmdline;
                p.info.environ = environ;
                p.dumpable = dumpable;
            }
            task.creds = creds;
            task.ids = (task.creds.uid[3], task.creds.gid[3]);
            task.publish_privileges();
            task.publish_info();
            crate::kernel::task::set_current(task.pid(), task.tid());
            task.vfork_release();
            let tid = task.tid();
            task.ptrace_exec(tid);
            Ok(0)
        }
        Err(e) => {
            // The old image is gone: like Linux, kill the process.
            tracing::debug!("execve failed after the point of no return: {e}");
            task.exit_group(ExitStatus::Signal(abi::signal::SIGSEGV))
        }
    }
}

/// `execve` in a multi-threaded process: every other thread exits first
/// (their host threads notice `exit_now`), so the caller is alone.
fn kill_other_threads(task: &mut Task) {
    let others: Vec<_> = task
        .proc_
        .state()
        .threads
        .iter()
        .filter(|t| t.tid != task.tid())
        .cloned()
        .collect();
    if others.is_empty() {
        return;
    }
    for t in &others {
        t.state().exit_now = true;
        t.waiter.wake();
        t.interrupt();
    }
    {
        // Each leaving thread wakes the process's queue; the slice bounds
        // the wait for one that is slow to notice (in a host call).
        let w = &task.thread.waiter;
        let _registered =
            crate::kernel::wait::Registration::new(w, std::slice::from_ref(&task.proc_.waiters));
        loop {
            w.prepare();
            if task.proc_.state().threads.len() <= 1 {
                break;
            }
            w.sleep(Some(
                std::time::Instant::now() + std::time::Duration::from_millis(50),
            ));
        }
    }
    // The surviving thread takes over the thread group ID.
    let pid = task.pid();
    if task.tid() != pid {
        let mask = task.sigmask();
        let new = crate::kernel::task::Thread::new(pid, task.proc_.clone(), mask);
        let (affinity, seccomp) = {
            let old = task.thread.state();
            (old.affinity, old.seccomp.clone())
        };
        {
            let mut st = new.state();
            st.affinity = affinity;
            // Filters survive execve, whichever thread makes it.
            new.set_seccomp(&mut st, seccomp);
        }
        let old_tid = task.tid();
        {
            let mut st = task.proc_.state();
            st.threads.retain(|t| t.tid != old_tid);
            st.threads.push(new.clone());
        }
        {
            let mut procs = task.kernel.procs();
            procs.threads.remove(&old_tid);
            procs.threads.insert(pid, new.clone());
        }
        new.set_interrupter(Some(task.ctx.interrupter()));
        task.thread = new;
    }
}

pub fn sys_execve(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let path = path_arg(task, a.ptr(0))?;
    execve(task, abi::AT_FDCWD as u64, path, a.ptr(1), a.ptr(2))
}

pub fn sys_execveat(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (argv, envp, flags) = (a.ptr(2), a.ptr(3), a.u32(4));
    if flags & !(abi::AT_EMPTY_PATH | abi::AT_SYMLINK_NOFOLLOW) != 0 {
        return Err(Errno::EINVAL);
    }
    let path = path_arg(task, a.ptr(1))?;
    if path.is_empty() {
        // fexecve: run the file behind the descriptor.
        if flags & abi::AT_EMPTY_PATH == 0 {
            return Err(Errno::ENOENT);
        }
        let file = task.fds().file(a.fd(0).into())?;
        let p = file
            .location
            .as_ref()
            .map(|l| l.path())
            .ok_or(Errno::EBADF)?;
        return execve(task, abi::AT_FDCWD as u64, p.into_bytes(), argv, envp);
    }
    execve(task, a.u64(0), path, argv, envp)
}
