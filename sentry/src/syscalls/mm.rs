//! Memory calls: `mmap` and friends, answered by the Sentry's `mm`.

use std::sync::Arc;

use abi::{Errno, MapFlags, MAP_TYPE};
use platform::Prot;

use super::args::{Args, SyscallArgs};
use crate::kernel::task::Task;
use crate::mm::guestio::{Stage, IO_CHUNK};
use crate::mm::{page_down, page_up, Backing, MemoryManager};
use crate::vfs::file::{FileDescription, FileKind};
use crate::vfs::Device;
use crate::PAGE_SIZE;

fn prot_arg(bits: u64) -> Result<Prot, Errno> {
    // PROT_GROWSDOWN/PROT_GROWSUP are accepted and ignored.
    if bits & !(7 | 0x0100_0000 | 0x0200_0000) != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(Prot::from_bits(bits))
}

pub fn sys_mmap(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (addr, len, prot, fd, off) = (a.ptr(0), a.u64(1), a.u64(2), a.fd(4), a.u64(5));
    let flags: MapFlags = a.flags(3);
    // The descriptor is looked at first, as mmap(2)'s EBADF comes first.
    let file = if flags.contains(MapFlags::ANONYMOUS) {
        None
    } else {
        Some(task.fds().file(fd.into())?)
    };
    mmap(task, addr, len, prot, flags, file, off)
}

