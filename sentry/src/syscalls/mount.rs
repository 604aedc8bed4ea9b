//! Calls that would change or step around the sandbox's file system view:
//! `mount`, `umount2`, `pivot_root`, `chroot`, and file handles
//! (`name_to_handle_at`, `open_by_handle_at`).
//!
//! The mount tree is fixed when the sandbox boots and the Sentry keeps one
//! root for every task, so these answer as Linux answers a process without
//! the capability each needs (`EPERM`), after the argument checks Linux
//! makes first. File handles are refused outright: a handle names an inode
//! by number, past every path check, which is exactly what the
//! `open_by_handle_at` container escape ("shocker") used; gVisor's own file
//! systems do not export handles either (`EOPNOTSUPP`).

use abi::Errno;

use super::{dir_arg, path_arg};
use crate::task::Task;

/// `AT_SYMLINK_FOLLOW`, `AT_EMPTY_PATH` and `AT_HANDLE_FID`: the flags
/// `name_to_handle_at(2)` knows.
const HANDLE_FLAGS: u64 = 0x400 | 0x1000 | 0x200;

/// `mount(2)`: needs `CAP_SYS_ADMIN` in the mount namespace's user
/// namespace, which the guest never holds for the sandbox's tree.
pub fn sys_mount(_task: &mut Task, _a: &[u64; 6]) -> Result<u64, Errno> {
    Err(Errno::EPERM)
}

/// `umount2(2)`: unknown flags are `EINVAL` (checked before privilege, as in
/// Linux's `ksys_umount`), anything else `EPERM`.
pub fn sys_umount2(_task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    // MNT_FORCE | MNT_DETACH | MNT_EXPIRE | UMOUNT_NOFOLLOW
    if a[1] & !0xf != 0 {
        return Err(Errno::EINVAL);
    }
    Err(Errno::EPERM)
}

/// `pivot_root(2)`: `CAP_SYS_ADMIN` is checked before the paths.
pub fn sys_pivot_root(_task: &mut Task, _a: &[u64; 6]) -> Result<u64, Errno> {
    Err(Errno::EPERM)
}

/// `chroot(2)`: the path is resolved and must be a searchable directory
/// (`ENOENT`, `ENOTDIR`, `EACCES` as usual); changing the root then needs
/// `CAP_SYS_CHROOT`, which the Sentry does not grant: every task keeps the
/// sandbox's root.
pub fn sys_chroot(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let path = path_arg(task, a[0])?;
    let loc = task.kernel.fs.resolve(&task.cwd(), &path, true)?;
    if !loc.node().is_dir() {
        return Err(Errno::ENOTDIR);
    }
    super::fs::check_access(task, &loc, 1)?;
    Err(Errno::EPERM)
}

/// `name_to_handle_at(2)`: the flags and the path are checked as Linux
/// checks them; then no file system of the sandbox exports handles.
pub fn sys_name_to_handle_at(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    let flags = a[4];
    if flags & !HANDLE_FLAGS != 0 {
        return Err(Errno::EINVAL);
    }
    let path = path_arg(task, a[1])?;
    if path.is_empty() {
        if flags & 0x1000 == 0 {
            return Err(Errno::ENOENT);
        }
        if a[0] as i32 != abi::AT_FDCWD {
            task.fds().file(a[0] as i32 as i64)?;
        }
    } else {
        let start = dir_arg(task, a[0], &path)?;
        task.kernel.fs.resolve(&start, &path, flags & 0x400 != 0)?;
    }
    Err(Errno::EOPNOTSUPP)
}

/// `open_by_handle_at(2)`: the directory naming the mount must be open
/// (`EBADF`); then `CAP_DAC_READ_SEARCH` is needed.
pub fn sys_open_by_handle_at(task: &mut Task, a: &[u64; 6]) -> Result<u64, Errno> {
    if a[0] as i32 != abi::AT_FDCWD {
        task.fds().file(a[0] as i32 as i64)?;
    }
    Err(Errno::EPERM)
}
