//! The listener descriptor of a seccomp filter made with
//! `SECCOMP_FILTER_FLAG_NEW_LISTENER` (seccomp_unotify(2)): readable while
//! a call waits to be received, writable while a received one waits for
//! its answer, hung up once no thread has the filter. Its ioctls are in
//! `syscalls/seccomp.rs`; its last close fails every waiting call with
//! `ENOSYS`.

use std::sync::Arc;

use abi::poll::{POLLHUP, POLLIN, POLLOUT, POLLRDNORM, POLLWRNORM};

use crate::kernel::seccomp::Notifier;
use crate::kernel::wait::WaitQueue;
use crate::vfs::file::{Caller, FileImpl};

/// An open listener.
#[derive(Debug)]
pub struct SeccompListener(pub Arc<Notifier>);

impl FileImpl for SeccompListener {
    fn poll(&self, _caller: &dyn Caller, _events: i16, _depth: u32) -> i16 {
        let r = self.0.poll();
        let mut bits = 0;
        if r.queued {
            bits |= POLLIN | POLLRDNORM;
        }
        if r.received {
            bits |= POLLOUT | POLLWRNORM;
        }
        if r.orphaned {
            bits |= POLLHUP;
        }
        bits
    }

    fn generation(&self) -> u64 {
        self.0.generation()
    }

    fn link_name(&self) -> Option<Vec<u8>> {
        Some(b"anon_inode:seccomp notify".to_vec())
    }

    fn wait_queues(&self, out: &mut Vec<WaitQueue>, _depth: u32) -> bool {
        out.push(self.0.queue.clone());
        false
    }
}

impl Drop for SeccompListener {
    fn drop(&mut self) {
        self.0.detach();
    }
}
