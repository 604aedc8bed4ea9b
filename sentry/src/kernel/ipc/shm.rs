//! System V shared memory (`shmget`, `shmat`, `shmdt`, `shmctl`), kept in
//! the Sentry: the sandbox is an IPC namespace of its own.
//!
//! A segment is a [`SharedRegion`] of the memory file. Each attachment is a
//! shared mapping of it, so `fork` shares it and `execve`, `exit` and
//! `munmap` let it go like any mapping; the number of attachments
//! (`shm_nattch`) is the number of mappings that hold the region, as
//! Linux's count of the segment's VMAs is. A segment removed while attached
//! (`IPC_RMID`) loses its key and goes, memory and all, with its last
//! mapping.
//!
//! Identifiers are built as Linux builds them (`ipc_idr_alloc`): an index
//! taken cyclically below max(64, 3/2 of those in use), plus 32768 times a
//! sequence number that grows each time the index wraps; so a guest sees
//! the ones a new IPC namespace would give it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use abi::Errno;
use platform::Prot;

use crate::kernel::auth::{cap, MAY_READ, MAY_WRITE};
use crate::kernel::task::Task;
use crate::mm::{page_up, Backing, SharedRegion};
use crate::PAGE_SIZE;

// The constants System V objects share (`msg` and `sem` take them from here).
pub(crate) use abi::ipc::{
    IPC_64, IPC_CREAT, IPC_EXCL, IPC_INFO, IPC_PRIVATE, IPC_RMID, IPC_SET, IPC_STAT,
};
use abi::ipc::{
    SHMMNI, SHM_DEST, SHM_EXEC, SHM_INFO, SHM_LOCK, SHM_LOCKED, SHM_RDONLY, SHM_REMAP, SHM_RND,
    SHM_STAT, SHM_STAT_ANY, SHM_UNLOCK,
};
/// `SEQ_MULTIPLIER` (`IPCMNI`).
pub(crate) const SEQ_MULTIPLIER: i32 = 32768;

/// One segment.
#[derive(Debug)]
struct Segment {
    key: i32,
    size: u64,
    uid: u32,
    gid: u32,
    cuid: u32,
    cgid: u32,
    mode: u32,
    seq: u16,
    cpid: i32,
    lpid: i32,
    atime: i64,
    dtime: i64,
    ctime: i64,
    /// held while the segment is not removed; the mappings hold the rest
    region: Option<Arc<SharedRegion>>,
    /// what the mappings hold, to count them and find the memory after
    /// removal
    weak: Weak<SharedRegion>,
}

impl Segment {
    fn owner(&self) -> Owner {
        Owner {
            uid: self.uid,
            gid: self.gid,
            cuid: self.cuid,
            cgid: self.cgid,
            mode: self.mode,
        }
    }

    fn nattch(&self) -> u64 {
        let held = usize::from(self.region.is_some());
        (self.weak.strong_count() - held.min(self.weak.strong_count())) as u64
    }

    fn gone(&self) -> bool {
        self.region.is_none() && self.weak.strong_count() == 0
    }
}

/// The sandbox's segments.
#[derive(Debug, Default)]
pub struct Registry {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// by index
    segs: BTreeMap<i32, Segment>,
    /// the sequence number of new identifiers
    seq: u16,
    /// the last index handed out (indices are taken cyclically); -1 at
    /// first
    last_idx: i32,
}

impl Registry {
    /// Segments in the namespace.
    pub fn count(&self) -> usize {
        self.lock().segs.len()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        // Removed segments whose last mapping went.
        g.segs.retain(|_, s| !s.gone());
        g
    }
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            segs: BTreeMap::new(),
            seq: 0,
            last_idx: -1,
        }
    }
}

/// Sequence numbers wrap here (`ipcid_seq_max()`: `INT_MAX / IPCMNI`).
const SEQ_MAX: u16 = (i32::MAX / SEQ_MULTIPLIER) as u16;

