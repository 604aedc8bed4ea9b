//! System V semaphores (`semget`, `semop`, `semtimedop`, `semctl`), kept
//! in the Sentry, in the sandbox's own IPC namespace.
//!
//! A `semop` applies all its operations or none; when one cannot go on it
//! waits on the set's wait queue until a change lets it, a signal
//! interrupts it (`EINTR`: semop is never restarted, signal(7)), its
//! timeout passes (`EAGAIN`), or the set is removed (`EIDRM`). `SEM_UNDO`
//! adjustments are kept per process and applied when it exits, as Linux's
//! `exit_sem` does. Identifiers are built as for shared memory
//! ([`crate::kernel::ipc::shm::new_id`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use abi::{Errno, Timespec};

use crate::kernel::auth::{MAY_READ, MAY_WRITE};
use crate::kernel::ipc::shm::{
    id_of, ipc_may_change, ipc_permitted, lookup, new_id, now, stat_lookup, IpcObject, IpcPerm,
    Owner, IPC_64, IPC_CREAT, IPC_EXCL, IPC_INFO, IPC_PRIVATE, IPC_RMID, IPC_SET, IPC_STAT,
    SEQ_MULTIPLIER,
};
use crate::kernel::task::Task;
use crate::kernel::wait::WaitQueue;
use crate::mm::snapshot::{bad, Bad, Dec, Enc};

use abi::ipc::{
    GETALL, GETNCNT, GETPID, GETVAL, GETZCNT, SEMAEM, SEMMNI, SEMMNS, SEMOPM, SEMVMX, SEM_INFO,
    SEM_STAT, SEM_STAT_ANY, SEM_UNDO, SETALL, SETVAL,
};

/// `IPC_NOWAIT` as `sem_flg`'s `short`.
const IPC_NOWAIT: i16 = abi::ipc::IPC_NOWAIT as i16;
/// The most semaphores the sandbox holds in all, below Linux's `SEMMNS`:
/// they live in the Sentry's own memory (16 bytes each here), which a
/// guest must not be able to exhaust; past it `semget` is `ENOSPC`, as
/// past `SEMMNS`.
const SENTRY_MAX_SEMS: usize = 1 << 20;

#[derive(Debug)]
struct SemSet {
    key: i32,
    owner: Owner,
    seq: u16,
    otime: i64,
    ctime: i64,
    vals: Vec<i32>,
    pids: Vec<i32>,
    /// waiters for each semaphore to grow (`GETNCNT`) or be zero
    /// (`GETZCNT`)
    ncnt: Vec<u32>,
    zcnt: Vec<u32>,
    /// `semop`s waiting for a change of the set (or its removal)
    waiters: WaitQueue,
}

/// The sandbox's semaphore sets.
#[derive(Debug, Default)]
pub struct Registry {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    sets: BTreeMap<i32, SemSet>,
    seq: u16,
    last_idx: i32,
    /// `SEM_UNDO` adjustments by (process, identifier)
    undo: HashMap<(i32, i32), Vec<i32>>,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            sets: BTreeMap::new(),
            seq: 0,
            last_idx: -1,
            undo: HashMap::new(),
        }
    }
}

impl IpcObject for SemSet {
    fn seq(&self) -> u16 {
        self.seq
    }
    fn owner(&self) -> &Owner {
        &self.owner
    }
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The sets and `SEM_UNDO` adjustments, as a checkpoint saves them
    /// (waiters are not: a `semop` that waited starts again).
    pub fn save(&self, e: &mut Enc) {
        let g = self.lock();
        e.u32(u32::from(g.seq));
        e.u32(g.last_idx as u32);
        e.u64(g.sets.len() as u64);
        for (idx, s) in &g.sets {
            e.u32(*idx as u32);
            e.u32(s.key as u32);
            s.owner.save(e);
            e.u32(u32::from(s.seq));
            e.u64(s.otime as u64);
            e.u64(s.ctime as u64);
            e.u64(s.vals.len() as u64);
            for (v, p) in s.vals.iter().zip(&s.pids) {
                e.u32(*v as u32);
                e.u32(*p as u32);
            }
        }
        e.u64(g.undo.len() as u64);
        for ((pid, id), adj) in &g.undo {
            e.u32(*pid as u32);
            e.u32(*id as u32);
            e.u64(adj.len() as u64);
            for a in adj {
                e.u32(*a as u32);
            }
        }
    }

