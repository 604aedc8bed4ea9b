//! The open file of a POSIX message queue (`mq_open`, or `open` in
//! `/dev/mqueue`); the queues themselves are `kernel::ipc::mqueue`'s.

use std::sync::Arc;

use abi::poll::{POLLIN, POLLOUT, POLLRDNORM, POLLWRNORM};
use abi::{Errno, Stat};

use crate::kernel::ipc::mqueue::MsgQueue;
use crate::kernel::wait::WaitQueue;
use crate::mm::GuestSlice;
use crate::sync::Locked;
use crate::vfs::file::{copy_to_slices, Blocker, Caller, FileDescription, FileImpl};

/// An open message queue.
#[derive(Debug)]
pub struct MqueueFile(pub Arc<MsgQueue>);

impl FileImpl for MqueueFile {
    /// Reading a queue gives its status line (mq_overview(7)); it has no
    /// write operation (messages go through `mq_timedsend`).
    fn read(
        &self,
        file: &FileDescription,
        _blk: Blocker<'_>,
        bufs: &[GuestSlice],
        at: Option<u64>,
    ) -> Result<u64, Errno> {
        let line = self.0.status_line(|pid| pid);
        let mut pos = file.pos.locked();
        let start = (at.unwrap_or(*pos) as usize).min(line.len());
        let n = copy_to_slices(bufs, &line[start..]);
        if at.is_none() {
            *pos = start as u64 + n;
        }
        Ok(n)
    }

    /// Whatever the access mode, as Linux's `mqueue_poll_file`.
    fn poll(&self, _caller: &dyn Caller, _events: i16, _depth: u32) -> i16 {
        let (r, w) = self.0.poll_state();
        (if r { POLLIN | POLLRDNORM } else { 0 }) | if w { POLLOUT | POLLWRNORM } else { 0 }
    }

    fn generation(&self) -> u64 {
        self.0.generation()
    }

    fn wait_queues(&self, out: &mut Vec<WaitQueue>, _depth: u32) -> bool {
        out.push(self.0.waiters.clone());
        false
    }

    fn seekable(&self) -> bool {
        true
    }

    fn stat(&self, _file: &FileDescription) -> Result<Stat, Errno> {
        Ok(self.0.stat())
    }
}