/// A new object's index and sequence number, as Linux's `ipc_idr_alloc`
/// picks them: the next free index after the last one, below max(64, 3/2
/// of `in_use`) and `most`; the sequence number grows when the index wraps.
/// Its identifier is `seq * 32768 + index`.
pub(crate) fn new_id(
    seq: &mut u16,
    last_idx: &mut i32,
    in_use: usize,
    most: usize,
    taken: impl Fn(i32) -> bool,
) -> Result<(i32, u16), Errno> {
    let max = (in_use * 3 / 2).clamp(64, most) as i32;
    let from = *last_idx + 1;
    let idx = (from..max)
        .chain(0..from.min(max))
        .find(|&i| !taken(i))
        .ok_or(Errno::ENOSPC)?;
    if idx <= *last_idx {
        *seq = (*seq + 1) % SEQ_MAX;
    }
    *last_idx = idx;
    Ok((idx, *seq))
}

impl Inner {
    /// The segment named by `id`: its index and sequence number must match.
    fn by_id(&mut self, id: i32) -> Result<(i32, &mut Segment), Errno> {
        if id < 0 {
            return Err(Errno::EINVAL);
        }
        let idx = id % SEQ_MULTIPLIER;
        match self.segs.get_mut(&idx) {
            Some(s) if i32::from(s.seq) == id / SEQ_MULTIPLIER => Ok((idx, s)),
            _ => Err(Errno::EINVAL),
        }
    }

    /// A free index and the sequence number that goes with it.
    fn new_index(&mut self) -> Result<(i32, u16), Errno> {
        let segs = &self.segs;
        let (idx, seq) = new_id(&mut self.seq, &mut self.last_idx, segs.len(), SHMMNI, |i| {
            segs.contains_key(&i)
        })?;
        Ok((idx, seq))
    }

    fn pages(&self) -> u64 {
        self.segs
            .values()
            .filter(|s| !s.gone())
            .map(|s| page_up(s.size).unwrap_or(u64::MAX) / PAGE_SIZE)
            .sum()
    }
}

pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The owner, creator and mode of a System V object.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Owner {
    pub uid: u32,
    pub gid: u32,
    pub cuid: u32,
    pub cgid: u32,
    pub mode: u32,
}

impl Owner {
    /// The five words a checkpoint image holds of it.
    pub(crate) fn save(&self, e: &mut crate::mm::snapshot::Enc) {
        for w in [self.uid, self.gid, self.cuid, self.cgid, self.mode] {
            e.u32(w);
        }
    }

    /// What [`Owner::save`] wrote (only the mode's permission bits).
    pub(crate) fn restore(
        d: &mut crate::mm::snapshot::Dec<'_>,
    ) -> Result<Owner, crate::mm::snapshot::Bad> {
        Ok(Owner {
            uid: d.u32()?,
            gid: d.u32()?,
            cuid: d.u32()?,
            cgid: d.u32()?,
            mode: d.u32()? & 0o777,
        })
    }
}

/// The ipc permission check (Linux's `ipcperms`): the owner's or
/// creator's bits, the group's, the others'; `CAP_IPC_OWNER` passes.
pub(crate) fn ipc_permitted(task: &Task, o: &Owner, want: u32) -> bool {
    let c = &task.creds;
    let bits = if c.uid[1] == o.uid || c.uid[1] == o.cuid {
        o.mode >> 6
    } else if c.in_group(o.gid) || c.in_group(o.cgid) {
        o.mode >> 3
    } else {
        o.mode
    } & 7;
    want & !bits == 0 || task.capable(CAP_IPC_OWNER)
}

/// Whether the caller owns or made an object, or has `CAP_SYS_ADMIN`
/// (`IPC_SET`, `IPC_RMID`).
pub(crate) fn ipc_may_change(task: &Task, o: &Owner) -> bool {
    let euid = task.creds.uid[1];
    euid == o.uid || euid == o.cuid || task.capable(cap::SYS_ADMIN)
}

/// What the tables of System V semaphores and message queues need of
/// their objects.
pub(crate) trait IpcObject {
    /// the sequence number of its identifier
    fn seq(&self) -> u16;
    /// its owner, creator and mode
    fn owner(&self) -> &Owner;
}