/// `mmap` of `file` (`None`: anonymous memory).
fn mmap(
    task: &mut Task,
    addr: u64,
    len: u64,
    prot: u64,
    flags: MapFlags,
    file: Option<Arc<FileDescription>>,
    off: u64,
) -> Result<u64, Errno> {
    let anonymous = file.is_none();
    let source = file
        .clone()
        .map(|f| f as Arc<dyn std::any::Any + Send + Sync>);
    let prot = prot_arg(prot)?;
    let kind = flags.bits() & MAP_TYPE;
    let shared = match kind {
        k if k == MapFlags::PRIVATE.bits() => false,
        k if k == MapFlags::SHARED.bits() => true,
        // MAP_SHARED_VALIDATE refuses flags it does not know, for files;
        // anonymous mappings do not take it at all.
        k if k == MapFlags::SHARED_VALIDATE.bits() && !anonymous => {
            const LEGACY: u64 = 0x03
                | 0x10
                | 0x20
                | 0x100
                | 0x800
                | 0x1000
                | 0x2000
                | 0x4000
                | 0x8000
                | 0x10000
                | 0x20000
                | 0x40000
                | 0x0400_0000;
            if flags.bits() & !LEGACY != 0 {
                return Err(Errno::EOPNOTSUPP);
            }
            true
        }
        _ => return Err(Errno::EINVAL),
    };
    if len == 0 || !off.is_multiple_of(PAGE_SIZE) {
        return Err(Errno::EINVAL);
    }
    let len = page_up(len).ok_or(Errno::ENOMEM)?;
    if len > task.mm().max_addr() {
        return Err(Errno::ENOMEM);
    }
    let mut backing = Backing::Anon;
    let mut mem_content: Option<(Arc<crate::fsimpl::tmpfs::MemInode>, u64, u64)> = None;
    let mut shared_region = None;
    let mut may_write = true;
    let mut may_exec = true;
    let mut writer = None;
    let mut sigbus_from = None;
    let mut cached: Option<Arc<crate::vfs::HostFile>> = None;
    let mut private_of = None;
    if let Some(file) = file {
        let readable = file.flags() & abi::O_ACCMODE != abi::OpenFlags::WRONLY.bits();
        if matches!(file.kind, FileKind::Path) {
            return Err(Errno::EBADF);
        }
        if !readable {
            return Err(Errno::EACCES);
        }
        // (do_mmap(): no executable mapping of a file on a noexec mount)
        let fs = &task.kernel.fs;
        if file.location.as_ref().is_some_and(|l| fs.noexec(l)) {
            if prot.exec {
                return Err(Errno::EPERM);
            }
            may_exec = false;
        }
        match &file.kind {
            FileKind::Dev(Device::Zero) => {}
            FileKind::Impl(_)
                if let Some(m) = file
                    .downcast_arc::<crate::fsimpl::tmpfs::MemInode>()
                    .filter(|m| !m.is_dir()) =>
            {
                let m = &m;
                if shared {
                    // A shared mapping writes the file: only through a
                    // description open for writing (EACCES), and never
                    // once a write seal is set (EPERM, memfd_check_seals_mmap()).
                    // Mappings that may become writable pin the file
                    // against F_SEAL_WRITE (VM_SHARED | VM_MAYWRITE).
                    may_write = file.writable() && !m.write_sealed();
                    if prot.write && !file.writable() {
                        return Err(Errno::EACCES);
                    }
                    if prot.write || may_write {
                        writer = Some(m.writable_mapping()?);
                    }
                    // The mapping is the file's own pages.
                    shared_region = Some(m.shared_region(off, len)?);
                } else {
                    // A private copy of the contents.
                    let size = m.size();
                    // An empty read refuses what is not a regular file
                    // before anything is mapped.
                    m.read_at(off, &mut [])?;
                    mem_content = Some((m.clone(), off, size.saturating_sub(off).min(len)));
                }
            }
            FileKind::Host(h) if !file.is_dir() && shared && on_writable_volume(&file) => {
                // A writable volume's file: the mapping is its page cache's
                // pages, shared with every other mapping of it and written
                // back to the host (see crate::mm::pagecache).
                if prot.write && !file.writable() {
                    return Err(Errno::EACCES);
                }
                // The host descriptor of an O_APPEND description writes
                // at the end whatever the offset, so it cannot write pages
                // back: such a mapping stays read-only.
                let append = file.flags() & abi::OpenFlags::APPEND.bits() != 0;
                may_write = file.writable() && !append;
                if prot.write && !may_write {
                    return Err(Errno::EACCES);
                }
                cached = Some(h.clone());
            }
            FileKind::Host(h) if !file.is_dir() => {
                // The root is read-only: a shared mapping can never become
                // writable (mprotect answers EACCES too); so is a read-only
                // volume.
                if shared {
                    if prot.write {
                        return Err(Errno::EACCES);
                    }
                    may_write = false;
                }
                let size = file.stat()?.size.max(0) as u64;
                if !shared {
                    // A private copy starts from what shared mappings of
                    // the file hold, not yet written back.
                    private_of = task
                        .kernel
                        .fs
                        .page_caches
                        .lookup(h)
                        .map(|c| (c, off, len.min(size.saturating_sub(off))));
                }
                let name = file.location.as_ref().map(|l| l.path()).unwrap_or_default();
                // Pages wholly past the end of the file raise SIGBUS.
                let valid = page_up(size.saturating_sub(off)).unwrap_or(u64::MAX);
                if valid < len {
                    sigbus_from = Some(valid);
                }
                // A file of the root's image: the mapping shares its
                // image until written (see crate::mm::fileimage).
                let image = match private_of {
                    None if !shared => h.image(task.mm().memory_file())?,
                    _ => None,
                };
                backing = Backing::File {
                    file: h.clone(),
                    pos: off,
                    avail: len.min(size.saturating_sub(off)),
                    name,
                    image,
                };
            }
            FileKind::Impl(_)
                if let Some(nv) = file.downcast::<crate::fsimpl::nvidia::NvFile>() =>
            {
                return Err(nv.refuse_mmap(off, len));
            }
            _ => return Err(Errno::ENODEV),
        }
    }
    let fixed = flags.intersects(MapFlags::FIXED | MapFlags::FIXED_NOREPLACE);
    if fixed && !addr.is_multiple_of(PAGE_SIZE) {
        return Err(Errno::EINVAL);
    }
    let no_replace = flags.contains(MapFlags::FIXED_NOREPLACE) && !flags.contains(MapFlags::FIXED);
    // The address is chosen under the same hold of the address space's
    // lock as the mapping is made (Linux's mmap_lock): two threads mapping
    // at once must never both be given the same free range, the second
    // mapping then replacing the first under the feet of its owner.
    let place = |mm: &MemoryManager| -> Result<u64, Errno> {
        if !fixed {
            return mm.pick_address(addr, len);
        }
        if no_replace {
            let end = addr.checked_add(len).ok_or(Errno::ENOMEM)?;
            if mm.vmas().any(|v| v.start < end && v.end > addr) {
                return Err(Errno::EEXIST);
            }
        }
        Ok(addr)
    };
    if let Some(h) = cached {
        // The pages are read from the host before the address space is
        // locked.
        let pin = task.kernel.fs.page_caches.pin(&h)?;
        let h: Arc<dyn crate::mm::Mappable> = h;
        let pieces = crate::mm::pagecache::FileCache::map(pin, &h, may_write, off, len)?;
        let mut mm = task.mm();
        let start = place(&mm)?;
        for (at, region) in pieces {
            let n = region.len();
            if let Err(e) = mm.map_region(start + at, n, prot, region, 0) {
                let _ = mm.unmap_range(start, start + at);
                return Err(e);
            }
            mm.set_limits(start + at, (may_write, may_exec), None);
            mm.set_source(start + at, source.clone());
        }
        return Ok(start);
    }
    let mut mm = task.mm();
    let start = place(&mm)?;
    if let Some(region) = shared_region {
        mm.map_region(start, len, prot, region, off)?;
        mm.set_limits(start, (may_write, may_exec), None);
        mm.set_writer(start, writer);
        mm.set_source(start, source);
        return Ok(start);
    }
    mm.map_fixed(start, len, prot, shared, backing)?;
    if let (Some((cache, pos, n)), Some(v)) = (private_of, mm.find_vma(start)) {
        cache.copy_present(pos, n, v.offset);
    }
    if let Some((m, off, n)) = mem_content {
        // Copied a piece at a time: the Sentry never holds the file's
        // length (a private mapping of a large tmpfs file).
        let mut stage = Stage::new();
        let mut done = 0u64;
        while done < n {
            let piece = stage.space(IO_CHUNK.min((n - done) as usize));
            let got = m.read_at(off + done, piece)?;
            if got == 0 {
                break;
            }
            mm.poke(start + done, &piece[..got])?;
            done += got as u64;
        }
    }
    mm.set_limits(start, (may_write, may_exec), sigbus_from.map(|v| start + v));
    if shared {
        mm.set_source(start, source);
    }
    Ok(start)
}