    /// Puts back what [`Registry::save`] wrote, in a new sandbox.
    pub fn restore(&self, d: &mut Dec<'_>) -> Result<(), Bad> {
        let mut g = self.lock();
        g.seq = d.u32()? as u16;
        g.last_idx = d.u32()? as i32;
        let n = d.count(48)?;
        let mut total = 0usize;
        for _ in 0..n {
            let idx = d.u32()? as i32;
            let key = d.u32()? as i32;
            let owner = Owner::restore(d)?;
            let seq = d.u32()? as u16;
            let (otime, ctime) = (d.u64()? as i64, d.u64()? as i64);
            let m = d.count(8)?;
            total += m;
            if !(0..SEMMNI as i32).contains(&idx) || m == 0 || total > SENTRY_MAX_SEMS {
                return bad("the image's semaphore sets are out of range");
            }
            let (mut vals, mut pids) = (Vec::with_capacity(m), Vec::with_capacity(m));
            for _ in 0..m {
                let v = d.u32()? as i32;
                if !(0..=SEMVMX).contains(&v) {
                    return bad("a semaphore of the image is out of range");
                }
                vals.push(v);
                pids.push(d.u32()? as i32);
            }
            let set = SemSet {
                key,
                owner,
                seq,
                otime,
                ctime,
                ncnt: vec![0; m],
                zcnt: vec![0; m],
                vals,
                pids,
                waiters: WaitQueue::new(),
            };
            g.sets.insert(idx, set);
        }
        let n = d.count(16)?;
        for _ in 0..n {
            let (pid, id) = (d.u32()? as i32, d.u32()? as i32);
            let m = d.count(4)?;
            let mut adj = Vec::with_capacity(m);
            for _ in 0..m {
                adj.push(d.u32()? as i32);
            }
            g.undo.insert((pid, id), adj);
        }
        Ok(())
    }
}

impl Inner {
    fn by_id(&mut self, id: i32) -> Result<&mut SemSet, Errno> {
        lookup(&mut self.sets, id)
    }

    fn total(&self) -> usize {
        self.sets.values().map(|s| s.vals.len()).sum()
    }
}

/// `semget(key, nsems, semflg)`: the identifier of the set.
pub fn semget(task: &Task, key: i32, nsems: i32, flags: u64) -> Result<i32, Errno> {
    let reg = task.kernel.sysv_sem.clone();
    let mut g = reg.lock();
    let [semmsl, semmns, _, semmni] = task.kernel.sysv_limits().sem;
    if nsems < 0 || nsems > semmsl {
        return Err(Errno::EINVAL);
    }
    if key != IPC_PRIVATE {
        if let Some((&idx, s)) = g.sets.iter().find(|(_, s)| s.key == key) {
            if flags & (IPC_CREAT | IPC_EXCL) == IPC_CREAT | IPC_EXCL {
                return Err(Errno::EEXIST);
            }
            if nsems as usize > s.vals.len() {
                return Err(Errno::EINVAL);
            }
            let want = ((flags as u32 & 0o777) >> 6) & (MAY_READ | MAY_WRITE);
            if !ipc_permitted(task, &s.owner, want) {
                return Err(Errno::EACCES);
            }
            return Ok(id_of(idx, s.seq));
        }
        if flags & IPC_CREAT == 0 {
            return Err(Errno::ENOENT);
        }
    }
    if nsems == 0 {
        return Err(Errno::EINVAL);
    }
    // (`semmns` below 0 leaves no room)
    let most = usize::try_from(semmns).unwrap_or(0).min(SENTRY_MAX_SEMS);
    if g.total() + nsems as usize > most || !super::room_for_one(g.sets.len(), semmni) {
        return Err(Errno::ENOSPC);
    }
    let Inner {
        sets,
        seq,
        last_idx,
        ..
    } = &mut *g;
    let (idx, seq) = new_id(seq, last_idx, sets.len(), SEMMNI, |i| sets.contains_key(&i))?;
    let (uid, gid) = (task.creds.uid[1], task.creds.gid[1]);
    let n = nsems as usize;
    sets.insert(
        idx,
        SemSet {
            key,
            owner: Owner {
                uid,
                gid,
                cuid: uid,
                cgid: gid,
                mode: flags as u32 & 0o777,
            },
            seq,
            otime: 0,
            ctime: now(),
            vals: vec![0; n],
            pids: vec![0; n],
            ncnt: vec![0; n],
            zcnt: vec![0; n],
            waiters: WaitQueue::new(),
        },
    );
    Ok(id_of(idx, seq))
}

