//! The jail and the real gofer process. The jail changes process state, so
//! it is only ever entered in a forked child or in the spawned
//! `ferrovisor-gofer` binary, never in the test process.

mod common;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};

use abi::Errno;
use common::{populate, TempDir};
use gofer::proto::WalkStatus;
use gofer::Client;

/// What the child checks once inside the jail.
fn inside(root: &Path, root_ino: u64, uid: u32) -> Result<(), String> {
    let root = gofer::jail::enter(root).map_err(|e| format!("enter: {e}"))?;
    let st = std::fs::metadata("/").map_err(|e| e.to_string())?;
    if st.ino() != root_ino {
        return Err(format!("/ is inode {} not {root_ino}", st.ino()));
    }
    let fd_ino = {
        let f = std::fs::File::from(root);
        // An O_PATH descriptor cannot be read, but fstat works.
        f.metadata().map_err(|e| e.to_string())?.ino()
    };
    if fd_ino != root_ino {
        return Err("returned descriptor is not the root".into());
    }
    let hello = std::fs::read("/a/b/file.txt").map_err(|e| format!("read file: {e}"))?;
    if hello != b"hello" {
        return Err("wrong file contents".into());
    }
    for gone in [
        "/proc/self",
        "/proc/1/root",
        "/etc/passwd",
        "/dev/null",
        "/sys/kernel",
        "/tmp",
        "/root",
    ] {
        if std::fs::symlink_metadata(gone).is_ok() {
            return Err(format!("{gone} is visible"));
        }
    }
    // The old root cannot be reached by climbing either.
    let up = std::fs::read_dir("/..").map_err(|e| e.to_string())?.count();
    let here = std::fs::read_dir("/").map_err(|e| e.to_string())?.count();
    if up != here {
        return Err("/.. differs from /".into());
    }
    let ifs = gofer::jail::interface_names().map_err(|e| format!("interfaces: {e}"))?;
    if ifs != ["lo"] {
        return Err(format!("interfaces: {ifs:?}"));
    }
    // SAFETY: getuid cannot fail.
    let now = unsafe { libc::getuid() };
    if now != uid {
        return Err(format!("uid {now} is not the caller's {uid}"));
    }
    // The mount is nosuid,nodev.
    // SAFETY: statvfs into a zeroed struct with a valid path.
    let flags = unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c"/".as_ptr(), &mut s) != 0 {
            return Err("statvfs".into());
        }
        s.f_flag
    };
    if flags & libc::ST_NOSUID == 0 || flags & libc::ST_NODEV == 0 {
        return Err(format!("mount flags {flags:#x}"));
    }
    Ok(())
}

/// Forks a child that optionally drops to `as_uid` and runs [`inside`].
fn jail_in_child(root: &Path, as_uid: Option<u32>) -> String {
    let root_ino = std::fs::metadata(root).expect("meta").ino();
    // SAFETY: getuid cannot fail.
    let uid = as_uid.unwrap_or_else(|| unsafe { libc::getuid() });
    let (mut r, mut w) = UnixStream::pair().expect("pair");
    // SAFETY: the child only runs the checks and leaves with _exit; glibc
    // makes malloc usable after fork, and the child is single-threaded.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        let mut msg = String::from("ok");
        if let Some(id) = as_uid {
            // SAFETY: plain credential calls in the child; dumpable again
            // after the change so /proc/self/uid_map stays writable by us.
            let ok = unsafe {
                libc::setgroups(0, std::ptr::null()) == 0
                    && libc::setresgid(id, id, id) == 0
                    && libc::setresuid(id, id, id) == 0
                    && libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) == 0
            };
            if !ok {
                msg = "skip: cannot change uid".into();
            }
        }
        if msg == "ok" {
            if let Err(e) = inside(root, root_ino, uid) {
                msg = e;
            }
        }
        let _ = w.write_all(msg.as_bytes());
        // SAFETY: leaves the forked child at once.
        unsafe { libc::_exit(0) };
    }
    drop(w);
    let mut msg = String::new();
    r.read_to_string(&mut msg).expect("read");
    let mut status = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    msg
}

#[test]
fn enter_shows_only_the_root() {
    let t = TempDir::new("jail");
    populate(t.path());
    assert_eq!(jail_in_child(t.path(), None), "ok");
    // The host saw nothing change.
    assert!(Path::new("/proc/self").exists());
    assert_eq!(
        std::fs::read(t.path().join("a/b/file.txt")).expect("read"),
        b"hello"
    );
}

#[test]
fn enter_works_unprivileged() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        // Already unprivileged: the test above covers it.
        return;
    }
    let t = TempDir::new("jail-nobody");
    populate(t.path());
    let msg = jail_in_child(t.path(), Some(65534));
    assert_eq!(msg, "ok");
}

