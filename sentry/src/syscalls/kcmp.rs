//! `kcmp(2)`: whether two threads share a kernel object, under the ptrace
//! access check, with Linux's ordering of obfuscated identities.

use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, OnceLock};

use abi::{Errno, KcmpEpollSlot};

use super::args::{Args, SyscallArgs};
use crate::fsimpl::events::Epoll;
use crate::kernel::task::{Task, Thread};
use crate::sync::Locked;
use crate::vfs::file::FileDescription;

const KCMP_FILE: u64 = 0;
const KCMP_VM: u64 = 1;
const KCMP_FILES: u64 = 2;
const KCMP_FS: u64 = 3;
const KCMP_SIGHAND: u64 = 4;
const KCMP_IO: u64 = 5;
const KCMP_SYSVSEM: u64 = 6;
const KCMP_EPOLL_TFD: u64 = 7;

/// An identity as the guest may compare it: Sentry addresses are
/// scrambled by a bijection keyed per sandbox and per type, as Linux's
/// `kptr_obfuscate` does, so their order leaks no heap layout.
fn obfuscate(ty: u64, addr: usize) -> u64 {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    let keys = KEYS.get_or_init(RandomState::new);
    let xor = keys.hash_one((ty, 0u8));
    let mul = keys.hash_one((ty, 1u8)) | 1;
    (addr as u64 ^ xor).wrapping_mul(mul)
}

/// 0 equal, 1 less, 2 greater (kcmp(2)).
fn order(ty: u64, a: usize, b: usize) -> u64 {
    let (a, b) = (obfuscate(ty, a), obfuscate(ty, b));
    u64::from(a < b) | (u64::from(a > b) << 1)
}

/// Descriptor `fd` of `th`'s table (`EBADF`, also once it has exited).
pub(super) fn file_of(th: &Thread, fd: u64) -> Result<Arc<FileDescription>, Errno> {
    let fds = th.process.state().info.fds.upgrade().ok_or(Errno::EBADF)?;
    let file = fds.locked().file(fd as i32 as i64);
    file
}

/// The identity of the `ty` object of `th`. Descriptor tables, fs
/// contexts and address spaces are its process's; signal handlers are
/// its thread group's; an I/O context is the thread's own (`CLONE_IO`
/// is not shared); a System V undo list is the thread group's once made.
fn object(th: &Arc<Thread>, ty: u64) -> usize {
    let st = th.process.state();
    match ty {
        KCMP_VM => st.info.mm.as_ptr() as usize,
        KCMP_FILES => st.info.fds.as_ptr() as usize,
        KCMP_FS => st.info.fs.as_ptr() as usize,
        KCMP_SIGHAND => Arc::as_ptr(&th.process) as usize,
        KCMP_IO => Arc::as_ptr(th) as usize,
        _ if st.sem_undo_list => Arc::as_ptr(&th.process) as usize,
        _ => 0,
    }
}

/// `kcmp(pid1, pid2, type, idx1, idx2)`.
pub fn sys_kcmp(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (pid1, pid2, ty, idx1, idx2) = (a.i32(0), a.i32(1), a.u64(2), a.u64(3), a.ptr(4));
    let thread = |tid| task.kernel.thread(tid).ok_or(Errno::ESRCH);
    let (t1, t2) = (thread(pid1)?, thread(pid2)?);
    super::ptrace::may_access(task, &t1)?;
    super::ptrace::may_access(task, &t2)?;
    match ty {
        KCMP_FILE => {
            let (f1, f2) = (file_of(&t1, idx1)?, file_of(&t2, idx2)?);
            Ok(order(
                KCMP_FILE,
                Arc::as_ptr(&f1) as usize,
                Arc::as_ptr(&f2) as usize,
            ))
        }
        KCMP_VM | KCMP_FILES | KCMP_FS | KCMP_SIGHAND | KCMP_IO | KCMP_SYSVSEM => {
            Ok(order(ty, object(&t1, ty), object(&t2, ty)))
        }
        KCMP_EPOLL_TFD => {
            let slot: KcmpEpollSlot = task.mm().read_obj(idx2)?;
            let f1 = file_of(&t1, idx1)?;
            let ep = file_of(&t2, u64::from(slot.efd))?;
            let target = ep
                .downcast::<Epoll>()
                .ok_or(Errno::EINVAL)?
                .target(slot.tfd as i32, slot.toff.into())
                .ok_or(Errno::ENOENT)?;
            Ok(order(
                KCMP_FILE,
                Arc::as_ptr(&f1) as usize,
                Arc::as_ptr(&target) as usize,
            ))
        }
        _ => Err(Errno::EINVAL),
    }
}
