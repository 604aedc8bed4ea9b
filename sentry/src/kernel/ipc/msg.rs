//! System V message queues (`msgget`, `msgsnd`, `msgrcv`, `msgctl`), kept
//! in the Sentry, in the sandbox's own IPC namespace.
//!
//! A queue holds typed messages up to `msg_qbytes` bytes in all. A sender
//! waits while its message does not fit, a receiver while no message of
//! the type it asks for is there, both on the queue's wait queue: a
//! signal ends the wait with `EINTR` (never restarted, signal(7)), and
//! removal of the queue with `EIDRM`. Identifiers and permission checks are
//! those of shared memory ([`crate::kernel::ipc::shm`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use abi::Errno;

use crate::kernel::auth::{cap, MAY_READ, MAY_WRITE};
use crate::kernel::ipc::shm::{
    id_of, ipc_may_change, ipc_permitted, lookup, new_id, now, stat_lookup, IpcObject, IpcPerm,
    Owner, IPC_64, IPC_CREAT, IPC_EXCL, IPC_INFO, IPC_PRIVATE, IPC_RMID, IPC_SET, IPC_STAT,
    SEQ_MULTIPLIER,
};
use crate::kernel::task::Task;
use crate::kernel::wait::WaitQueue;
use crate::mm::snapshot::{bad, Bad, Dec, Enc};

use abi::ipc::{
    IPC_NOWAIT, MSGMNB, MSGMNI, MSG_COPY, MSG_EXCEPT, MSG_INFO, MSG_NOERROR, MSG_STAT, MSG_STAT_ANY,
};

/// The most bytes all queues hold, below what Linux would allow: they live
/// in the Sentry's own memory, which a guest must not exhaust (`ENOSPC`
/// for new queues past it, and senders wait).
const SENTRY_MAX_BYTES: u64 = 64 << 20;

#[derive(Debug)]
struct Queue {
    key: i32,
    owner: Owner,
    seq: u16,
    stime: i64,
    rtime: i64,
    ctime: i64,
    lspid: i32,
    lrpid: i32,
    qbytes: u64,
    cbytes: u64,
    msgs: VecDeque<(i64, Vec<u8>)>,
    /// senders and receivers waiting for a change of the queue (or its
    /// removal)
    waiters: WaitQueue,
}

/// The sandbox's message queues.
#[derive(Debug, Default)]
pub struct Registry {
    inner: Mutex<Inner>,
    /// senders waiting for room in the Sentry's bytes of all queues
    /// (`SENTRY_MAX_BYTES`): woken whenever a queue gives some back
    room: WaitQueue,
}

#[derive(Debug)]
struct Inner {
    queues: BTreeMap<i32, Queue>,
    seq: u16,
    last_idx: i32,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            queues: BTreeMap::new(),
            seq: 0,
            last_idx: -1,
        }
    }
}

impl IpcObject for Queue {
    fn seq(&self) -> u16 {
        self.seq
    }
    fn owner(&self) -> &Owner {
        &self.owner
    }
}

