//! Calls that would change or step around the sandbox's file system view:
//! `mount`, `umount2`, `pivot_root`, `chroot`, the new mount API (`fsopen`,
//! `fsconfig`, `fsmount`, `fspick`, `open_tree`, `open_tree_attr`,
//! `move_mount`, `mount_setattr`), and file handles (`name_to_handle_at`,
//! `open_by_handle_at`).
//!
//! The sandbox's root (`CAP_SYS_ADMIN`) may mount tmpfs file systems over
//! its directories and unmount them again; they live in the Sentry's
//! memory like every tmpfs, and nothing of the host's can be mounted. The
//! other mount calls answer as Linux answers a process without the
//! capability each needs (`EPERM`), after the argument checks Linux makes
//! first. `chroot` works with `CAP_SYS_CHROOT`, and only ever narrows a
//! process's view of the sandbox's tree.
//!
//! File handles are refused outright: a handle names an inode by number,
//! past every path check, which is exactly what the `open_by_handle_at`
//! container escape ("shocker") used; gVisor's own file systems do not
//! export handles either (`EOPNOTSUPP`).

use abi::{Errno, OpenFlags};

use super::args::{Args, SyscallArgs};
use super::{dir_arg, path_arg, string_arg};
use crate::kernel::task::Task;
use crate::vfs::file::{FileDescription, FileKind};
use crate::vfs::MountFlags;

/// `AT_SYMLINK_NOFOLLOW`.
const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
/// `AT_NO_AUTOMOUNT`.
const AT_NO_AUTOMOUNT: u64 = 0x800;
/// `AT_EMPTY_PATH`.
const AT_EMPTY_PATH: u64 = 0x1000;
/// `AT_RECURSIVE`.
const AT_RECURSIVE: u64 = 0x8000;
/// `OPEN_TREE_CLONE`: a detached copy of the mount tree.
const OPEN_TREE_CLONE: u64 = 1;
/// `OPEN_TREE_CLOEXEC` (`O_CLOEXEC`).
const OPEN_TREE_CLOEXEC: u64 = 0o2_000_000;

/// `AT_SYMLINK_FOLLOW`, `AT_EMPTY_PATH` and `AT_HANDLE_FID`: the flags
/// `name_to_handle_at(2)` knows.
const HANDLE_FLAGS: u64 = 0x400 | 0x1000 | 0x200;

/// `mount(2)` flags.
const MS_RDONLY: u64 = 1;
const MS_REMOUNT: u64 = 32;
const MS_BIND: u64 = 4096;
const MS_MOVE: u64 = 8192;
const MS_REC: u64 = 16384;
/// `MS_UNBINDABLE`, `MS_PRIVATE`, `MS_SLAVE`, `MS_SHARED`.
const MS_PROPAGATION: u64 = 0xf << 17;
/// `MS_MGC_VAL`, which old programs put in the top half.
const MS_MGC_VAL: u64 = 0xc0ed_0000;
/// File systems Linux has and the sandbox does not mount (yet): `EPERM`;
/// a name not here and not tmpfs is `ENODEV`, as on Linux.
const KNOWN_TYPES: &[&[u8]] = &[
    b"proc",
    b"sysfs",
    b"devpts",
    b"mqueue",
    b"cgroup",
    b"cgroup2",
    b"ramfs",
    b"overlay",
    b"devtmpfs",
    b"bpf",
    b"tracefs",
    b"debugfs",
    b"securityfs",
    b"hugetlbfs",
    b"fusectl",
    b"configfs",
    b"binfmt_misc",
    b"pstore",
    b"autofs",
    b"fuse",
    b"nfs",
    b"ext4",
    b"xfs",
    b"btrfs",
    b"vfat",
    b"iso9660",
    b"squashfs",
    b"nsfs",
];