/// The identifier of the object at index `idx` with sequence number `seq`.
pub(crate) fn id_of(idx: i32, seq: u16) -> i32 {
    i32::from(seq) * SEQ_MULTIPLIER + idx
}

/// The object `id` names in `objs`, by index: its sequence number must
/// match too (`EINVAL` otherwise, as for an object removed meanwhile).
pub(crate) fn lookup<T: IpcObject>(objs: &mut BTreeMap<i32, T>, id: i32) -> Result<&mut T, Errno> {
    if id < 0 {
        return Err(Errno::EINVAL);
    }
    match objs.get_mut(&(id % SEQ_MULTIPLIER)) {
        Some(o) if o.seq() == (id / SEQ_MULTIPLIER) as u16 => Ok(o),
        _ => Err(Errno::EINVAL),
    }
}

/// `IPC_STAT` (`by_index` false: `id` is an identifier, returns 0) or the
/// `*_STAT`/`*_STAT_ANY` commands (`by_index`: `id` is an index, returns
/// the identifier); read permission is checked unless `any`.
pub(crate) fn stat_lookup<T: IpcObject, D>(
    task: &Task,
    objs: &mut BTreeMap<i32, T>,
    id: i32,
    by_index: bool,
    any: bool,
    stat: impl Fn(&T) -> D,
) -> Result<(D, i32), Errno> {
    let (o, ret) = if by_index {
        let o = objs.get(&id).ok_or(Errno::EINVAL)?;
        (o, id_of(id, o.seq()))
    } else {
        (&*lookup(objs, id)?, 0)
    };
    if !any && !ipc_permitted(task, o.owner(), MAY_READ) {
        return Err(Errno::EACCES);
    }
    Ok((stat(o), ret))
}

fn permitted(task: &Task, s: &Segment, want: u32) -> bool {
    ipc_permitted(task, &s.owner(), want)
}

fn may_change(task: &Task, s: &Segment) -> bool {
    ipc_may_change(task, &s.owner())
}

/// `CAP_IPC_OWNER`.
const CAP_IPC_OWNER: u32 = 15;

/// `shmget(key, size, shmflg)`: the identifier of the segment.
pub fn shmget(task: &Task, key: i32, size: u64, flags: u64) -> Result<i32, Errno> {
    let reg = task.kernel.sysv_shm.clone();
    let mut g = reg.lock();
    if key != IPC_PRIVATE {
        let found = g
            .segs
            .iter_mut()
            .find(|(_, s)| s.key == key && s.region.is_some());
        if let Some((&idx, s)) = found {
            if flags & (IPC_CREAT | IPC_EXCL) == IPC_CREAT | IPC_EXCL {
                return Err(Errno::EEXIST);
            }
            if size > s.size {
                return Err(Errno::EINVAL);
            }
            let want = ((flags as u32 & 0o777) >> 6) & (MAY_READ | MAY_WRITE);
            if !permitted(task, s, want) {
                return Err(Errno::EACCES);
            }
            return Ok(id_of(idx, s.seq));
        }
        if flags & IPC_CREAT == 0 {
            return Err(Errno::ENOENT);
        }
    }
    let limits = task.kernel.sysv_limits();
    if !(1..=limits.shmmax).contains(&size) {
        return Err(Errno::EINVAL);
    }
    let pages = page_up(size).ok_or(Errno::EINVAL)? / PAGE_SIZE;
    if g.pages().saturating_add(pages) > limits.shmall {
        return Err(Errno::ENOSPC);
    }
    if !super::room_for_one(g.segs.len(), limits.shmmni) {
        return Err(Errno::ENOSPC);
    }
    let region = SharedRegion::new(&task.kernel.memory, pages * PAGE_SIZE)?;
    let (idx, seq) = g.new_index()?;
    let (uid, gid) = (task.creds.uid[1], task.creds.gid[1]);
    let seg = Segment {
        key,
        size,
        uid,
        gid,
        cuid: uid,
        cgid: gid,
        mode: flags as u32 & 0o777,
        seq,
        cpid: task.pid(),
        lpid: 0,
        atime: 0,
        dtime: 0,
        ctime: now(),
        weak: Arc::downgrade(&region),
        region: Some(region),
    };
    g.segs.insert(idx, seg);
    Ok(id_of(idx, seq))
}