/// `struct sembuf`.
#[repr(C)]
#[derive(Clone, Copy, Default, zerocopy::IntoBytes, zerocopy::FromBytes, zerocopy::Immutable)]
struct SemBuf {
    num: u16,
    op: i16,
    flg: i16,
}

/// What one attempt of a `semop` came to.
enum Try {
    Done,
    /// it must wait for semaphore `num` to grow (`true`) or be zero
    Wait(usize, bool),
}

/// Whether an attempt of `ops` on set `id` would end now (go on, or fail),
/// without changing anything: a waiter checks it before it sleeps.
fn could_end(reg: &Registry, id: i32, ops: &[SemBuf]) -> bool {
    let mut g = reg.lock();
    match g.by_id(id) {
        Ok(s) => {
            let mut probe = SemSet {
                vals: s.vals.clone(),
                pids: s.pids.clone(),
                ncnt: Vec::new(),
                zcnt: Vec::new(),
                waiters: s.waiters.clone(),
                ..*s
            };
            !matches!(attempt(&mut probe, ops, 0), Ok(Try::Wait(..)))
        }
        Err(_) => true,
    }
}

/// Applies `ops` to `s` if all can go on now (Linux's `perform_atomic_semop`).
fn attempt(s: &mut SemSet, ops: &[SemBuf], pid: i32) -> Result<Try, Errno> {
    let mut vals = s.vals.clone();
    for o in ops {
        let n = usize::from(o.num);
        let v = vals[n];
        let op = i32::from(o.op);
        if op == 0 {
            if v != 0 {
                return if o.flg & IPC_NOWAIT != 0 {
                    Err(Errno::EAGAIN)
                } else {
                    Ok(Try::Wait(n, false))
                };
            }
        } else if v + op < 0 {
            return if o.flg & IPC_NOWAIT != 0 {
                Err(Errno::EAGAIN)
            } else {
                Ok(Try::Wait(n, true))
            };
        } else if v + op > SEMVMX {
            return Err(Errno::ERANGE);
        } else {
            vals[n] = v + op;
        }
    }
    s.vals = vals;
    for o in ops {
        s.pids[usize::from(o.num)] = pid;
    }
    s.otime = now();
    Ok(Try::Done)
}