impl Registry {
    /// Queues in the namespace.
    pub fn count(&self) -> usize {
        self.lock().queues.len()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The queues and their messages, as a checkpoint saves them (waiters
    /// are not: a `msgsnd` or `msgrcv` that waited starts again).
    pub fn save(&self, e: &mut Enc) {
        let g = self.lock();
        e.u32(u32::from(g.seq));
        e.u32(g.last_idx as u32);
        e.u64(g.queues.len() as u64);
        for (idx, q) in &g.queues {
            e.u32(*idx as u32);
            e.u32(q.key as u32);
            q.owner.save(e);
            e.u32(u32::from(q.seq));
            for t in [q.stime, q.rtime, q.ctime] {
                e.u64(t as u64);
            }
            e.u32(q.lspid as u32);
            e.u32(q.lrpid as u32);
            e.u64(q.qbytes);
            e.u64(q.msgs.len() as u64);
            for (ty, text) in &q.msgs {
                e.u64(*ty as u64);
                e.bytes(text);
            }
        }
    }

    /// Puts back what [`Registry::save`] wrote, in a new sandbox; an image
    /// whose queues Linux could not hold, or past the Sentry's bytes, is
    /// refused.
    pub fn restore(&self, d: &mut Dec<'_>) -> Result<(), Bad> {
        let mut g = self.lock();
        g.seq = d.u32()? as u16;
        g.last_idx = d.u32()? as i32;
        let n = d.count(80)?;
        let mut total = 0u64;
        for _ in 0..n {
            let idx = d.u32()? as i32;
            let key = d.u32()? as i32;
            let owner = Owner::restore(d)?;
            let seq = d.u32()? as u16;
            let (stime, rtime, ctime) = (d.u64()? as i64, d.u64()? as i64, d.u64()? as i64);
            let (lspid, lrpid) = (d.u32()? as i32, d.u32()? as i32);
            let qbytes = d.u64()?;
            let m = d.count(12)?;
            let mut msgs = VecDeque::with_capacity(m);
            let mut cbytes = 0u64;
            for _ in 0..m {
                let ty = d.u64()? as i64;
                let text = d.bytes()?.to_vec();
                if ty <= 0 {
                    return bad("a message of the image has no type");
                }
                cbytes += text.len() as u64;
                msgs.push_back((ty, text));
            }
            total += cbytes;
            if !(0..MSGMNI as i32).contains(&idx)
                || g.queues.contains_key(&idx)
                || cbytes > qbytes
                || total > SENTRY_MAX_BYTES
            {
                return bad("the image's message queues are out of range");
            }
            let queue = Queue {
                key,
                owner,
                seq,
                stime,
                rtime,
                ctime,
                lspid,
                lrpid,
                qbytes,
                cbytes,
                msgs,
                waiters: WaitQueue::new(),
            };
            g.queues.insert(idx, queue);
        }
        Ok(())
    }
}

impl Inner {
    fn by_id(&mut self, id: i32) -> Result<&mut Queue, Errno> {
        lookup(&mut self.queues, id)
    }

    fn bytes(&self) -> u64 {
        self.queues.values().map(|q| q.cbytes).sum()
    }
}

/// `msgget(key, msgflg)`: the identifier of the queue.
pub fn msgget(task: &Task, key: i32, flags: u64) -> Result<i32, Errno> {
    let reg = task.kernel.sysv_msg.clone();
    let mut g = reg.lock();
    if key != IPC_PRIVATE {
        if let Some((&idx, q)) = g.queues.iter().find(|(_, q)| q.key == key) {
            if flags & (IPC_CREAT | IPC_EXCL) == IPC_CREAT | IPC_EXCL {
                return Err(Errno::EEXIST);
            }
            let want = ((flags as u32 & 0o777) >> 6) & (MAY_READ | MAY_WRITE);
            if !ipc_permitted(task, &q.owner, want) {
                return Err(Errno::EACCES);
            }
            return Ok(id_of(idx, q.seq));
        }
        if flags & IPC_CREAT == 0 {
            return Err(Errno::ENOENT);
        }
    }
    let limits = task.kernel.sysv_limits();
    if !super::room_for_one(g.queues.len(), limits.msgmni) {
        return Err(Errno::ENOSPC);
    }
    let Inner {
        queues,
        seq,
        last_idx,
    } = &mut *g;
    let (idx, seq) = new_id(seq, last_idx, queues.len(), MSGMNI, |i| {
        queues.contains_key(&i)
    })?;
    let (uid, gid) = (task.creds.uid[1], task.creds.gid[1]);
    queues.insert(
        idx,
        Queue {
            key,
            owner: Owner {
                uid,
                gid,
                cuid: uid,
                cgid: gid,
                mode: flags as u32 & 0o777,
            },
            seq,
            stime: 0,
            rtime: 0,
            ctime: now(),
            lspid: 0,
            lrpid: 0,
            // (`msgmnb` is at least 0)
            qbytes: limits.msgmnb.max(0) as u64,
            cbytes: 0,
            msgs: VecDeque::new(),
            waiters: WaitQueue::new(),
        },
    );
    Ok(id_of(idx, seq))
}

/// `msgsnd(msqid, msgp, msgsz, msgflg)`: the message at `addr` (its type,
/// then `size` bytes).
pub fn msgsnd(task: &mut Task, id: i32, addr: u64, size: u64, flags: u64) -> Result<(), Errno> {
    if size > task.kernel.sysv_limits().msgmax.max(0) as u64 {
        return Err(Errno::EINVAL);
    }
    let mtype: i64 = task.mm().read_obj(addr)?;
    if mtype < 1 {
        return Err(Errno::EINVAL);
    }
    let mut text = vec![0u8; size as usize];
    task.mm().copy_in(addr + 8, &mut text)?;
    let reg = task.kernel.sysv_msg.clone();
    let waiters = {
        let mut g = reg.lock();
        let q = g.by_id(id)?;
        if !ipc_permitted(task, &q.owner, MAY_WRITE) {
            return Err(Errno::EACCES);
        }
        [q.waiters.clone(), reg.room.clone()]
    };
    let pid = task.pid();
    let mut text = Some(text);
    let fits = |g: &mut Inner, n: u64| -> Result<bool, Errno> {
        let all = g.bytes();
        let q = g.by_id(id).map_err(|_| Errno::EIDRM)?;
        Ok(q.cbytes + n <= q.qbytes
            && (q.msgs.len() as u64) < q.qbytes
            && all + n <= SENTRY_MAX_BYTES)
    };
    let blk = task.blocker();
    blk.block_with(
        &waiters,
        flags & IPC_NOWAIT != 0,
        None,
        Errno::EAGAIN,
        Errno::EINTR,
        || {
            let mut g = reg.lock();
            let n = size;
            if !fits(&mut g, n)? {
                return Ok(None);
            }
            let q = g.by_id(id)?;
            q.cbytes += n;
            q.msgs.push_back((mtype, text.take().unwrap_or_default()));
            q.lspid = pid;
            q.stime = now();
            Ok(Some(()))
        },
        || {
            let mut g = reg.lock();
            fits(&mut g, size).unwrap_or(true)
        },
    )?;
    waiters[0].notify();
    Ok(())
}

/// The position of the message `msgtyp` selects (msgrcv(2)).
fn pick(q: &Queue, msgtyp: i64, except: bool) -> Option<usize> {
    if msgtyp == 0 {
        return (!q.msgs.is_empty()).then_some(0);
    }
    if msgtyp > 0 {
        return q
            .msgs
            .iter()
            .position(|(t, _)| if except { *t != msgtyp } else { *t == msgtyp });
    }
    // The first of the lowest type not above |msgtyp|.
    let limit = msgtyp.unsigned_abs();
    let mut best: Option<(usize, i64)> = None;
    for (i, (t, _)) in q.msgs.iter().enumerate() {
        if (*t as u64) <= limit && best.is_none_or(|(_, b)| *t < b) {
            best = Some((i, *t));
        }
    }
    best.map(|(i, _)| i)
}

/// `msgrcv(msqid, msgp, msgsz, msgtyp, msgflg)`: the bytes of the message
/// received into `addr`.
pub fn msgrcv(
    task: &mut Task,
    id: i32,
    addr: u64,
    size: i64,
    msgtyp: i64,
    flags: u64,
) -> Result<u64, Errno> {
    if size < 0 {
        return Err(Errno::EINVAL);
    }
    if flags & MSG_COPY != 0 {
        // (MSG_COPY is for checkpointing; not kept here)
        return Err(Errno::ENOSYS);
    }
    let except = flags & MSG_EXCEPT != 0;
    let reg = task.kernel.sysv_msg.clone();
    let waiters = {
        let mut g = reg.lock();
        let q = g.by_id(id)?;
        if !ipc_permitted(task, &q.owner, MAY_READ) {
            return Err(Errno::EACCES);
        }
        q.waiters.clone()
    };
    let pid = task.pid();
    let blk = task.blocker();
    let (mtype, text) = blk
        .block_with(
            std::slice::from_ref(&waiters),
            flags & IPC_NOWAIT != 0,
            None,
            Errno::ENOMSG,
            Errno::EINTR,
            || {
                let mut g = reg.lock();
                let q = g.by_id(id).map_err(|_| Errno::EIDRM)?;
                let Some(i) = pick(q, msgtyp, except) else {
                    return Ok(None);
                };
                if q.msgs[i].1.len() as i64 > size && flags & MSG_NOERROR == 0 {
                    return Err(Errno::E2BIG);
                }
                let (t, mut text) = q.msgs.remove(i).unwrap_or_default();
                q.cbytes -= text.len() as u64;
                q.lrpid = pid;
                q.rtime = now();
                text.truncate(size as usize);
                Ok(Some((t, text)))
            },
            || {
                let mut g = reg.lock();
                match g.by_id(id) {
                    Ok(q) => pick(q, msgtyp, except).is_some(),
                    Err(_) => true,
                }
            },
        )
        .map_err(|e| if e == Errno::EAGAIN { Errno::ENOMSG } else { e })?;
    // Room for this queue's senders, and for any waiting on all queues.
    waiters.notify();
    reg.room.notify();
    task.mm().write_obj(addr, &mtype)?;
    task.mm().copy_out(addr + 8, &text)?;
    Ok(text.len() as u64)
}

/// `struct msqid64_ds` (x86-64).
#[repr(C)]
#[derive(Clone, Copy, Default, zerocopy::IntoBytes, zerocopy::FromBytes, zerocopy::Immutable)]
struct MsqidDs {
    perm: IpcPerm,
    stime: i64,
    rtime: i64,
    ctime: i64,
    cbytes: u64,
    qnum: u64,
    qbytes: u64,
    lspid: i32,
    lrpid: i32,
    unused4: u64,
    unused5: u64,
}

/// `struct msginfo`.
#[repr(C)]
#[derive(Clone, Copy, Default, zerocopy::IntoBytes, zerocopy::FromBytes, zerocopy::Immutable)]
struct MsgInfo {
    msgpool: i32,
    msgmap: i32,
    msgmax: i32,
    msgmnb: i32,
    msgmni: i32,
    msgssz: i32,
    msgtql: i32,
    msgseg: u16,
    pad: u16,
}

fn stat_of(q: &Queue) -> MsqidDs {
    MsqidDs {
        perm: IpcPerm {
            key: q.key,
            uid: q.owner.uid,
            gid: q.owner.gid,
            cuid: q.owner.cuid,
            cgid: q.owner.cgid,
            mode: q.owner.mode,
            seq: q.seq,
            ..IpcPerm::default()
        },
        stime: q.stime,
        rtime: q.rtime,
        ctime: q.ctime,
        cbytes: q.cbytes,
        qnum: q.msgs.len() as u64,
        qbytes: q.qbytes,
        lspid: q.lspid,
        lrpid: q.lrpid,
        ..MsqidDs::default()
    }
}

/// `msgctl(msqid, cmd, buf)`.
pub fn msgctl(task: &Task, id: i32, cmd: u64, buf: u64) -> Result<u64, Errno> {
    let cmd = cmd & !IPC_64;
    let reg = task.kernel.sysv_msg.clone();
    match cmd {
        IPC_INFO | MSG_INFO => {
            let limits = task.kernel.sysv_limits();
            let g = reg.lock();
            let info = MsgInfo {
                // MSG_INFO: queues, messages and bytes in use instead
                msgpool: if cmd == MSG_INFO {
                    g.queues.len() as i32
                } else {
                    (MSGMNI * MSGMNB as usize / 1024) as i32
                },
                msgmap: if cmd == MSG_INFO {
                    g.queues.values().map(|q| q.msgs.len()).sum::<usize>() as i32
                } else {
                    MSGMNB as i32
                },
                msgmax: limits.msgmax,
                msgmnb: limits.msgmnb,
                msgmni: limits.msgmni,
                msgssz: 16,
                msgtql: if cmd == MSG_INFO {
                    g.bytes() as i32
                } else {
                    MSGMNB as i32
                },
                msgseg: 0xffff,
                pad: 0,
            };
            let last = g.queues.keys().next_back().copied().unwrap_or(0);
            drop(g);
            task.mm().write_obj(buf, &info)?;
            Ok(last as u64)
        }
        IPC_STAT | MSG_STAT | MSG_STAT_ANY => {
            let mut g = reg.lock();
            let by_index = cmd != IPC_STAT;
            let (ds, ret) = stat_lookup(
                task,
                &mut g.queues,
                id,
                by_index,
                cmd == MSG_STAT_ANY,
                stat_of,
            )?;
            drop(g);
            task.mm().write_obj(buf, &ds)?;
            Ok(ret as u64)
        }
        IPC_SET => {
            let new: MsqidDs = task.mm().read_obj(buf)?;
            let raise = task.capable(cap::SYS_RESOURCE);
            let msgmnb = task.kernel.sysv_limits().msgmnb.max(0) as u64;
            let mut g = reg.lock();
            let q = g.by_id(id)?;
            if !ipc_may_change(task, &q.owner) {
                return Err(Errno::EPERM);
            }
            if new.qbytes > msgmnb && !raise {
                return Err(Errno::EPERM);
            }
            q.owner.uid = new.perm.uid;
            q.owner.gid = new.perm.gid;
            q.owner.mode = (q.owner.mode & !0o777) | (new.perm.mode & 0o777);
            q.qbytes = new.qbytes;
            q.ctime = now();
            let waiters = q.waiters.clone();
            drop(g);
            waiters.notify();
            Ok(0)
        }
        IPC_RMID => {
            let mut g = reg.lock();
            let q = g.by_id(id)?;
            if !ipc_may_change(task, &q.owner) {
                return Err(Errno::EPERM);
            }
            let gone = g.queues.remove(&(id % SEQ_MULTIPLIER));
            drop(g);
            // Its waiters find it gone (EIDRM); its bytes are free.
            if let Some(q) = gone {
                q.waiters.notify();
            }
            reg.room.notify();
            Ok(0)
        }
        _ => Err(Errno::EINVAL),
    }
}

/// `/proc/sysvipc/msg`, as Linux's `sysvipc_msg_proc_show` lays it out.
pub fn proc_table(reg: &Registry) -> String {
    let g = reg.lock();
    let mut out = String::from(
        "       key      msqid perms      cbytes       qnum lspid lrpid   uid   gid  cuid  cgid      stime      rtime      ctime\n",
    );
    for (&idx, q) in &g.queues {
        out.push_str(&format!(
            "{:10} {:10}  {:4o}  {:10} {:10} {:5} {:5} {:5} {:5} {:5} {:5} {:10} {:10} {:10}\n",
            q.key,
            id_of(idx, q.seq),
            q.owner.mode,
            q.cbytes,
            q.msgs.len(),
            q.lspid,
            q.lrpid,
            q.owner.uid,
            q.owner.gid,
            q.owner.cuid,
            q.owner.cgid,
            q.stime,
            q.rtime,
            q.ctime
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(msgs: &[(i64, &[u8])]) -> Queue {
        Queue {
            key: 7,
            owner: Owner {
                uid: 1,
                gid: 2,
                cuid: 1,
                cgid: 2,
                mode: 0o640,
            },
            seq: 3,
            stime: 10,
            rtime: 11,
            ctime: 12,
            lspid: 5,
            lrpid: 6,
            qbytes: 4000,
            cbytes: msgs.iter().map(|(_, t)| t.len() as u64).sum(),
            msgs: msgs.iter().map(|(ty, t)| (*ty, t.to_vec())).collect(),
            waiters: WaitQueue::new(),
        }
    }

    #[test]
    fn queues_round_trip_and_mangled_images_are_refused_or_read() {
        let reg = Registry::default();
        reg.lock()
            .queues
            .insert(4, queue(&[(1, b"first"), (2, b"second")]));
        let mut e = Enc::default();
        reg.save(&mut e);
        let back = Registry::default();
        back.restore(&mut Dec::new(&e.buf)).expect("restored");
        let g = back.lock();
        let q = g.queues.get(&4).expect("queue 4");
        assert_eq!(q.msgs, queue(&[(1, b"first"), (2, b"second")]).msgs);
        assert_eq!(
            (q.cbytes, q.qbytes, q.owner.mode, q.lrpid),
            (11, 4000, 0o640, 6)
        );
        drop(g);
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..3_000 {
            let mut m = e.buf.clone();
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let i = (rng as usize) % m.len();
            m[i] = (rng >> 40) as u8;
            let r = Registry::default();
            if r.restore(&mut Dec::new(&m)).is_ok() {
                let g = r.lock();
                for q in g.queues.values() {
                    assert!(q.cbytes <= q.qbytes && q.msgs.iter().all(|(t, _)| *t > 0));
                }
            }
        }
    }
}