/// `mount(2)`: a new tmpfs (`size=` and `mode=` options), a bind mount of
/// a place in the sandbox's own tree, a remount of either read-only or
/// writable, and the propagation types (accepted: the sandbox has one
/// mount table, every mount private to it). Move mounts and every other
/// file system are refused with `EPERM`.
pub fn sys_mount(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let page = crate::PAGE_SIZE as usize;
    let string = |task: &Task, p: u64| -> Result<Option<Vec<u8>>, Errno> {
        (p != 0).then(|| string_arg(task, p, page)).transpose()
    };
    let fstype = string(task, a.ptr(2))?;
    let source = string(task, a.ptr(0))?;
    let data = string(task, a.ptr(4))?;
    let path = path_arg(task, a.ptr(1))?;
    let target = task.resolve(&task.cwd(), &path, true)?;
    let mut flags = a.u64(3);
    if flags & 0xffff_0000 == MS_MGC_VAL {
        flags &= 0xffff;
    }
    // A Landlock domain forbids every mount change (landlock(7)): one
    // could hide a rule's file behind another.
    if !task.capable(crate::kernel::auth::cap::SYS_ADMIN) || task.landlock.is_some() {
        return Err(Errno::EPERM);
    }
    let fs = &task.kernel.fs;
    if flags & MS_PROPAGATION != 0 {
        return if (flags & MS_PROPAGATION).count_ones() == 1 {
            Ok(0)
        } else {
            Err(Errno::EINVAL)
        };
    }
    if flags & MS_REMOUNT != 0 {
        if flags & MS_BIND == 0 && data.as_deref().is_some_and(|d| !d.is_empty()) {
            return Err(Errno::EPERM);
        }
        return fs
            .guest_remount(
                &target,
                flags & MS_RDONLY != 0,
                MountFlags::of_mount(flags),
                flags & MS_BIND != 0,
            )
            .map(|()| 0);
    }
    if flags & MS_BIND != 0 {
        // (MS_RDONLY takes a remount, as on Linux)
        let source = source.filter(|s| !s.is_empty()).ok_or(Errno::EINVAL)?;
        let from = task.resolve(&task.cwd(), &source, true)?;
        return fs
            .guest_bind(&from, &target, flags & MS_REC != 0)
            .map(|()| 0);
    }
    if flags & MS_MOVE != 0 {
        return Err(Errno::EPERM);
    }
    let fstype = fstype.filter(|t| !t.is_empty()).ok_or(Errno::EINVAL)?;
    if fstype != b"tmpfs" {
        return Err(if KNOWN_TYPES.contains(&fstype.as_slice()) {
            Errno::EPERM
        } else {
            Errno::ENODEV
        });
    }
    let (mode, size) = tmpfs_options(data.as_deref().unwrap_or_default(), fs.memory_limit())?;
    let ro = flags & MS_RDONLY != 0;
    fs.guest_mount_tmpfs(&target, mode, size, ro, MountFlags::of_mount(flags))
        .map(|()| 0)
}

/// tmpfs's `size=` (bytes with k, m, g or a percentage of the sandbox's
/// memory) and `mode=` (octal) options; any other is `EINVAL`.
fn tmpfs_options(data: &[u8], memory: u64) -> Result<(u32, Option<u64>), Errno> {
    let (mut mode, mut size) = (0o1777, None);
    for opt in data.split(|&b| b == b',').filter(|o| !o.is_empty()) {
        let opt = std::str::from_utf8(opt).map_err(|_| Errno::EINVAL)?;
        match opt.split_once('=') {
            Some(("mode", v)) => {
                mode = u32::from_str_radix(v, 8).map_err(|_| Errno::EINVAL)? & 0o7777;
            }
            Some(("size", v)) => {
                let (num, mult) = match v.as_bytes().last() {
                    Some(b'k' | b'K') => (&v[..v.len() - 1], 1 << 10),
                    Some(b'm' | b'M') => (&v[..v.len() - 1], 1 << 20),
                    Some(b'g' | b'G') => (&v[..v.len() - 1], 1 << 30),
                    Some(b'%') => (&v[..v.len() - 1], 0),
                    _ => (v, 1),
                };
                let n: u64 = num.parse().map_err(|_| Errno::EINVAL)?;
                let bytes = if mult == 0 {
                    (memory / 100).checked_mul(n)
                } else {
                    n.checked_mul(mult)
                }
                .ok_or(Errno::EINVAL)?;
                // Whole pages, as Linux rounds it (a size past the
                // sandbox's memory is cut to it when mounted).
                size = Some(
                    bytes
                        .div_ceil(crate::PAGE_SIZE)
                        .saturating_mul(crate::PAGE_SIZE),
                );
            }
            _ => return Err(Errno::EINVAL),
        }
    }
    Ok((mode, size))
}

/// `umount2(2)`: unknown flags are `EINVAL` (checked first, as in Linux's
/// `ksys_umount`), then the path, then `CAP_SYS_ADMIN`; only what the
/// guest mounted can be unmounted (the sandbox's own mounts are `EBUSY`).
pub fn sys_umount2(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    // MNT_FORCE | MNT_DETACH | MNT_EXPIRE | UMOUNT_NOFOLLOW
    const UMOUNT_NOFOLLOW: u64 = 8;
    if a.u64(1) & !0xf != 0 {
        return Err(Errno::EINVAL);
    }
    let path = path_arg(task, a.ptr(0))?;
    let target = task.resolve(&task.cwd(), &path, a.u64(1) & UMOUNT_NOFOLLOW == 0)?;
    if !task.capable(crate::kernel::auth::cap::SYS_ADMIN) || task.landlock.is_some() {
        return Err(Errno::EPERM);
    }
    const MNT_DETACH: u64 = 2;
    task.kernel
        .fs
        .guest_umount(&target, a.u64(1) & MNT_DETACH != 0)
        .map(|()| 0)
}

