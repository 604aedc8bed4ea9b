//! `membarrier(2)`: a memory barrier on other threads, for programs that
//! keep the fast side of a fence cheap (userspace RCU, the JVM's and .NET's
//! write-buffer flushes). Each thread running guest code is interrupted
//! and waited for ([`crate::kernel::task::Thread::barrier`]).

use abi::Errno;

use super::args::{Args, SyscallArgs};
use crate::kernel::task::{Task, Thread};

const QUERY: u32 = 0;
const GLOBAL: u32 = 1 << 0;
const GLOBAL_EXPEDITED: u32 = 1 << 1;
const REGISTER_GLOBAL_EXPEDITED: u32 = 1 << 2;
const PRIVATE_EXPEDITED: u32 = 1 << 3;
const REGISTER_PRIVATE_EXPEDITED: u32 = 1 << 4;
const GET_REGISTRATIONS: u32 = 1 << 9;

/// What QUERY reports. Not the `SYNC_CORE` commands (the host's return to
/// the guest after an interrupt is not known to serialize the core) nor
/// the `RSEQ` ones (no rseq).
const SUPPORTED: u32 = GLOBAL
    | GLOBAL_EXPEDITED
    | REGISTER_GLOBAL_EXPEDITED
    | PRIVATE_EXPEDITED
    | REGISTER_PRIVATE_EXPEDITED
    | GET_REGISTRATIONS;

/// `membarrier(cmd, flags, cpu_id)`.
pub fn sys_membarrier(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (cmd, flags) = (a.u32(0), a.u32(1));
    // Only the RSEQ command takes a flag, and it is not offered.
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    match cmd {
        QUERY => Ok(u64::from(SUPPORTED)),
        // The sandbox is the system: every thread of every process.
        GLOBAL | GLOBAL_EXPEDITED => {
            let threads: Vec<_> = {
                let procs = task.kernel.procs();
                procs.threads.values().cloned().collect()
            };
            barrier(task, &threads);
            Ok(0)
        }
        REGISTER_GLOBAL_EXPEDITED | REGISTER_PRIVATE_EXPEDITED => {
            task.proc_.state().membarrier |= cmd;
            Ok(0)
        }
        PRIVATE_EXPEDITED => {
            if task.proc_.state().membarrier & REGISTER_PRIVATE_EXPEDITED == 0 {
                return Err(Errno::EPERM);
            }
            let threads = task.proc_.state().threads.clone();
            barrier(task, &threads);
            Ok(0)
        }
        GET_REGISTRATIONS => Ok(u64::from(task.proc_.state().membarrier)),
        _ => Err(Errno::EINVAL),
    }
}

fn barrier(task: &Task, threads: &[std::sync::Arc<Thread>]) {
    // The caller's own stores are ordered before the look at each thread.
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    for t in threads {
        if t.tid != task.tid() {
            t.barrier();
        }
    }
}