/// `shmat(shmid, shmaddr, shmflg)`: the address the segment is attached at.
pub fn shmat(task: &Task, id: i32, addr: u64, flags: u64) -> Result<u64, Errno> {
    let reg = task.kernel.sysv_shm.clone();
    let (region, size) = {
        let mut g = reg.lock();
        let (_, s) = g.by_id(id)?;
        let want = if flags & SHM_RDONLY != 0 {
            MAY_READ
        } else {
            MAY_READ | MAY_WRITE
        };
        if !permitted(task, s, want) {
            return Err(Errno::EACCES);
        }
        let region = s.weak.upgrade().ok_or(Errno::EIDRM)?;
        (region, s.size)
    };
    let len = page_up(size).ok_or(Errno::EINVAL)?;
    let prot = Prot {
        read: true,
        write: flags & SHM_RDONLY == 0,
        exec: flags & SHM_EXEC != 0,
    };
    let start = {
        let mut mm = task.mm();
        let start = if addr == 0 {
            mm.pick_address(0, len)?
        } else {
            let at = if flags & SHM_RND != 0 {
                addr & !(PAGE_SIZE - 1)
            } else if !addr.is_multiple_of(PAGE_SIZE) {
                return Err(Errno::EINVAL);
            } else {
                addr
            };
            if at == 0 {
                return Err(Errno::EINVAL);
            }
            let end = at.checked_add(len).ok_or(Errno::EINVAL)?;
            if flags & SHM_REMAP == 0 && mm.vmas().any(|v| v.start < end && v.end > at) {
                return Err(Errno::EINVAL);
            }
            at
        };
        mm.map_region(start, len, prot, region, 0)?;
        mm.set_limits(start, (flags & SHM_RDONLY == 0, true), None);
        start
    };
    let mut g = reg.lock();
    if let Ok((_, s)) = g.by_id(id) {
        s.atime = now();
        s.lpid = task.pid();
    }
    Ok(start)
}

/// `shmdt(shmaddr)`: detaches the attachment that starts at `addr`.
pub fn shmdt(task: &Task, addr: u64) -> Result<(), Errno> {
    if !addr.is_multiple_of(PAGE_SIZE) {
        return Err(Errno::EINVAL);
    }
    let reg = task.kernel.sysv_shm.clone();
    // The mapping there must be the start of a segment's attachment.
    let (region, end) = {
        let mm = task.mm();
        let v = mm
            .find_vma(addr)
            .filter(|v| v.start == addr)
            .ok_or(Errno::EINVAL)?;
        let Backing::Shared(r) = &v.backing else {
            return Err(Errno::EINVAL);
        };
        if v.offset != r.offset() {
            return Err(Errno::EINVAL);
        }
        (r.clone(), addr.checked_add(r.len()).ok_or(Errno::EINVAL)?)
    };
    let id = {
        let g = reg.lock();
        let found = g
            .segs
            .iter()
            .find(|(_, s)| s.weak.as_ptr() == Arc::as_ptr(&region))
            .map(|(&idx, s)| id_of(idx, s.seq));
        found.ok_or(Errno::EINVAL)?
    };
    {
        // Every mapping of that segment from `addr` on within its size
        // (mprotect may have split the attachment).
        let mut mm = task.mm();
        let ours: Vec<(u64, u64)> = mm
            .vmas()
            .filter(|v| v.start >= addr && v.start < end)
            .filter(|v| matches!(&v.backing, Backing::Shared(r) if Arc::ptr_eq(r, &region)))
            .map(|v| (v.start, v.end))
            .collect();
        drop(region);
        for (s, e) in ours {
            mm.unmap_range(s, e)?;
        }
    }
    let mut g = reg.lock();
    if let Ok((_, s)) = g.by_id(id) {
        s.dtime = now();
        s.lpid = task.pid();
    }
    Ok(())
}