/// `pivot_root(2)`: `CAP_SYS_ADMIN` is checked before the paths.
pub fn sys_pivot_root(_task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    Err(Errno::EPERM)
}

/// `chroot(2)`: the path is resolved and must be a searchable directory
/// (`ENOENT`, `ENOTDIR`, `EACCES` as usual); then `CAP_SYS_CHROOT` is
/// needed. The new root is where this
/// process's absolute paths start and its `..` stops; it is shared with
/// `CLONE_FS` threads, inherited by `fork`, kept across `execve`.
///
/// The root can only narrow the view: it is a place inside the sandbox's
/// tree, and every walk still stops `..` at the sandbox's own root. As on
/// Linux, a process holding a directory outside its new root (an open
/// descriptor, its working directory) can climb out of the `chroot` with
/// `..`, but never out of the sandbox.
pub fn sys_chroot(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let path = path_arg(task, a.ptr(0))?;
    let loc = task.resolve(&task.cwd(), &path, true)?;
    if !loc.node().is_dir() {
        return Err(Errno::ENOTDIR);
    }
    super::fs::check_access(task, &loc, 1)?;
    if !task.capable(crate::kernel::auth::cap::SYS_CHROOT) {
        return Err(Errno::EPERM);
    }
    task.fs_ctx().root = loc;
    Ok(0)
}

/// `name_to_handle_at(2)`: the flags and the path are checked as Linux
/// checks them; then no file system of the sandbox exports handles.
pub fn sys_name_to_handle_at(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (dirfd, flags) = (a.fd(0), a.u64(4));
    if flags & !HANDLE_FLAGS != 0 {
        return Err(Errno::EINVAL);
    }
    let path = path_arg(task, a.ptr(1))?;
    if path.is_empty() {
        if flags & 0x1000 == 0 {
            return Err(Errno::ENOENT);
        }
        if dirfd != abi::AT_FDCWD {
            task.fds().file(dirfd.into())?;
        }
    } else {
        let start = dir_arg(task, a.u64(0), &path)?;
        task.resolve(&start, &path, flags & 0x400 != 0)?;
    }
    Err(Errno::EOPNOTSUPP)
}

/// `open_by_handle_at(2)`: the directory naming the mount must be open
/// (`EBADF`); then `CAP_DAC_READ_SEARCH` is needed.
pub fn sys_open_by_handle_at(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let mount_fd = a.fd(0);
    if mount_fd != abi::AT_FDCWD {
        task.fds().file(mount_fd.into())?;
    }
    Err(Errno::EPERM)
}

/// `fsopen(2)`: `CAP_SYS_ADMIN` is checked before anything else.
pub fn sys_fsopen(_task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    Err(Errno::EPERM)
}

/// `fspick(2)`: `CAP_SYS_ADMIN` first, as for `fsopen`.
pub fn sys_fspick(_task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    Err(Errno::EPERM)
}

/// `fsmount(2)`: `may_mount()` comes first.
pub fn sys_fsmount(_task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    Err(Errno::EPERM)
}

/// `move_mount(2)`: `may_mount()` comes first.
pub fn sys_move_mount(_task: &mut Task, _a: &Args) -> Result<u64, Errno> {
    Err(Errno::EPERM)
}

/// `fsconfig(2)` needs no capability of its own: it works on a file system
/// context descriptor, which only `fsopen`/`fspick` make and which the
/// sandbox never hands out. So, as Linux checks: a negative descriptor or
/// arguments that do not fit the command are `EINVAL`, an unknown command
/// `EOPNOTSUPP`, a closed descriptor `EBADF`, and any open one is not a
/// context (`EINVAL`).
pub fn sys_fsconfig(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let fd = a.fd(0);
    let (key, value, aux) = (a.ptr(2) != 0, a.ptr(3) != 0, a.i32(4));
    if fd < 0 {
        return Err(Errno::EINVAL);
    }
    let fits = match a.u32(1) {
        // FSCONFIG_SET_FLAG
        0 => key && !value && aux == 0,
        // FSCONFIG_SET_STRING
        1 => key && value && aux == 0,
        // FSCONFIG_SET_BINARY: 1 byte to 1 MiB
        2 => key && value && aux > 0 && aux <= 1 << 20,
        // FSCONFIG_SET_PATH, FSCONFIG_SET_PATH_EMPTY
        3 | 4 => key && value && (aux == abi::AT_FDCWD || aux >= 0),
        // FSCONFIG_SET_FD
        5 => key && !value && aux >= 0,
        // FSCONFIG_CMD_CREATE, _RECONFIGURE, _CREATE_EXCL
        6..=8 => !key && !value && aux == 0,
        _ => return Err(Errno::EOPNOTSUPP),
    };
    if !fits {
        return Err(Errno::EINVAL);
    }
    task.fds().file(fd.into())?;
    Err(Errno::EINVAL)
}

