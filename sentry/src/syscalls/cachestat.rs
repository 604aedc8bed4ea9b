//! `cachestat(2)`: page-cache statistics of a file range. The Sentry's own
//! files (tmpfs, memfds) report the pages that hold memory, which is their
//! page cache; host files are reported wholly cached, since the Sentry
//! cannot see the host's cache; other files (pipes, sockets, devices) have
//! an empty one, as on Linux.

use abi::{Cachestat, CachestatRange, Errno};

use super::args::{Args, SyscallArgs};
use crate::kernel::auth::{cap, MAY_WRITE};
use crate::kernel::task::Task;
use crate::vfs::file::{FileDescription, FileKind};
use crate::PAGE_SIZE;

/// Linux's `can_do_cachestat()`: the cache of a file is shown only to
/// who could write it (open for writing, owner or `CAP_FOWNER`, or write
/// permission), so another user's reads cannot be spied on.
fn may_see_cache(task: &Task, file: &FileDescription) -> bool {
    if file.writable() || task.capable(cap::FOWNER) {
        return true;
    }
    let Ok(st) = file.stat() else {
        return false;
    };
    st.uid == task.creds.uid[3]
        || task
            .creds
            .may_access(st.mode, st.uid, st.gid, MAY_WRITE)
            .is_ok()
}

pub fn sys_cachestat(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (fd, range, out, flags) = (a.u32(0), a.ptr(1), a.ptr(2), a.u32(3));
    // The fd is an unsigned int; an O_PATH descriptor has no file to ask.
    let file = task.fds().file(i64::from(fd))?;
    if matches!(file.kind, FileKind::Path) {
        return Err(Errno::EBADF);
    }
    let r: CachestatRange = task.mm().read_obj(range)?;
    // (no hugetlbfs file can exist, so no EOPNOTSUPP)
    if !may_see_cache(task, &file) {
        return Err(Errno::EPERM);
    }
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    let first = r.off / PAGE_SIZE;
    // A zero length means to the end of the file; an end past 2^64 wraps,
    // as Linux's does.
    let last = if r.len == 0 {
        u64::MAX
    } else {
        r.off.wrapping_add(r.len).wrapping_sub(1) / PAGE_SIZE
    };
    let cached = match &file.kind {
        FileKind::Impl(_) if let Some(m) = file.downcast::<crate::fsimpl::tmpfs::MemInode>() => {
            m.resident_pages(first, last)
        }
        FileKind::Host(_) if !file.is_dir() => {
            let pages = file.stat()?.size.max(0) as u64;
            let pages = pages.div_ceil(PAGE_SIZE);
            last.saturating_add(1).min(pages).saturating_sub(first)
        }
        _ => 0,
    };
    let cs = Cachestat {
        nr_cache: cached,
        nr_dirty: 0,
        nr_writeback: 0,
        nr_evicted: 0,
        nr_recently_evicted: 0,
    };
    task.mm().write_obj(out, &cs)?;
    Ok(0)
}
