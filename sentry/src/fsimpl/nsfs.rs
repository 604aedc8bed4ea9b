//! The namespace files of `/proc/[pid]/ns`. The sandbox is one namespace
//! of each kind, shared by all its processes, so every process's files
//! name the same ones, and `setns` into them is allowed and changes
//! nothing.

use std::sync::Arc;

use abi::{Errno, Stat};

use crate::vfs::file::{Caller, FileDescription, FileImpl, FileKind};

/// The device number of the namespace file system (Linux's nsfs, 0:4).
const NSFS_DEV: u64 = 4;

/// Each entry of `/proc/[pid]/ns`: its name, the kind of namespace it
/// names, the inode number of the sandbox's one of that kind, and its
/// `CLONE_NEW*` flag.
pub const ENTRIES: &[(&str, &str, u64, u64)] = &[
    ("cgroup", "cgroup", 4_026_532_200, 0x0200_0000),
    ("ipc", "ipc", 4_026_532_201, 0x0800_0000),
    ("mnt", "mnt", 4_026_532_202, 0x0002_0000),
    ("net", "net", 4_026_532_203, 0x4000_0000),
    ("pid", "pid", 4_026_532_204, 0x2000_0000),
    ("pid_for_children", "pid", 4_026_532_204, 0x2000_0000),
    ("time", "time", 4_026_532_205, 0x80),
    ("time_for_children", "time", 4_026_532_205, 0x80),
    ("user", "user", 4_026_532_206, 0x1000_0000),
    ("uts", "uts", 4_026_532_207, 0x0400_0000),
];

/// An open namespace file.
#[derive(Debug)]
pub struct NsFile {
    /// the namespace's kind ("net", "pid", ...)
    pub kind: &'static str,
    /// its inode number
    pub ino: u64,
    /// its `CLONE_NEW*` flag
    pub flag: u64,
}

impl NsFile {
    /// What its `/proc/[pid]/ns` link reads, as Linux's `ns_get_name`.
    pub fn link_text(&self) -> Vec<u8> {
        format!("{}:[{}]", self.kind, self.ino).into_bytes()
    }
}

/// A description of the namespace file `name` of `/proc/[pid]/ns`.
pub fn open(name: &str) -> Option<Arc<FileDescription>> {
    let &(_, kind, ino, flag) = ENTRIES.iter().find(|e| e.0 == name)?;
    let file = NsFile { kind, ino, flag };
    Some(FileDescription::new(
        FileKind::Impl(Arc::new(file)),
        None,
        0, // O_RDONLY
    ))
}

impl FileImpl for NsFile {
    // nsfs has no poll: always ready, as Linux's default mask.
    fn poll(&self, _caller: &dyn Caller, _events: i16, _depth: u32) -> i16 {
        use abi::poll::*;
        POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM
    }

    fn stat(&self, _file: &FileDescription) -> Result<Stat, Errno> {
        let mut st = crate::vfs::pipe_stat_like(abi::S_IFREG | 0o444);
        st.dev = NSFS_DEV;
        st.ino = self.ino;
        Ok(st)
    }

    fn link_name(&self) -> Option<Vec<u8>> {
        Some(self.link_text())
    }
}
