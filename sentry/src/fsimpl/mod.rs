//! The file systems and special files behind the VFS: tmpfs, proc and its
//! sysctls, devpts, pipes, the event descriptors (eventfd, timerfd,
//! signalfd, epoll).

pub mod devpts;
pub mod events;
pub mod mqueue;
pub mod nsfs;
pub mod nvidia;
pub mod pidfd;
pub mod pipe;
pub mod proc;
pub mod seccomp_notify;
pub mod sysctl;
pub mod tmpfs;

use std::sync::Arc;

use crate::vfs::{FileSystem, FsImpls, Inode, Node};

/// The file systems vfs mounts itself, as boot makes them: the /proc
/// generator and the pseudo-terminals of `/dev/pts`.
#[derive(Debug, Default)]
pub struct Builtins {
    /// the /proc (and /sys) generator
    pub proc: Arc<proc::ProcFs>,
    /// the pseudo-terminals
    pub devpts: Arc<devpts::Devpts>,
    /// the GPU's device files, when the sandbox has one (set at boot)
    pub gpu: std::sync::OnceLock<Arc<nvidia::Gpu>>,
}

impl FsImpls for Builtins {
    fn proc_root(&self) -> Node {
        proc::ProcInode::node(&self.proc, proc::ProcNode::Root)
    }

    fn sys_root(&self) -> Node {
        proc::ProcInode::node(&self.proc, proc::ProcNode::Sys(proc::SYSFS))
    }

    fn pty_exists(&self, n: u32) -> bool {
        self.devpts.get(n).is_some()
    }

    fn ptys(&self) -> Vec<u32> {
        self.devpts.indices()
    }

    fn gpu_devices(&self) -> Vec<crate::vfs::NvDevice> {
        self.gpu.get().map(|g| g.devices()).unwrap_or_default()
    }

    fn new_tmpfs(
        &self,
        mf: &Arc<crate::mm::memfile::MemoryFile>,
        pool: &Arc<crate::mm::quota::Quota>,
        dev: u64,
        size: u64,
        mode: u32,
    ) -> Arc<dyn Inode> {
        tmpfs::MemFs::new_root(mf.clone(), pool, dev, size, mode)
    }
}

/// The file systems boot gave `fs`.
pub fn builtins(fs: &FileSystem) -> &Builtins {
    (fs.impls() as &dyn std::any::Any)
        .downcast_ref()
        .expect("boot gives every file system its Builtins")
}
