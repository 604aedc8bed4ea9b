//! `memfd_create(2)` and file sealing (`fcntl` `F_ADD_SEALS`/`F_GET_SEALS`):
//! anonymous tmpfs files, made in an internal tmpfs that draws on the
//! sandbox's shared in-memory budget like every other tmpfs.

use std::sync::Arc;

use abi::{Errno, OpenFlags};

use super::args::{Args, SyscallArgs};
use crate::fsimpl::tmpfs::{seal, MemInode};
use crate::kernel::task::Task;
use crate::vfs::file::{FileDescription, FileKind};

const MFD_CLOEXEC: u64 = 0x1;
const MFD_ALLOW_SEALING: u64 = 0x2;
const MFD_HUGETLB: u64 = 0x4;
const MFD_NOEXEC_SEAL: u64 = 0x8;
const MFD_EXEC: u64 = 0x10;
/// `MFD_ALL_FLAGS` (include/uapi/linux/memfd.h).
const MFD_ALL: u64 = MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB | MFD_NOEXEC_SEAL | MFD_EXEC;
/// `MFD_HUGE_MASK << MFD_HUGE_SHIFT`: a huge page size, only with
/// `MFD_HUGETLB`.
const MFD_HUGE_SIZE: u64 = 0x3f << 26;
/// `MFD_NAME_MAX_LEN`: the name's bytes, without the `memfd:` prefix and
/// the NUL.
const MFD_NAME_MAX: usize = 249;

/// `memfd_create(2)`. The checks come in Linux's order (mm/memfd.c):
/// flags, then the name (longer than 249 bytes is `EINVAL`), then the
/// file.
pub fn sys_memfd_create(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    // `unsigned int flags`
    let flags = u64::from(a.u32(1));
    let known = if flags & MFD_HUGETLB != 0 {
        MFD_ALL | MFD_HUGE_SIZE
    } else {
        MFD_ALL
    };
    if flags & !known != 0 || (flags & MFD_EXEC != 0 && flags & MFD_NOEXEC_SEAL != 0) {
        return Err(Errno::EINVAL);
    }
    let name = super::string_arg(task, a.ptr(0), MFD_NAME_MAX)?;
    if flags & MFD_HUGETLB != 0 {
        // The memory file has no huge pages to give: answered as a kernel
        // built without hugetlbfs answers (hugetlb_file_setup()).
        return Err(Errno::ENOSYS);
    }
    let noexec = flags & MFD_NOEXEC_SEAL != 0;
    let root =
        crate::fsimpl::tmpfs::downcast(task.kernel.fs.memfd_root().clone()).ok_or(Errno::EIO)?;
    let inode = MemInode::memfd(
        root.fs(),
        name,
        flags & MFD_ALLOW_SEALING != 0 || noexec,
        task.ids,
    )?;
    if noexec {
        // MFD_NOEXEC_SEAL: no execute bits, and they may never come back.
        inode.set_mode(abi::S_IFREG | 0o666);
        inode.add_seals(seal::EXEC)?;
    }
    // Linux opens the file O_RDWR | O_LARGEFILE (F_GETFL shows both).
    let status = OpenFlags::RDWR.bits() | OpenFlags::LARGEFILE.bits();
    let file = FileDescription::new(FileKind::Impl(inode), None, status);
    task.install_fd(file, flags & MFD_CLOEXEC != 0)
}

/// The tmpfs inode whose seals `file` reaches: the sandbox's tmpfs files
/// (`/tmp`, `/dev/shm`, memfds) have seals; everything else, including the
/// root overlay's files (overlayfs has none on Linux), is `EINVAL`.
fn sealable(task: &Task, file: &FileDescription) -> Result<Arc<MemInode>, Errno> {
    let upper = crate::fsimpl::tmpfs::downcast(task.kernel.fs.upper.clone());
    match file.downcast_arc::<MemInode>() {
        Some(m) if !upper.is_some_and(|u| Arc::ptr_eq(m.fs(), u.fs())) => Ok(m),
        _ => Err(Errno::EINVAL),
    }
}

/// `fcntl(F_ADD_SEALS)`: the description must be open for writing
/// (`EPERM`), the seals known (`EINVAL`), the file a tmpfs file
/// (`EINVAL`), in that order (memfd_add_seals()).
pub fn add_seals(task: &Task, file: &FileDescription, arg: u64) -> Result<u64, Errno> {
    if !file.writable() {
        return Err(Errno::EPERM);
    }
    // The argument is an `unsigned int`.
    let seals = arg as u32;
    if seals & !seal::ALL != 0 {
        return Err(Errno::EINVAL);
    }
    sealable(task, file)?.add_seals(seals).map(|()| 0)
}

/// `fcntl(F_GET_SEALS)`.
pub fn get_seals(task: &Task, file: &FileDescription) -> Result<u64, Errno> {
    sealable(task, file)?.seals().map(u64::from)
}
