//! `setns(2)`: the sandbox is one namespace of each kind, so joining one
//! of its namespace files is joining the namespace the caller is in: the
//! checks Linux makes, then nothing changes.

use abi::Errno;

use super::args::{Args, SyscallArgs};
use crate::fsimpl::nsfs::NsFile;
use crate::kernel::auth::cap;
use crate::kernel::task::Task;

pub fn sys_setns(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let file = task.fds().file(a.fd(0).into())?;
    let Some(ns) = file.downcast::<NsFile>() else {
        return Err(Errno::EINVAL);
    };
    let nstype = a.u64(1) & 0xffff_ffff;
    if nstype != 0 && nstype != ns.flag {
        return Err(Errno::EINVAL);
    }
    // Joining one's own user namespace is refused (`userns_install`).
    if ns.kind == "user" {
        return Err(Errno::EINVAL);
    }
    if !task.capable(cap::SYS_ADMIN) || (ns.kind == "mnt" && !task.capable(cap::SYS_CHROOT)) {
        return Err(Errno::EPERM);
    }
    Ok(0)
}