/// `struct ipc64_perm`.
#[repr(C)]
#[derive(Clone, Copy, Default, zerocopy::IntoBytes, zerocopy::FromBytes, zerocopy::Immutable)]
pub(crate) struct IpcPerm {
    pub key: i32,
    pub uid: u32,
    pub gid: u32,
    pub cuid: u32,
    pub cgid: u32,
    pub mode: u32,
    pub seq: u16,
    pub pad2: u16,
    pub pad3: u32,
    pub unused: [u64; 2],
}

/// `struct shmid64_ds` (x86-64).
#[repr(C)]
#[derive(Clone, Copy, Default, zerocopy::IntoBytes, zerocopy::FromBytes, zerocopy::Immutable)]
struct ShmidDs {
    perm: IpcPerm,
    segsz: u64,
    atime: i64,
    dtime: i64,
    ctime: i64,
    cpid: i32,
    lpid: i32,
    nattch: u64,
    unused: [u64; 2],
}

/// `struct shminfo64`.
#[repr(C)]
#[derive(Clone, Copy, Default, zerocopy::IntoBytes, zerocopy::FromBytes, zerocopy::Immutable)]
struct ShmInfo64 {
    shmmax: u64,
    shmmin: u64,
    shmmni: u64,
    shmseg: u64,
    shmall: u64,
    unused: [u64; 4],
}

/// `struct shm_info`.
#[repr(C)]
#[derive(Clone, Copy, Default, zerocopy::IntoBytes, zerocopy::FromBytes, zerocopy::Immutable)]
struct ShmInfo {
    used_ids: i32,
    pad: i32,
    shm_tot: u64,
    shm_rss: u64,
    shm_swp: u64,
    swap_attempts: u64,
    swap_successes: u64,
}

fn stat_of(s: &Segment) -> ShmidDs {
    ShmidDs {
        perm: IpcPerm {
            key: s.key,
            uid: s.uid,
            gid: s.gid,
            cuid: s.cuid,
            cgid: s.cgid,
            mode: s.mode,
            seq: s.seq,
            ..IpcPerm::default()
        },
        segsz: s.size,
        atime: s.atime,
        dtime: s.dtime,
        ctime: s.ctime,
        cpid: s.cpid,
        lpid: s.lpid,
        nattch: s.nattch(),
        unused: [0; 2],
    }
}