/// `remap_file_pages(start, size, prot, pgoff, flags)`, as Linux has done
/// it since 4.0: the range, within one shared file mapping (or several
/// adjacent ones of the same file), is mapped again from page `pgoff` of
/// the file, with the mapping's protection; `prot` must be 0.
pub fn sys_remap_file_pages(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    // `flags`: Linux keeps MAP_NONBLOCK alone, which changes nothing here.
    let (start, size, prot, pgoff) = (a.ptr(0), a.u64(1), a.u64(2), a.u64(3));
    if prot != 0 {
        return Err(Errno::EINVAL);
    }
    let (start, size) = (page_down(start), page_down(size));
    let end = start
        .checked_add(size)
        .filter(|&e| e > start)
        .ok_or(Errno::EINVAL)?;
    let pos = pgoff
        .checked_add(size / PAGE_SIZE)
        .and_then(|_| pgoff.checked_mul(PAGE_SIZE))
        .ok_or(Errno::EINVAL)?;
    let (file, vprot) = {
        let mm = task.mm();
        let first = mm.find_vma(start).ok_or(Errno::EINVAL)?;
        if !first.shared {
            return Err(Errno::EINVAL);
        }
        let src = first.source.clone().ok_or(Errno::EINVAL)?;
        // Adjacent VMAs of the same file with the same protection, no hole.
        let (mut at, prot) = (first.end, first.prot);
        while at < end {
            let v = mm.find_vma(at).ok_or(Errno::EINVAL)?;
            let same = v.source.as_ref().is_some_and(|s| Arc::ptr_eq(s, &src));
            if v.start != at || !v.shared || !same || v.prot != prot {
                return Err(Errno::EINVAL);
            }
            at = v.end;
        }
        let file = src
            .downcast::<FileDescription>()
            .map_err(|_| Errno::EINVAL)?;
        (file, prot)
    };
    mmap(
        task,
        start,
        size,
        vprot.bits(),
        MapFlags::SHARED | MapFlags::FIXED,
        Some(file),
        pos,
    )
    .map(|_| 0)
}

