//! Process descriptors (`pidfd_open(2)`, `CLONE_PIDFD`): a file that names
//! a thread group itself, so it stays valid after the process dies and its
//! ID is reused.

use std::sync::Arc;

use abi::poll::{POLLIN, POLLRDNORM};

use crate::kernel::task::Process;
use crate::kernel::wait::WaitQueue;
use crate::vfs::file::{Caller, FileImpl};

/// An open pidfd.
#[derive(Debug)]
pub struct PidFd(pub Arc<Process>);

impl FileImpl for PidFd {
    /// Readable once the process has terminated (pidfd_open(2)).
    fn poll(&self, _caller: &dyn Caller, _events: i16, _depth: u32) -> i16 {
        if self.0.state().exit.is_some() {
            POLLIN | POLLRDNORM
        } else {
            0
        }
    }

    fn link_name(&self) -> Option<Vec<u8>> {
        Some(b"anon_inode:[pidfd]".to_vec())
    }

    /// The process's own queue, woken when it exits.
    fn wait_queues(&self, out: &mut Vec<WaitQueue>, _depth: u32) -> bool {
        out.push(self.0.waiters.clone());
        false
    }

    /// What tools read to map a pidfd back to its process.
    fn fdinfo(&self) -> String {
        format!("Pid:\t{0}\nNSpid:\t{0}\n", self.0.pid)
    }
}
