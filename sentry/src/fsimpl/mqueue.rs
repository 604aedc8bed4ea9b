//! The mqueue file system (`/dev/mqueue`: its root and a node per queue)
//! and the open file of a POSIX message queue (`mq_open`, or `open` in
//! `/dev/mqueue`); the queues themselves are `kernel::ipc::mqueue`'s.

use std::sync::Arc;

use abi::poll::{POLLIN, POLLOUT, POLLRDNORM, POLLWRNORM};
use abi::{Errno, Stat};

use crate::kernel::ipc::mqueue::{MsgQueue, Registry, MQUEUE_DEV};
use crate::kernel::wait::WaitQueue;
use crate::mm::GuestSlice;
use crate::sync::Locked;
use crate::vfs::file::{copy_to_slices, Blocker, Caller, FileDescription, FileImpl};
use crate::vfs::{DirEntry, Inode, Node};

/// `mount_key` of the mqueue file system.
const MOUNT_KEY: usize = 6;

/// `statfs` of the mqueue file system.
fn statfs(s: &mut abi::Statfs) {
    s.f_type = 0x1980_0202; // MQUEUE_MAGIC
    s.f_bsize = 4096;
    s.f_namelen = 255;
    s.f_frsize = 4096;
}

/// `/dev/mqueue`: a file per queue not yet unlinked.
#[derive(Debug)]
pub struct MqueueRoot(pub Arc<Registry>);

impl Inode for MqueueRoot {
    // World-writable and sticky, as Linux mounts it.
    fn stat(&self) -> Result<Stat, Errno> {
        let mut st = crate::vfs::pipe_stat_like(abi::S_IFDIR | 0o1777);
        st.dev = MQUEUE_DEV;
        st.ino = 1;
        st.nlink = 2;
        Ok(st)
    }

    fn is_dir(&self) -> bool {
        true
    }

    fn lookup(&self, name: &[u8]) -> Result<Node, Errno> {
        self.0.get(name).map(node).ok_or(Errno::ENOENT)
    }

    fn list(&self) -> Result<Vec<DirEntry>, Errno> {
        let mut v = crate::vfs::dot_entries(1);
        for (name, q) in self.0.list() {
            v.push(DirEntry {
                ino: q.ino,
                kind: abi::dt::REG,
                name,
            });
        }
        Ok(v)
    }

    fn mount_key(&self) -> usize {
        MOUNT_KEY
    }

    fn statfs(&self, s: &mut abi::Statfs) {
        statfs(s)
    }
}

/// A queue's node in `/dev/mqueue`.
#[derive(Debug)]
pub struct MqueueNode(pub Arc<MsgQueue>);

/// The node of queue `q`.
pub fn node(q: Arc<MsgQueue>) -> Node {
    Node::Inode(Arc::new(MqueueNode(q)))
}

impl Inode for MqueueNode {
    fn stat(&self) -> Result<Stat, Errno> {
        Ok(self.0.stat())
    }

    fn is_dir(&self) -> bool {
        false
    }

    fn mount_key(&self) -> usize {
        MOUNT_KEY
    }

    fn statfs(&self, s: &mut abi::Statfs) {
        statfs(s)
    }
}

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