/// `mount_setattr(2)`: unknown flags are `EINVAL`, the size of `struct
/// mount_attr` is checked (`E2BIG` past a page, `EINVAL` below version 0),
/// then `may_mount()` refuses.
pub fn sys_mount_setattr(_task: &mut Task, a: &Args) -> Result<u64, Errno> {
    /// `MOUNT_ATTR_SIZE_VER0`
    const SIZE_VER0: u64 = 32;
    let (flags, size) = (u64::from(a.u32(2)), a.u64(4));
    if flags & !(AT_EMPTY_PATH | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT) != 0 {
        return Err(Errno::EINVAL);
    }
    if size > crate::PAGE_SIZE {
        return Err(Errno::E2BIG);
    }
    if size < SIZE_VER0 {
        return Err(Errno::EINVAL);
    }
    Err(Errno::EPERM)
}

/// `open_tree(2)`. Without `OPEN_TREE_CLONE` it only opens the path as an
/// `O_PATH` descriptor, which any process may do; a clone of the mount tree
/// needs `may_mount()` (`EPERM`), checked after the flags and before the
/// path, as in Linux.
pub fn sys_open_tree(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (dfd, filename, flags) = (a.fd(0), a.ptr(1), u64::from(a.u32(2)));
    let known = AT_EMPTY_PATH
        | AT_NO_AUTOMOUNT
        | AT_RECURSIVE
        | AT_SYMLINK_NOFOLLOW
        | OPEN_TREE_CLONE
        | OPEN_TREE_CLOEXEC;
    if flags & !known != 0 || flags & (AT_RECURSIVE | OPEN_TREE_CLONE) == AT_RECURSIVE {
        return Err(Errno::EINVAL);
    }
    if flags & OPEN_TREE_CLONE != 0 {
        return Err(Errno::EPERM);
    }
    let cloexec = flags & OPEN_TREE_CLOEXEC != 0;
    let path = path_arg(task, filename)?;
    if path.is_empty() && flags & AT_EMPTY_PATH != 0 {
        // The descriptor's own place, reopened as O_PATH.
        let loc = if dfd == abi::AT_FDCWD {
            task.cwd()
        } else {
            let file = task.fds().file(dfd.into())?;
            file.location.clone().ok_or(Errno::ENOENT)?
        };
        let file = FileDescription::new(FileKind::Path, Some(loc), OpenFlags::PATH.bits());
        return task.install_fd(file, cloexec);
    }
    let mut open = OpenFlags::PATH;
    if flags & AT_SYMLINK_NOFOLLOW != 0 {
        open |= OpenFlags::NOFOLLOW;
    }
    if cloexec {
        open |= OpenFlags::CLOEXEC;
    }
    super::fs::open_with(task, a.u64(0), filename, open.bits(), 0, Default::default())
}

/// `open_tree_attr(2)` (Linux 6.15): `open_tree` that also sets the
/// attributes of the mount it opens. A null `struct mount_attr` with a size
/// is `EINVAL`; then come `open_tree`'s own checks (flags, the
/// `OPEN_TREE_CLONE` privilege, the path); without attributes that is all.
/// With them, the size is checked as `mount_setattr(2)` checks it (`E2BIG`
/// past a page, `EINVAL` below version 0), then the privilege to change a
/// mount, which the guest never holds over the sandbox's tree, refuses
/// (`EPERM`, before the attributes are read, as Linux answers a process
/// without `CAP_SYS_ADMIN`).
pub fn sys_open_tree_attr(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    /// `MOUNT_ATTR_SIZE_VER0`
    const SIZE_VER0: u64 = 32;
    let (uattr, usize) = (a.ptr(3), a.u64(4));
    if uattr == 0 && usize != 0 {
        return Err(Errno::EINVAL);
    }
    let fd = sys_open_tree(task, a)?;
    if uattr == 0 {
        return Ok(fd);
    }
    // The path resolved (its errors come first); the descriptor made for it
    // is not the caller's to keep.
    drop(task.fds().remove(fd as i64));
    if usize > crate::PAGE_SIZE {
        return Err(Errno::E2BIG);
    }
    if usize < SIZE_VER0 {
        return Err(Errno::EINVAL);
    }
    Err(Errno::EPERM)
}