/// Whether `file` is on a volume mounted writable (its shared mappings
/// go through the page cache).
fn on_writable_volume(file: &crate::vfs::file::FileDescription) -> bool {
    matches!(
        file.node(),
        Some(crate::vfs::Node::Host { h, .. }) if h.volume() == Some(crate::vfs::VolumeKind::ReadWrite)
    )
}

fn range(addr: u64, len: u64) -> Result<(u64, u64), Errno> {
    if !addr.is_multiple_of(PAGE_SIZE) {
        return Err(Errno::EINVAL);
    }
    let end = page_up(addr.checked_add(len).ok_or(Errno::EINVAL)?).ok_or(Errno::EINVAL)?;
    Ok((addr, end))
}

pub fn sys_munmap(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (addr, len) = (a.ptr(0), a.u64(1));
    if len == 0 {
        return Err(Errno::EINVAL);
    }
    let (start, end) = range(addr, len)?;
    if end > task.mm().max_addr() {
        return Err(Errno::EINVAL);
    }
    task.mm().unmap_range(start, end).map(|()| 0)
}

pub fn sys_mprotect(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let prot = prot_arg(a.u64(2))?;
    let (start, end) = range(a.ptr(0), a.u64(1))?;
    if start == end {
        return Ok(0);
    }
    task.mm().protect(start, end, prot).map(|()| 0)
}

pub fn sys_brk(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    Ok(task.mm().brk(a.ptr(0)))
}