/// `shmctl(shmid, cmd, buf)`.
pub fn shmctl(task: &Task, id: i32, cmd: u64, buf: u64) -> Result<u64, Errno> {
    let cmd = cmd & !IPC_64;
    let reg = task.kernel.sysv_shm.clone();
    match cmd {
        IPC_INFO => {
            let limits = task.kernel.sysv_limits();
            let info = ShmInfo64 {
                shmmax: limits.shmmax,
                shmmin: 1,
                shmmni: limits.shmmni as u64,
                // (SHMSEG, a constant)
                shmseg: SHMMNI as u64,
                shmall: limits.shmall,
                unused: [0; 4],
            };
            task.mm().write_obj(buf, &info)?;
            let g = reg.lock();
            Ok(g.segs.keys().next_back().copied().unwrap_or(0) as u64)
        }
        SHM_INFO => {
            let g = reg.lock();
            let info = ShmInfo {
                used_ids: g.segs.len() as i32,
                shm_tot: g.pages(),
                shm_rss: g.pages(),
                ..ShmInfo::default()
            };
            let last = g.segs.keys().next_back().copied().unwrap_or(0);
            drop(g);
            task.mm().write_obj(buf, &info)?;
            Ok(last as u64)
        }
        IPC_STAT | SHM_STAT | SHM_STAT_ANY => {
            let mut g = reg.lock();
            let (ds, ret) = if cmd == IPC_STAT {
                let (_, s) = g.by_id(id)?;
                if !permitted(task, s, MAY_READ) {
                    return Err(Errno::EACCES);
                }
                (stat_of(s), 0)
            } else {
                // By index; returns the identifier.
                let s = g.segs.get(&id).ok_or(Errno::EINVAL)?;
                if cmd == SHM_STAT && !permitted(task, s, MAY_READ) {
                    return Err(Errno::EACCES);
                }
                (stat_of(s), id_of(id, s.seq))
            };
            drop(g);
            task.mm().write_obj(buf, &ds)?;
            Ok(ret as u64)
        }
        IPC_SET => {
            let new: ShmidDs = task.mm().read_obj(buf)?;
            let mut g = reg.lock();
            let (_, s) = g.by_id(id)?;
            if !may_change(task, s) {
                return Err(Errno::EPERM);
            }
            s.uid = new.perm.uid;
            s.gid = new.perm.gid;
            s.mode = (s.mode & !0o777) | (new.perm.mode & 0o777);
            s.ctime = now();
            Ok(0)
        }
        IPC_RMID => {
            let mut g = reg.lock();
            let (idx, s) = g.by_id(id)?;
            if !may_change(task, s) {
                return Err(Errno::EPERM);
            }
            // Gone now if nothing maps it, else with its last mapping:
            // meanwhile it has no key and shows SHM_DEST.
            s.region = None;
            s.key = IPC_PRIVATE;
            s.mode |= SHM_DEST;
            s.ctime = now();
            if s.gone() {
                g.segs.remove(&idx);
            }
            Ok(0)
        }
        SHM_LOCK | SHM_UNLOCK => {
            let mut g = reg.lock();
            let (_, s) = g.by_id(id)?;
            if !task.capable(CAP_IPC_LOCK) && !may_change(task, s) {
                return Err(Errno::EPERM);
            }
            if cmd == SHM_LOCK {
                s.mode |= SHM_LOCKED;
            } else {
                s.mode &= !SHM_LOCKED;
            }
            Ok(0)
        }
        _ => Err(Errno::EINVAL),
    }
}

/// `CAP_IPC_LOCK`.
const CAP_IPC_LOCK: u32 = 14;

/// Lets an exiting process's attachments go before its parent hears of the
/// exit (Linux's `exit_mm` comes first), although the address space itself
/// lives a little longer here.
pub fn detach_all(reg: &Registry, mm: &mut crate::mm::MemoryManager) {
    let segs: Vec<*const SharedRegion> = {
        let g = reg.lock();
        g.segs.values().map(|s| s.weak.as_ptr()).collect()
    };
    if segs.is_empty() {
        return;
    }
    let ours: Vec<(u64, u64)> = mm
        .vmas()
        .filter(|v| matches!(&v.backing, Backing::Shared(r) if segs.contains(&Arc::as_ptr(r))))
        .map(|v| (v.start, v.end))
        .collect();
    for (start, end) in ours {
        if let Err(e) = mm.unmap_range(start, end) {
            tracing::debug!("shm detach at exit: {e:?}");
        }
    }
}

/// `/proc/sysvipc/shm`, as Linux's `sysvipc_shm_proc_show` lays it out
/// (64-bit), with the pages of each segment the memory file holds as its
/// resident size.
pub fn proc_table(reg: &Registry, mf: &crate::mm::memfile::MemoryFile) -> String {
    let g = reg.lock();
    let mut out = String::from(
        "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n",
    );
    for (&idx, s) in &g.segs {
        let id = id_of(idx, s.seq);
        let rss = s
            .weak
            .upgrade()
            .map_or(0, |r| mf.populated(r.offset(), r.len()));
        out.push_str(&format!(
            "{:10} {:10}  {:4o} {:21} {:5} {:5}  {:5} {:5} {:5} {:5} {:5} {:10} {:10} {:10} {:21} {:21}\n",
            s.key,
            id,
            s.mode,
            s.size,
            s.cpid,
            s.lpid,
            s.nattch(),
            s.uid,
            s.gid,
            s.cuid,
            s.cgid,
            s.atime,
            s.dtime,
            s.ctime,
            rss,
            0
        ));
    }
    out
}