/// Starts the real gofer binary on a socket; returns the client and child.
fn spawn_gofer(root: &std::path::Path, ro: bool) -> (Client, std::process::Child) {
    let (a, b) = UnixStream::pair().expect("pair");
    // SAFETY: clears close-on-exec on a descriptor we own, so the child
    // inherits it under the same number.
    unsafe {
        let fl = libc::fcntl(b.as_raw_fd(), libc::F_GETFD);
        libc::fcntl(b.as_raw_fd(), libc::F_SETFD, fl & !libc::FD_CLOEXEC);
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrovisor-gofer"));
    cmd.arg("--root")
        .arg(root)
        .arg("--fd")
        .arg(b.as_raw_fd().to_string());
    if ro {
        cmd.arg("--ro");
    }
    let child = cmd.stdin(Stdio::null()).spawn().expect("spawn gofer");
    drop(b);
    (Client::new(a), child)
}

#[test]
fn gofer_process_serves_from_the_jail() {
    let t = TempDir::new("proc");
    populate(t.path());
    let (c, mut child) = spawn_gofer(t.path(), false);
    let root = c.attach().expect("attach").handle;
    let w = c.walk(root, &[b"a", b"b", b"file.txt"]).expect("walk");
    assert_eq!(w.status, WalkStatus::Complete);
    let fd = c.open(w.nodes[2].handle, libc::O_RDONLY).expect("open");
    let mut s = String::new();
    std::fs::File::from(fd)
        .read_to_string(&mut s)
        .expect("read");
    assert_eq!(s, "hello");
    // Symlinks out of the root stay unfollowed inside the jail too.
    let esc = c.walk(root, &[b"esc", b"passwd"]).expect("walk");
    assert_eq!(esc.status, WalkStatus::NotDir);
    assert_eq!(
        c.open(esc.nodes[0].handle, libc::O_RDONLY).err(),
        Some(Errno::ELOOP)
    );
    // Writes: the umask is 0 in the gofer, so the mode is exact.
    let (n, fd) = c
        .create(root, b"made", libc::O_RDWR, 0o640)
        .expect("create");
    assert_eq!(n.stat.mode & 0o7777, 0o640);
    std::fs::File::from(fd)
        .write_all(b"from the jail")
        .expect("write");
    assert_eq!(
        std::fs::read(t.path().join("made")).expect("read"),
        b"from the jail"
    );
    let l = c.link(root, b"made2", n.handle).expect("link");
    assert_eq!(l.stat.ino, n.stat.ino);
    c.mkdir(root, b"d", 0o755).expect("mkdir");
    c.rename(root, b"made2", root, b"renamed", 0)
        .expect("rename");
    c.set_xattr(n.handle, b"user.k", b"v", 0).expect("setxattr");
    assert_eq!(c.get_xattr(n.handle, b"user.k").expect("get"), b"v");
    c.set_stat(
        n.handle,
        &gofer::client::SetAttr {
            size: Some(4),
            mode: Some(0o600),
            ..Default::default()
        },
    )
    .expect("setstat");
    assert_eq!(
        std::fs::metadata(t.path().join("made")).expect("m").len(),
        4
    );
    c.fsync(root).expect("fsync");
    assert!(c.getdents(root, 0, 4096).expect("getdents").len() >= 8);
    c.statfs(root).expect("statfs");
    assert_eq!(
        c.mknod(root, b"fifo", libc::S_IFIFO | 0o600)
            .expect("mkfifo")
            .stat
            .file_type(),
        libc::S_IFIFO
    );
    c.unlink(root, b"renamed", 0).expect("unlink");
    // The Sentry goes away: the gofer exits cleanly.
    drop(c);
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[test]
fn read_only_gofer_process() {
    let t = TempDir::new("proc-ro");
    populate(t.path());
    let (c, mut child) = spawn_gofer(t.path(), true);
    let root = c.attach().expect("attach").handle;
    let w = c.walk(root, &[b"top.txt"]).expect("walk");
    let fd = c.open(w.nodes[0].handle, libc::O_RDONLY).expect("open");
    let mut s = String::new();
    std::fs::File::from(fd)
        .read_to_string(&mut s)
        .expect("read");
    assert_eq!(s, "top");
    assert_eq!(
        c.create(root, b"n", libc::O_RDWR, 0o644).err(),
        Some(Errno::EROFS)
    );
    assert_eq!(
        c.open(w.nodes[0].handle, libc::O_WRONLY).err(),
        Some(Errno::EROFS)
    );
    assert_eq!(c.unlink(root, b"top.txt", 0).err(), Some(Errno::EROFS));
    assert!(!c.getdents(root, 0, 4096).expect("getdents").is_empty());
    drop(c);
    assert_eq!(child.wait().expect("wait").code(), Some(0));
}

#[test]
fn gofer_process_rejects_a_bad_descriptor() {
    let status = Command::new(env!("CARGO_BIN_EXE_ferrovisor-gofer"))
        .args(["--root", "/nonexistent", "--fd", "1"])
        .stderr(Stdio::null())
        .status()
        .expect("run");
    assert_eq!(status.code(), Some(2));
    // A regular file is not a socket.
    let f = std::fs::File::open("/dev/null").expect("open");
    let fd: OwnedFd = f.into();
    // SAFETY: dup of a descriptor we own; the copy is owned below.
    let copy = unsafe { OwnedFd::from_raw_fd(libc::dup(fd.as_raw_fd())) };
    assert!(gofer::jail::inherited_socket(copy.as_raw_fd()).is_err());
}
