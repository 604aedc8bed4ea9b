//! Helpers shared by the gofer's integration tests.
#![allow(dead_code)]

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;

use gofer::{Client, ServeError, ServerOptions};

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "gofer-test-{}-{}-{}",
            tag,
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn open_dir(p: &Path) -> OwnedFd {
    std::fs::File::open(p).expect("open root").into()
}

/// A server on one end of a socket pair, in a thread, and a client on the
/// other.
pub struct Served {
    pub client: Client,
    pub server: JoinHandle<Result<(), ServeError>>,
}

pub fn serve_dir(root: &Path, opts: ServerOptions) -> Served {
    let (a, b) = UnixStream::pair().expect("socketpair");
    let root = open_dir(root);
    let server = std::thread::spawn(move || gofer::serve(root, b, opts));
    Served {
        client: Client::new(a),
        server,
    }
}

/// A tree: a/b/file.txt ("hello"), top.txt ("top"), esc -> /etc,
/// up -> ../.., rel -> a/b.
pub fn populate(root: &Path) {
    std::fs::create_dir_all(root.join("a/b")).expect("mkdir");
    std::fs::write(root.join("a/b/file.txt"), b"hello").expect("write");
    std::fs::write(root.join("top.txt"), b"top").expect("write");
    std::os::unix::fs::symlink("/etc", root.join("esc")).expect("symlink");
    std::os::unix::fs::symlink("../..", root.join("up")).expect("symlink");
    std::os::unix::fs::symlink("a/b", root.join("rel")).expect("symlink");
}