/// `semtimedop(semid, sops, nsops, timeout)` (`semop` without a timeout:
/// `timeout` 0): the `nsops` operations at `ops_addr`, all or none.
pub fn semtimedop(
    task: &mut Task,
    id: i32,
    ops_addr: u64,
    nsops: u64,
    timeout: u64,
) -> Result<(), Errno> {
    if nsops == 0 {
        return Err(Errno::EINVAL);
    }
    if nsops > u64::try_from(task.kernel.sysv_limits().sem[2]).unwrap_or(0) {
        return Err(Errno::E2BIG);
    }
    let mut ops = vec![SemBuf::default(); nsops as usize];
    for (i, o) in ops.iter_mut().enumerate() {
        *o = task.mm().read_obj(ops_addr + 6 * i as u64)?;
    }
    let deadline = if timeout != 0 {
        let ts: Timespec = task.mm().read_obj(timeout)?;
        if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
            return Err(Errno::EINVAL);
        }
        Some(Instant::now() + std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
    } else {
        None
    };
    let reg = task.kernel.sysv_sem.clone();
    let pid = task.pid();
    let alter = ops.iter().any(|o| o.op != 0);
    let undo = ops.iter().any(|o| o.flg & SEM_UNDO != 0);
    if undo {
        task.proc_.state().sem_undo_list = true;
    }
    let waiters = {
        let mut g = reg.lock();
        let s = g.by_id(id)?;
        if ops.iter().any(|o| usize::from(o.num) >= s.vals.len()) {
            return Err(Errno::EFBIG);
        }
        let want = if alter { MAY_WRITE } else { MAY_READ };
        if !ipc_permitted(task, &s.owner, want) {
            return Err(Errno::EACCES);
        }
        s.waiters.clone()
    };
    // A wait counts in GETNCNT/GETZCNT while it lasts.
    let mut waiting: Option<(usize, bool)> = None;
    let unwait = |g: &mut Inner, w: &mut Option<(usize, bool)>| {
        if let (Some((n, grow)), Ok(s)) = (w.take(), g.by_id(id)) {
            let c = if grow { &mut s.ncnt[n] } else { &mut s.zcnt[n] };
            *c = c.saturating_sub(1);
        }
    };
    let blk = task.blocker();
    let r = blk.block_with(
        std::slice::from_ref(&waiters),
        false,
        deadline,
        Errno::EAGAIN,
        Errno::EINTR,
        || {
            let mut g = reg.lock();
            let got = match g.by_id(id) {
                Ok(s) => attempt(s, &ops, pid),
                // removed meanwhile
                Err(_) => Err(Errno::EIDRM),
            };
            match got {
                Ok(Try::Done) => {
                    unwait(&mut g, &mut waiting);
                    if undo {
                        let n = g.by_id(id).map(|s| s.vals.len()).unwrap_or(0);
                        let adj = g.undo.entry((pid, id)).or_insert_with(|| vec![0; n]);
                        for o in ops.iter().filter(|o| o.flg & SEM_UNDO != 0) {
                            let a = &mut adj[usize::from(o.num)];
                            *a = (*a - i32::from(o.op)).clamp(-SEMAEM, SEMAEM);
                        }
                    }
                    Ok(Some(()))
                }
                Ok(Try::Wait(n, grow)) => {
                    if waiting != Some((n, grow)) {
                        unwait(&mut g, &mut waiting);
                        if let Ok(s) = g.by_id(id) {
                            let c = if grow { &mut s.ncnt[n] } else { &mut s.zcnt[n] };
                            *c += 1;
                        }
                        waiting = Some((n, grow));
                    }
                    Ok(None)
                }
                Err(e) => {
                    unwait(&mut g, &mut waiting);
                    Err(e)
                }
            }
        },
        || could_end(&reg, id, &ops),
    );
    if r.is_err() {
        let mut g = reg.lock();
        unwait(&mut g, &mut waiting);
    }
    r?;
    // Others may now go on.
    waiters.notify();
    Ok(())
}

/// `struct semid64_ds` (x86-64).
#[repr(C)]
#[derive(Clone, Copy, Default, zerocopy::IntoBytes, zerocopy::FromBytes, zerocopy::Immutable)]
struct SemidDs {
    perm: IpcPerm,
    otime: i64,
    unused1: u64,
    ctime: i64,
    unused2: u64,
    nsems: u64,
    unused3: u64,
    unused4: u64,
}

/// `struct seminfo`.
#[repr(C)]
#[derive(Clone, Copy, Default, zerocopy::IntoBytes, zerocopy::FromBytes, zerocopy::Immutable)]
struct SemInfo {
    semmap: i32,
    semmni: i32,
    semmns: i32,
    semmnu: i32,
    semmsl: i32,
    semopm: i32,
    semume: i32,
    semusz: i32,
    semvmx: i32,
    semaem: i32,
}