/// `process_madvise(pidfd, iovec, vlen, advice, flags)`: `madvise` over
/// each range of the vector, in the caller's own memory with any advice,
/// in another process's only with the hints (`MADV_COLD`, `PAGEOUT`,
/// `WILLNEED`, `COLLAPSE`: nothing to do here beyond checking the ranges),
/// under the ptrace check and `CAP_SYS_NICE`. The bytes advised; after a
/// failure part-way, those before it.
pub fn sys_process_madvise(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    const UIO_MAXIOV: u64 = 1024;
    const HINTS: [u64; 4] = [20, 21, 3, 25];
    let (pidfd, iov, vlen, advice, flags) = (a.i32(0), a.ptr(1), a.u64(2), a.u64(3), a.u32(4));
    if flags != 0 || vlen > UIO_MAXIOV {
        return Err(Errno::EINVAL);
    }
    let mut ranges = Vec::with_capacity(vlen as usize);
    for i in 0..vlen {
        let v: abi::Iovec = task.mm().read_obj(iov + 16 * i)?;
        ranges.push((v.base, v.len));
    }
    let file = task.fds().file(i64::from(pidfd))?;
    let (target, live) = super::fork::pidfd_process(task, &file)?;
    if !live {
        return Err(Errno::ESRCH);
    }
    let mine = Arc::ptr_eq(&target, &task.proc_);
    if !mine && !HINTS.contains(&advice) {
        return Err(Errno::EINVAL);
    }
    let other = if mine {
        None
    } else {
        super::ptrace::may_access_process(task, &target)?;
        if !task.capable(crate::kernel::auth::cap::SYS_NICE) {
            return Err(Errno::EPERM);
        }
        Some(target.state().info.mm.upgrade().ok_or(Errno::ESRCH)?)
    };
    let mut done = 0u64;
    for (base, len) in ranges {
        let r = match &other {
            None => sys_madvise(task, &[base, len, advice, 0, 0, 0]),
            Some(mm) => hint_range(&crate::sync::Locked::locked(&**mm), base, len),
        };
        match r {
            Ok(_) => done += len,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(done)
}

/// A hint for `[base, base + len)` of `mm`: every page must be mapped.
fn hint_range(mm: &MemoryManager, base: u64, len: u64) -> Result<u64, Errno> {
    let (start, end) = range(base, len)?;
    let mut at = start;
    for v in mm.vmas().filter(|v| v.end > start && v.start < end) {
        if v.start > at {
            return Err(Errno::ENOMEM);
        }
        at = v.end;
    }
    if at < end {
        return Err(Errno::ENOMEM);
    }
    Ok(0)
}

/// `process_mrelease(pidfd, flags)`: the memory of a process being killed
/// is freed as its last thread goes, so there is nothing to hurry; a
/// process that is not dying is `EINVAL`, as on Linux.
pub fn sys_process_mrelease(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    if a.u32(1) != 0 {
        return Err(Errno::EINVAL);
    }
    let file = task.fds().file(i64::from(a.i32(0)))?;
    let (target, _) = super::fork::pidfd_process(task, &file)?;
    let st = target.state();
    if st.group_exit.is_some() || st.exit.is_some() {
        Ok(0)
    } else {
        Err(Errno::EINVAL)
    }
}

pub fn sys_madvise(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    const MADV_DONTNEED: u64 = 4;
    const MADV_FREE: u64 = 8;
    let advice = a.u64(2);
    let (start, end) = range(a.ptr(0), a.u64(1))?;
    if start == end {
        return Ok(0);
    }
    // Every page in the range must be mapped (ENOMEM otherwise).
    let mut at = start;
    for v in task.mm().vmas().filter(|v| v.end > start && v.start < end) {
        if v.start > at {
            return Err(Errno::ENOMEM);
        }
        at = v.end;
    }
    if at < end {
        return Err(Errno::ENOMEM);
    }
    // A sealed VMA keeps the contents of its anonymous private memory that
    // the caller could not write anyway: the advice that discards pages
    // is EPERM there (mm/madvise.c, can_madvise_modify()).
    const DISCARD: [u64; 7] = [MADV_DONTNEED, MADV_FREE, 9, 10, 18, 24, 102];
    if DISCARD.contains(&advice)
        && task.mm().vmas().any(|v| {
            v.end > start
                && v.start < end
                && v.sealed
                && !v.shared
                && matches!(v.backing, Backing::Anon)
                && !v.prot.write
        })
    {
        return Err(Errno::EPERM);
    }
    match advice {
        MADV_DONTNEED | MADV_FREE => task.mm().dontneed(start, end).map(|()| 0),
        0..=3 | 9..=25 | 100 | 101 => Ok(0),
        _ => Err(Errno::EINVAL),
    }
}

/// `mseal(2)`: seals the VMAs of `[addr, addr + len)` against unmapping,
/// moving, replacing and `mprotect` (and, for read-only anonymous memory,
/// the `madvise` advice that discards it). Sealing is for good: nothing
/// undoes it, and a `fork` child's copies are sealed too.
pub fn sys_mseal(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (start, len, flags) = (a.ptr(0), a.u64(1), a.u64(2));
    if flags != 0 || !start.is_multiple_of(PAGE_SIZE) {
        return Err(Errno::EINVAL);
    }
    // A length that rounds up past 2^64, or an end past it, is EINVAL.
    let end = page_up(len)
        .and_then(|l| start.checked_add(l))
        .ok_or(Errno::EINVAL)?;
    if end == start {
        return Ok(0);
    }
    task.mm().seal(start, end).map(|()| 0)
}

pub fn sys_mremap(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    const MREMAP_MAYMOVE: u64 = 1;
    const MREMAP_FIXED: u64 = 2;
    let (old, old_len, new_len) = (a.ptr(0), a.u64(1), a.u64(2));
    let (flags, new_addr) = (a.u64(3), a.ptr(4));
    if flags & !(MREMAP_MAYMOVE | MREMAP_FIXED) != 0 || old % PAGE_SIZE != 0 {
        return Err(Errno::EINVAL);
    }
    if flags & MREMAP_FIXED != 0 && (flags & MREMAP_MAYMOVE == 0 || new_addr % PAGE_SIZE != 0) {
        return Err(Errno::EINVAL);
    }
    let old_len = page_up(old_len).ok_or(Errno::EINVAL)?;
    let new_len = page_up(new_len).ok_or(Errno::EINVAL)?;
    if new_len == 0 || old_len == 0 {
        return Err(Errno::EINVAL);
    }
    let fixed = (flags & MREMAP_FIXED != 0).then_some(new_addr);
    task.mm()
        .remap(old, old_len, new_len, flags & MREMAP_MAYMOVE != 0, fixed)
}

/// `msync(2)`: writes back what shared mappings of volume files in the
/// range hold (whatever the flags: `MS_ASYNC` too, the host has no other
/// way to see the pages); other mappings have nothing to write. `ENOMEM`
/// when part of the range is unmapped, after the mapped parts are synced,
/// as Linux does.
pub fn sys_msync(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    const MS_ASYNC: u64 = 1;
    const MS_INVALIDATE: u64 = 2;
    const MS_SYNC: u64 = 4;
    let flags = a.u64(2);
    if flags & !(MS_ASYNC | MS_INVALIDATE | MS_SYNC) != 0
        || flags & (MS_ASYNC | MS_SYNC) == MS_ASYNC | MS_SYNC
    {
        return Err(Errno::EINVAL);
    }
    let (start, end) = range(a.ptr(0), a.u64(1))?;
    let mut todo = Vec::new();
    let mut at = start;
    let mut hole = false;
    {
        let mm = task.mm();
        for v in mm.vmas().filter(|v| v.end > start && v.start < end) {
            hole |= v.start > at;
            at = v.end;
            if let Backing::Shared(r) = &v.backing {
                let (s, e) = (v.start.max(start), v.end.min(end));
                if let Some((cache, pos)) = r.file_at(v.offset + (s - v.start)) {
                    todo.push((cache.clone(), pos, pos + (e - s)));
                }
            }
        }
    }
    hole |= at < end;
    for (cache, s, e) in todo {
        cache.writeback(Some((s, e)))?;
    }
    if hole {
        return Err(Errno::ENOMEM);
    }
    Ok(0)
}

/// The pages `mlock(2)`-like calls name, checked as Linux checks them:
/// the start rounds down, the length up; a hole is `ENOMEM`. Nothing is
/// locked: the memory file's pages are the host's to page, and
/// `RLIMIT_MEMLOCK` is not counted.
fn lock_range(task: &Task, addr: u64, len: u64) -> Result<u64, Errno> {
    let start = addr & !(PAGE_SIZE - 1);
    let end = (addr % PAGE_SIZE)
        .checked_add(len)
        .and_then(page_up)
        .and_then(|l| start.checked_add(l))
        .ok_or(Errno::ENOMEM)?;
    if end > start && !task.mm().covers(start, end) {
        return Err(Errno::ENOMEM);
    }
    Ok(0)
}

/// `mlock(2)`, `munlock(2)`.
pub fn sys_mlock(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    lock_range(task, a.ptr(0), a.u64(1))
}

/// `mlock2(2)`: `MLOCK_ONFAULT` is the one flag.
pub fn sys_mlock2(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    if a.u64(2) & !1 != 0 {
        return Err(Errno::EINVAL);
    }
    lock_range(task, a.ptr(0), a.u64(1))
}

/// `mlockall(2)`: `MCL_CURRENT`, `MCL_FUTURE`, and `MCL_ONFAULT` with
/// one of them.
pub fn sys_mlockall(_task: &mut Task, a: &Args) -> Result<u64, Errno> {
    match a.u64(0) {
        f if f == 0 || f & !7 != 0 || f == 4 => Err(Errno::EINVAL),
        _ => Ok(0),
    }
}

/// `munlockall(2)`.
pub fn sys_munlockall(_task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    Ok(0)
}

/// `mincore(2)`: a page is resident when the memory file holds it (the
/// Sentry owns every guest page, so there is no other cache to ask).
/// Done a page of `vec` at a time and a VMA at a time, as Linux does: a
/// hole after the first VMA is `ENOMEM` with what came before written.
pub fn sys_mincore(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (mut start, len, mut vec) = (a.ptr(0), a.u64(1), a.ptr(2));
    if !start.is_multiple_of(PAGE_SIZE) {
        return Err(Errno::EINVAL);
    }
    // Linux's access_ok(): a range past user space is ENOMEM.
    if start
        .checked_add(len)
        .is_none_or(|e| e > task.mm().max_addr())
    {
        return Err(Errno::ENOMEM);
    }
    let mut pages = len.div_ceil(PAGE_SIZE);
    let mut chunk = vec![0u8; PAGE_SIZE as usize];
    while pages > 0 {
        let want = pages.min(PAGE_SIZE) as usize;
        let n = task.mm().residency(start, &mut chunk[..want])?;
        task.mm().copy_out(vec, &chunk[..n])?;
        pages -= n as u64;
        vec += n as u64;
        start += n as u64 * PAGE_SIZE;
    }
    Ok(0)
}