fn stat_of(s: &SemSet) -> SemidDs {
    SemidDs {
        perm: IpcPerm {
            key: s.key,
            uid: s.owner.uid,
            gid: s.owner.gid,
            cuid: s.owner.cuid,
            cgid: s.owner.cgid,
            mode: s.owner.mode,
            seq: s.seq,
            ..IpcPerm::default()
        },
        otime: s.otime,
        ctime: s.ctime,
        nsems: s.vals.len() as u64,
        ..SemidDs::default()
    }
}

/// `semctl(semid, semnum, cmd, arg)`: `arg` is the union's value, an
/// address or (`SETVAL`) an int.
pub fn semctl(task: &Task, id: i32, num: i32, cmd: u64, arg: u64) -> Result<u64, Errno> {
    let cmd = cmd & !IPC_64;
    let reg = task.kernel.sysv_sem.clone();
    match cmd {
        IPC_INFO | SEM_INFO => {
            let [semmsl, semmns, semopm, semmni] = task.kernel.sysv_limits().sem;
            let g = reg.lock();
            // (SEMMAP, SEMMNU and SEMUME are constants)
            let info = SemInfo {
                semmap: SEMMNS as i32,
                semmni,
                semmns,
                semmnu: SEMMNS as i32,
                semmsl,
                semopm,
                semume: SEMOPM as i32,
                // SEM_INFO: sets and semaphores in use instead
                semusz: if cmd == SEM_INFO {
                    g.sets.len() as i32
                } else {
                    20
                },
                semvmx: SEMVMX,
                semaem: if cmd == SEM_INFO {
                    g.total() as i32
                } else {
                    SEMAEM
                },
            };
            let last = g.sets.keys().next_back().copied().unwrap_or(0);
            drop(g);
            task.mm().write_obj(arg, &info)?;
            Ok(last as u64)
        }
        IPC_STAT | SEM_STAT | SEM_STAT_ANY => {
            let mut g = reg.lock();
            let by_index = cmd != IPC_STAT;
            let (ds, ret) = stat_lookup(
                task,
                &mut g.sets,
                id,
                by_index,
                cmd == SEM_STAT_ANY,
                stat_of,
            )?;
            drop(g);
            task.mm().write_obj(arg, &ds)?;
            Ok(ret as u64)
        }
        IPC_SET => {
            let new: SemidDs = task.mm().read_obj(arg)?;
            let mut g = reg.lock();
            let s = g.by_id(id)?;
            if !ipc_may_change(task, &s.owner) {
                return Err(Errno::EPERM);
            }
            s.owner.uid = new.perm.uid;
            s.owner.gid = new.perm.gid;
            s.owner.mode = (s.owner.mode & !0o777) | (new.perm.mode & 0o777);
            s.ctime = now();
            Ok(0)
        }
        IPC_RMID => {
            let mut g = reg.lock();
            let s = g.by_id(id)?;
            if !ipc_may_change(task, &s.owner) {
                return Err(Errno::EPERM);
            }
            let gone = g.sets.remove(&(id % SEQ_MULTIPLIER));
            g.undo.retain(|&(_, i), _| i != id);
            drop(g);
            // Waiters find it gone (EIDRM).
            if let Some(s) = gone {
                s.waiters.notify();
            }
            Ok(0)
        }
        GETVAL | GETPID | GETNCNT | GETZCNT => {
            let mut g = reg.lock();
            let s = g.by_id(id)?;
            if !ipc_permitted(task, &s.owner, MAY_READ) {
                return Err(Errno::EACCES);
            }
            let n = usize::try_from(num)
                .ok()
                .filter(|&n| n < s.vals.len())
                .ok_or(Errno::EINVAL)?;
            Ok(match cmd {
                GETVAL => s.vals[n] as u64,
                GETPID => s.pids[n] as u64,
                GETNCNT => u64::from(s.ncnt[n]),
                _ => u64::from(s.zcnt[n]),
            })
        }
        GETALL => {
            let vals: Vec<u16> = {
                let mut g = reg.lock();
                let s = g.by_id(id)?;
                if !ipc_permitted(task, &s.owner, MAY_READ) {
                    return Err(Errno::EACCES);
                }
                s.vals.iter().map(|&v| v as u16).collect()
            };
            for (i, v) in vals.iter().enumerate() {
                task.mm().write_obj(arg + 2 * i as u64, v)?;
            }
            Ok(0)
        }
        SETVAL | SETALL => {
            let n = {
                let mut g = reg.lock();
                let s = g.by_id(id)?;
                if !ipc_permitted(task, &s.owner, MAY_WRITE) {
                    return Err(Errno::EACCES);
                }
                s.vals.len()
            };
            // SETVAL's value is the int of the union, passed by value.
            let new: Vec<(usize, i32)> = if cmd == SETVAL {
                let v = arg as i32;
                let i = usize::try_from(num)
                    .ok()
                    .filter(|&i| i < n)
                    .ok_or(Errno::EINVAL)?;
                if !(0..=SEMVMX).contains(&v) {
                    return Err(Errno::ERANGE);
                }
                vec![(i, v)]
            } else {
                let mut all = Vec::with_capacity(n);
                for i in 0..n {
                    let v: u16 = task.mm().read_obj(arg + 2 * i as u64)?;
                    if i32::from(v) > SEMVMX {
                        return Err(Errno::ERANGE);
                    }
                    all.push((i, i32::from(v)));
                }
                all
            };
            let pid = task.pid();
            let mut g = reg.lock();
            let s = g.by_id(id)?;
            for &(i, v) in &new {
                s.vals[i] = v;
                s.pids[i] = pid;
            }
            s.ctime = now();
            let waiters = s.waiters.clone();
            // The changed semaphores' undo adjustments are void.
            for ((_, sid), adj) in g.undo.iter_mut() {
                if *sid == id {
                    for &(i, _) in &new {
                        if let Some(a) = adj.get_mut(i) {
                            *a = 0;
                        }
                    }
                }
            }
            drop(g);
            waiters.notify();
            Ok(0)
        }
        _ => Err(Errno::EINVAL),
    }
}

/// Applies and forgets the `SEM_UNDO` adjustments of exiting process
/// `pid` (Linux's `exit_sem`): each value moves by its adjustment, held
/// within 0 and the largest value.
pub fn exit_process(reg: &Registry, pid: i32) {
    let mut g = reg.lock();
    if g.undo.is_empty() {
        return;
    }
    let mine: Vec<(i32, Vec<i32>)> = {
        let keys: Vec<(i32, i32)> = g.undo.keys().filter(|(p, _)| *p == pid).copied().collect();
        keys.into_iter()
            .filter_map(|k| g.undo.remove(&k).map(|adj| (k.1, adj)))
            .collect()
    };
    if mine.is_empty() {
        return;
    }
    let mut changed = Vec::new();
    for (id, adj) in mine {
        if let Ok(s) = g.by_id(id) {
            changed.push(s.waiters.clone());
            for (i, a) in adj.iter().enumerate() {
                if *a != 0 {
                    s.vals[i] = (s.vals[i] + a).clamp(0, SEMVMX);
                    s.pids[i] = pid;
                }
            }
            s.otime = now();
        }
    }
    drop(g);
    for q in changed {
        q.notify();
    }
}

/// `/proc/sysvipc/sem`, as Linux's `sysvipc_sem_proc_show` lays it out.
pub fn proc_table(reg: &Registry) -> String {
    let g = reg.lock();
    let mut out = String::from(
        "       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n",
    );
    for (&idx, s) in &g.sets {
        out.push_str(&format!(
            "{:10} {:10}  {:4o} {:10} {:5} {:5} {:5} {:5} {:10} {:10}\n",
            s.key,
            id_of(idx, s.seq),
            s.owner.mode,
            s.vals.len(),
            s.owner.uid,
            s.owner.gid,
            s.owner.cuid,
            s.owner.cgid,
            s.otime,
            s.ctime
        ));
    }
    out
}
