//! The gofer server and client against a real directory tree.

mod common;

use std::io::{Read, Seek, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

use abi::Errno;
use common::{populate, serve_dir, TempDir};
use gofer::client::SetAttr;
use gofer::proto::{Timespec, WalkStatus};
use gofer::{Handle, ServerOptions};

fn read_all(fd: OwnedFd) -> Vec<u8> {
    let mut f = std::fs::File::from(fd);
    let mut v = Vec::new();
    f.read_to_end(&mut v).expect("read");
    v
}

fn fd_flags(fd: &OwnedFd) -> (i32, i32) {
    // SAFETY: fcntl F_GETFD/F_GETFL on a descriptor we own.
    unsafe {
        (
            libc::fcntl(fd.as_raw_fd(), libc::F_GETFD),
            libc::fcntl(fd.as_raw_fd(), libc::F_GETFL),
        )
    }
}

#[test]
fn walk_open_read() {
    let t = TempDir::new("walk");
    populate(t.path());
    let s = serve_dir(t.path(), ServerOptions::default());
    let c = &s.client;
    let root = c.attach().expect("attach");
    assert!(root.stat.is_dir());
    let w = c
        .walk(root.handle, &[b"a", b"b", b"file.txt"])
        .expect("walk");
    assert_eq!(w.status, WalkStatus::Complete);
    assert_eq!(w.nodes.len(), 3);
    assert!(w.nodes[0].stat.is_dir() && w.nodes[1].stat.is_dir());
    let file = w.nodes[2];
    assert_eq!(file.stat.size, 5);
    let meta = std::fs::metadata(t.path().join("a/b/file.txt")).expect("meta");
    assert_eq!(file.stat.ino, meta.ino());
    assert_eq!(file.stat.to_linux().dev, meta.dev());
    assert_eq!(c.stat(file.handle).expect("stat"), file.stat);

    let fd = c.open(file.handle, libc::O_RDONLY).expect("open");
    let (fdfl, fl) = fd_flags(&fd);
    assert_ne!(fdfl & libc::FD_CLOEXEC, 0, "donated fd is close-on-exec");
    assert_eq!(fl & libc::O_ACCMODE, libc::O_RDONLY);
    assert_eq!(
        fl & libc::O_NONBLOCK,
        0,
        "O_NONBLOCK used to open is cleared"
    );
    assert_eq!(read_all(fd), b"hello");

    // Writes go straight to the host file.
    let fd = c
        .open(file.handle, libc::O_WRONLY | libc::O_APPEND)
        .expect("open w");
    std::fs::File::from(fd).write_all(b" world").expect("write");
    assert_eq!(
        std::fs::read(t.path().join("a/b/file.txt")).expect("read"),
        b"hello world"
    );

    // A directory opens read-only only.
    let dir = w.nodes[1].handle;
    assert!(c.open(dir, libc::O_RDONLY | libc::O_DIRECTORY).is_ok());
    assert_eq!(c.open(dir, libc::O_RDWR).err(), Some(Errno::EISDIR));
    assert_eq!(
        c.open(file.handle, libc::O_RDONLY | libc::O_DIRECTORY)
            .err(),
        Some(Errno::ENOTDIR)
    );
    assert_eq!(
        c.open(file.handle, libc::O_RDONLY | libc::O_CREAT).err(),
        Some(Errno::EINVAL)
    );
    assert_eq!(
        c.open(file.handle, libc::O_ACCMODE).err(),
        Some(Errno::EINVAL)
    );

    // WalkStat gives the same stats without handles.
    let ws = c
        .walk_stat(root.handle, &[b"a", b"b", b"file.txt"])
        .expect("walkstat");
    assert_eq!(ws.status, WalkStatus::Complete);
    assert_eq!(ws.stats[0], w.nodes[0].stat);

    // Missing names stop the walk.
    let m = c.walk(root.handle, &[b"a", b"nope", b"x"]).expect("walk");
    assert_eq!(m.status, WalkStatus::Missing);
    assert_eq!(m.nodes.len(), 1);
    // A file in the middle stops it too.
    let m = c.walk(root.handle, &[b"top.txt", b"x"]).expect("walk");
    assert_eq!(m.status, WalkStatus::NotDir);
    assert_eq!(m.nodes.len(), 1);

    // Closing: the handle is gone.
    c.close(file.handle).expect("close");
    assert_eq!(c.stat(file.handle).err(), Some(Errno::EBADF));
    assert_eq!(c.close(Handle(12345)).err(), Some(Errno::EBADF));

    drop(s.client);
    s.server.join().expect("join").expect("clean end");
}

#[test]
fn symlinks_are_never_followed() {
    let t = TempDir::new("symlink");
    populate(t.path());
    let s = serve_dir(t.path(), ServerOptions::default());
    let c = &s.client;
    let root = c.attach().expect("attach").handle;
    for (link, target) in [
        (&b"esc"[..], &b"/etc"[..]),
        (b"up", b"../.."),
        (b"rel", b"a/b"),
    ] {
        let w = c.walk(root, &[link, b"passwd"]).expect("walk");
        assert_eq!(w.status, WalkStatus::NotDir, "walk stops at {link:?}");
        assert_eq!(w.nodes.len(), 1);
        assert!(w.nodes[0].stat.is_symlink());
        let h = w.nodes[0].handle;
        assert_eq!(c.readlink(h).expect("readlink"), target);
        // Open has O_NOFOLLOW semantics.
        assert_eq!(c.open(h, libc::O_RDONLY).err(), Some(Errno::ELOOP));
        // Walking from a symlink handle is refused.
        assert_eq!(c.walk(h, &[b"passwd"]).err(), Some(Errno::ENOTDIR));
        // Metadata changes apply to the link itself, never its target.
        assert!(c.get_xattr(h, b"user.x").is_err());
    }
    let etc_mode = std::fs::metadata("/etc").expect("etc").mode();
    let esc = c.walk(root, &[b"esc"]).expect("walk").nodes[0].handle;
    let _ = c.set_stat(
        esc,
        &SetAttr {
            mode: Some(0o700),
            ..SetAttr::default()
        },
    );
    assert_eq!(std::fs::metadata("/etc").expect("etc").mode(), etc_mode);
    // Readlink of a non-link is EINVAL, like readlink(2).
    let top = c.walk(root, &[b"top.txt"]).expect("walk").nodes[0].handle;
    assert_eq!(c.readlink(top).err(), Some(Errno::EINVAL));
    // A symlink swapped in under a handle's name is not opened.
    std::fs::remove_file(t.path().join("top.txt")).expect("rm");
    std::os::unix::fs::symlink("/etc/passwd", t.path().join("top.txt")).expect("ln");
    assert!(c.open(top, libc::O_RDONLY).is_err());
}

#[test]
fn bad_names_are_refused() {
    let t = TempDir::new("names");
    populate(t.path());
    let s = serve_dir(t.path(), ServerOptions::default());
    let c = &s.client;
    let root = c.attach().expect("attach").handle;
    for bad in [
        &b".."[..],
        b".",
        b"",
        b"a/b",
        b"/etc",
        b"a\0b",
        b"../../etc",
    ] {
        assert_eq!(c.walk(root, &[bad]).err(), Some(Errno::EINVAL), "{bad:?}");
        assert_eq!(
            c.walk(root, &[b"a", bad]).err(),
            Some(Errno::EINVAL),
            "{bad:?}"
        );
        assert_eq!(c.walk_stat(root, &[bad]).err(), Some(Errno::EINVAL));
        assert_eq!(c.mkdir(root, bad, 0o755).err(), Some(Errno::EINVAL));
        assert_eq!(
            c.create(root, bad, libc::O_RDWR, 0o644).err(),
            Some(Errno::EINVAL)
        );
        assert_eq!(c.unlink(root, bad, 0).err(), Some(Errno::EINVAL));
        assert_eq!(
            c.rename(root, b"top.txt", root, bad, 0).err(),
            Some(Errno::EINVAL)
        );
        assert_eq!(c.symlink(root, bad, b"x").err(), Some(Errno::EINVAL));
    }
    let long = vec![b'x'; 256];
    assert_eq!(c.walk(root, &[&long]).err(), Some(Errno::ENAMETOOLONG));
    assert_eq!(c.mkdir(root, &long, 0o755).err(), Some(Errno::ENAMETOOLONG));
    // Nothing was made or removed.
    let mut names: Vec<_> = std::fs::read_dir(t.path())
        .expect("readdir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["a", "esc", "rel", "top.txt", "up"]);
}

#[test]
fn special_files_are_not_opened() {
    let t = TempDir::new("special");
    populate(t.path());
    let s = serve_dir(t.path(), ServerOptions::default());
    let c = &s.client;
    let root = c.attach().expect("attach").handle;
    let fifo = c
        .mknod(root, b"fifo", libc::S_IFIFO | 0o644)
        .expect("mkfifo");
    assert_eq!(fifo.stat.file_type(), libc::S_IFIFO);
    assert_eq!(
        c.open(fifo.handle, libc::O_RDONLY).err(),
        Some(Errno::EACCES)
    );
    assert_eq!(
        c.open(fifo.handle, libc::O_WRONLY | libc::O_NONBLOCK).err(),
        Some(Errno::EACCES)
    );
    assert_eq!(
        c.mknod(root, b"dev", libc::S_IFCHR | 0o644).err(),
        Some(Errno::EPERM)
    );
    assert_eq!(
        c.mknod(root, b"blk", libc::S_IFBLK | 0o644).err(),
        Some(Errno::EPERM)
    );
    // A socket inode is bound to nothing, and never opened.
    let sock = c
        .mknod(root, b"inode", libc::S_IFSOCK | 0o644)
        .expect("mknod socket");
    assert_eq!(sock.stat.file_type(), libc::S_IFSOCK);
    assert_eq!(c.open(sock.handle, libc::O_RDWR).err(), Some(Errno::EACCES));
    let reg = c.mknod(root, b"plain", 0o600).expect("mknod reg");
    assert_eq!(reg.stat.file_type(), libc::S_IFREG);

    let _listener = std::os::unix::net::UnixListener::bind(t.path().join("sock")).expect("bind");
    let sock = c.walk(root, &[b"sock"]).expect("walk").nodes[0];
    assert_eq!(sock.stat.file_type(), libc::S_IFSOCK);
    assert_eq!(c.open(sock.handle, libc::O_RDWR).err(), Some(Errno::EACCES));

    // A device node put there by the host (needs CAP_MKNOD; skipped without).
    let dev = std::ffi::CString::new(t.path().join("null").into_os_string().into_encoded_bytes())
        .expect("path");
    // SAFETY: mknod with a valid path; makes a node inside the test's own dir.
    if unsafe { libc::mknod(dev.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) } == 0 {
        let n = c.walk(root, &[b"null"]).expect("walk").nodes[0];
        assert_eq!(n.stat.file_type(), libc::S_IFCHR);
        assert_eq!(c.open(n.handle, libc::O_RDONLY).err(), Some(Errno::EACCES));
        assert_eq!(c.open(n.handle, libc::O_WRONLY).err(), Some(Errno::EACCES));
    }
}

#[test]
fn modifications() {
    let t = TempDir::new("modify");
    populate(t.path());
    let s = serve_dir(t.path(), ServerOptions::default());
    let c = &s.client;
    let root = c.attach().expect("attach").handle;
    let p = t.path();

    // Create donates a read-write descriptor of a new file; suid is dropped.
    let (node, fd) = c
        .create(root, b"new", libc::O_RDWR, 0o4755)
        .expect("create");
    assert_eq!(node.stat.mode & 0o7777 & !0o022, 0o755 & !0o022);
    let mut f = std::fs::File::from(fd);
    f.write_all(b"data").expect("write");
    f.rewind().expect("rewind");
    let mut back = String::new();
    f.read_to_string(&mut back).expect("read");
    assert_eq!(back, "data");
    assert_eq!(std::fs::read(p.join("new")).expect("read"), b"data");
    assert_eq!(
        std::fs::metadata(p.join("new")).expect("m").mode() & 0o4000,
        0
    );
    assert_eq!(
        c.create(root, b"new", libc::O_RDWR, 0o644).err(),
        Some(Errno::EEXIST)
    );

    // Mkdir, and a file inside.
    let d = c.mkdir(root, b"dir", 0o750).expect("mkdir");
    assert!(d.stat.is_dir());
    let (inner, _fd) = c
        .create(d.handle, b"inner", libc::O_WRONLY, 0o600)
        .expect("create");
    assert!(p.join("dir/inner").is_file());

    // Getdents: every name, paged by offset.
    let mut names = Vec::new();
    let mut off = 0;
    loop {
        let ents = c.getdents(root, off, 64).expect("getdents");
        if ents.is_empty() {
            break;
        }
        off = ents.last().expect("entry").off;
        names.extend(
            ents.into_iter()
                .map(|e| String::from_utf8(e.name).expect("utf8")),
        );
    }
    names.sort();
    assert_eq!(
        names,
        [".", "..", "a", "dir", "esc", "new", "rel", "top.txt", "up"]
    );
    assert_eq!(
        c.getdents(inner.handle, 0, 4096).err(),
        Some(Errno::ENOTDIR)
    );

    // Rename, and the renamed handle still opens; then exchange.
    c.rename(d.handle, b"inner", root, b"moved", 0)
        .expect("rename");
    assert!(p.join("moved").is_file() && !p.join("dir/inner").exists());
    assert!(c.open(inner.handle, libc::O_RDONLY).is_ok());
    assert_eq!(
        c.rename(root, b"moved", root, b"new", libc::RENAME_NOREPLACE)
            .err(),
        Some(Errno::EEXIST)
    );
    c.rename(root, b"moved", root, b"new", libc::RENAME_EXCHANGE)
        .expect("exchange");
    assert_eq!(std::fs::read(p.join("moved")).expect("read"), b"data");
    assert_eq!(
        read_all(c.open(node.handle, libc::O_RDONLY).expect("open")),
        b"data"
    );
    assert_eq!(
        c.rename(root, b"new", root, b"x", 0x4).err(),
        Some(Errno::EINVAL)
    );

    // Symlink and readlink; hard link.
    let l = c.symlink(root, b"ln", b"../../outside").expect("symlink");
    assert!(l.stat.is_symlink());
    assert_eq!(c.readlink(l.handle).expect("readlink"), b"../../outside");
    assert_eq!(
        std::fs::read_link(p.join("ln")).expect("rl").as_os_str(),
        "../../outside"
    );
    let hl = c.link(root, b"hard", node.handle).expect("link");
    assert_eq!(hl.stat.ino, c.stat(node.handle).expect("stat").ino);
    assert_eq!(c.link(root, b"hard2", d.handle).err(), Some(Errno::EPERM));

    // Unlink and rmdir.
    assert_eq!(c.unlink(root, b"dir", 0).err(), Some(Errno::EISDIR));
    c.unlink(root, b"dir", libc::AT_REMOVEDIR as u32)
        .expect("rmdir");
    c.unlink(root, b"hard", 0).expect("unlink");
    assert!(!p.join("dir").exists() && !p.join("hard").exists());
    assert_eq!(c.unlink(root, b"hard", 0).err(), Some(Errno::ENOENT));
    assert_eq!(c.unlink(root, b"a", 0x1).err(), Some(Errno::EINVAL));

    // SetStat: mode (suid cleared), size, times.
    let top = c.walk(root, &[b"top.txt"]).expect("walk").nodes[0].handle;
    c.set_stat(
        top,
        &SetAttr {
            mode: Some(0o6640),
            size: Some(1),
            atime: Some(Timespec { sec: 1000, nsec: 5 }),
            mtime: Some(Timespec { sec: 2000, nsec: 7 }),
            ..SetAttr::default()
        },
    )
    .expect("setstat");
    let m = std::fs::metadata(p.join("top.txt")).expect("meta");
    assert_eq!(m.mode() & 0o7777, 0o640);
    assert_eq!(m.len(), 1);
    assert_eq!(
        (m.atime(), m.atime_nsec(), m.mtime(), m.mtime_nsec()),
        (1000, 5, 2000, 7)
    );
    let st = c.stat(top).expect("stat");
    assert_eq!((st.mtime.sec, st.mtime.nsec), (2000, 7));
    // O_TRUNC empties the file (after the identity check).
    let fd = c
        .open(top, libc::O_WRONLY | libc::O_TRUNC)
        .expect("open trunc");
    drop(fd);
    assert_eq!(std::fs::metadata(p.join("top.txt")).expect("m").len(), 0);
    // Owner: set to itself (works unprivileged too).
    let (uid, gid) = (m.uid(), m.gid());
    c.set_stat(
        top,
        &SetAttr {
            uid: Some(uid),
            gid: Some(gid),
            ..SetAttr::default()
        },
    )
    .expect("chown");
    // Size of a directory is EISDIR.
    assert_eq!(
        c.set_stat(
            root,
            &SetAttr {
                size: Some(0),
                ..SetAttr::default()
            }
        )
        .err(),
        Some(Errno::EISDIR)
    );

    // Xattrs: user namespace only.
    c.set_xattr(top, b"user.k", b"v1", 0).expect("setxattr");
    assert_eq!(c.get_xattr(top, b"user.k").expect("getxattr"), b"v1");
    assert_eq!(
        c.set_xattr(top, b"user.k", b"v2", libc::XATTR_CREATE as u32)
            .err(),
        Some(Errno::EEXIST)
    );
    assert_eq!(c.list_xattr(top).expect("list"), vec![b"user.k".to_vec()]);
    c.remove_xattr(top, b"user.k").expect("removexattr");
    assert_eq!(c.get_xattr(top, b"user.k").err(), Some(Errno::ENODATA));
    assert_eq!(
        c.set_xattr(top, b"security.capability", b"x", 0).err(),
        Some(Errno::EOPNOTSUPP)
    );
    assert_eq!(
        c.set_xattr(top, b"trusted.x", b"x", 0).err(),
        Some(Errno::EOPNOTSUPP)
    );
    c.set_xattr(root, b"user.dir", b"d", 0).expect("dir xattr");
    assert_eq!(c.get_xattr(root, b"user.dir").expect("get"), b"d");

    // StatFs and fsync.
    let fs = c.statfs(root).expect("statfs");
    assert!(fs.block_size > 0 && fs.name_max == 255);
    c.fsync(top).expect("fsync file");
    c.fsync(root).expect("fsync dir");
}

#[test]
fn read_only_refuses_every_modification() {
    let t = TempDir::new("ro");
    populate(t.path());
    let before = std::fs::metadata(t.path().join("top.txt")).expect("m");
    let s = serve_dir(
        t.path(),
        ServerOptions {
            read_only: true,
            ..ServerOptions::default()
        },
    );
    let c = &s.client;
    let root = c.attach().expect("attach").handle;
    let top = c.walk(root, &[b"top.txt"]).expect("walk").nodes[0].handle;
    let rofs = Some(Errno::EROFS);
    assert_eq!(c.create(root, b"n", libc::O_RDWR, 0o644).err(), rofs);
    assert_eq!(c.mkdir(root, b"n", 0o755).err(), rofs);
    assert_eq!(c.mknod(root, b"n", 0o644).err(), rofs);
    assert_eq!(c.symlink(root, b"n", b"x").err(), rofs);
    assert_eq!(c.link(root, b"n", top).err(), rofs);
    assert_eq!(c.unlink(root, b"top.txt", 0).err(), rofs);
    assert_eq!(c.rename(root, b"top.txt", root, b"n", 0).err(), rofs);
    assert_eq!(
        c.set_stat(
            top,
            &SetAttr {
                mode: Some(0o600),
                ..SetAttr::default()
            }
        )
        .err(),
        rofs
    );
    assert_eq!(c.set_xattr(top, b"user.x", b"1", 0).err(), rofs);
    assert_eq!(c.remove_xattr(top, b"user.x").err(), rofs);
    assert_eq!(c.open(top, libc::O_WRONLY).err(), rofs);
    assert_eq!(c.open(top, libc::O_RDWR).err(), rofs);
    assert_eq!(c.open(top, libc::O_RDONLY | libc::O_TRUNC).err(), rofs);
    // Reading still works.
    assert_eq!(read_all(c.open(top, libc::O_RDONLY).expect("open")), b"top");
    assert!(!c.getdents(root, 0, 4096).expect("getdents").is_empty());
    let after = std::fs::metadata(t.path().join("top.txt")).expect("m");
    assert_eq!((after.mode(), after.len()), (before.mode(), before.len()));
    assert!(!t.path().join("n").exists());
}

#[test]
fn handle_table_is_bounded() {
    let t = TempDir::new("bound");
    populate(t.path());
    let s = serve_dir(
        t.path(),
        ServerOptions {
            max_handles: 4,
            ..ServerOptions::default()
        },
    );
    let c = &s.client;
    let root = c.attach().expect("attach").handle;
    assert_eq!(
        c.walk(root, &[b"a", b"b", b"file.txt"])
            .expect("walk")
            .nodes
            .len(),
        3
    );
    assert_eq!(c.walk(root, &[b"a"]).err(), Some(Errno::EMFILE));
    // A failed walk leaves no handles behind: closing one makes room.
    c.close(root).expect("close");
    assert!(c.attach().is_ok());
}

#[test]
fn walk_open_dir_donates_a_readable_directory_and_release_batches_closes() {
    let t = TempDir::new("walkdir");
    populate(t.path());
    let s = serve_dir(t.path(), ServerOptions::default());
    let c = &s.client;
    let root = c.attach().expect("attach").handle;
    // A directory comes open for reading: its listing is the host's.
    let (w, fd) = c.walk_open_dir(root, b"a").expect("walk a");
    assert_eq!((w.status, w.nodes.len()), (WalkStatus::Complete, 1));
    let fd = fd.expect("a directory comes with a descriptor");
    let (fdfl, fl) = fd_flags(&fd);
    assert_ne!(fdfl & libc::FD_CLOEXEC, 0);
    assert_eq!(fl & libc::O_ACCMODE, libc::O_RDONLY);
    let listed = std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .expect("list the donated descriptor")
        .map(|e| e.expect("entry").file_name())
        .collect::<Vec<_>>();
    assert_eq!(listed, ["b"]);
    // A file, a symlink and a missing name come without one.
    let (w, fd) = c.walk_open_dir(root, b"top.txt").expect("walk file");
    assert!(fd.is_none() && w.nodes[0].stat.size == 3);
    let (w, fd) = c.walk_open_dir(root, b"esc").expect("walk link");
    assert!(fd.is_none() && w.nodes.len() == 1);
    let (w, fd) = c.walk_open_dir(root, b"nope").expect("walk missing");
    assert!(fd.is_none() && w.status == WalkStatus::Missing && w.nodes.is_empty());
    assert_eq!(c.walk_open_dir(root, b"..").err(), Some(Errno::EINVAL));

    // Several at once: directories come with handles and descriptors,
    // anything else as None.
    std::fs::create_dir(t.path().join("a/c")).expect("mkdir");
    let a = c.walk(root, &[b"a"]).expect("walk").nodes[0].handle;
    let found = c.walk_dirs(a, &[b"b", b"nope", b"c"]).expect("walk dirs");
    assert_eq!(found.len(), 3);
    assert!(found[1].is_none());
    for (i, f) in [(0, "a/b"), (2, "a/c")] {
        let (node, fd) = found[i].as_ref().expect("a directory");
        let meta = std::fs::metadata(t.path().join(f)).expect("meta");
        assert_eq!(node.stat.ino, meta.ino());
        assert!(c.stat(node.handle).is_ok());
        let fd = fd.as_ref().expect("open for reading");
        let n = std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .expect("list")
            .count();
        assert_eq!(n, usize::from(i == 0));
    }
    let files = c.walk_dirs(root, &[b"top.txt", b"esc"]).expect("files");
    assert!(files.iter().all(Option::is_none));
    assert_eq!(c.walk_dirs(a, &[b".."]).err(), Some(Errno::EINVAL));
    let many: Vec<&[u8]> = vec![b"b"; gofer::proto::MAX_WALK_DIRS + 1];
    assert_eq!(c.walk_dirs(a, &many).err(), Some(Errno::E2BIG));

    // Released handles go in batches: the first ones still work until a
    // whole batch is given up.
    let handles: Vec<Handle> = (0..64)
        .map(|_| c.walk(root, &[b"a"]).expect("walk").nodes[0].handle)
        .collect();
    for &h in &handles[..63] {
        c.release(h);
    }
    assert!(c.stat(handles[0]).is_ok(), "not closed before its batch");
    c.release(handles[63]);
    for &h in &handles {
        assert_eq!(c.stat(h).err(), Some(Errno::EBADF));
    }
}

#[test]
fn either_side_may_die() {
    let t = TempDir::new("die");
    populate(t.path());
    // Client dies mid-conversation: the server ends cleanly.
    let s = serve_dir(t.path(), ServerOptions::default());
    let root = s.client.attach().expect("attach").handle;
    s.client.walk(root, &[b"a"]).expect("walk");
    drop(s.client);
    assert!(s.server.join().expect("join").is_ok());

    // Server dies: the client reports EIO and stays failed.
    let (a, b) = std::os::unix::net::UnixStream::pair().expect("pair");
    let c = gofer::Client::new(a);
    drop(b);
    assert_eq!(c.attach().err(), Some(Errno::EIO));
    assert_eq!(c.attach().err(), Some(Errno::EIO));
}

#[test]
fn client_is_shared_across_threads() {
    let t = TempDir::new("threads");
    populate(t.path());
    let s = serve_dir(t.path(), ServerOptions::default());
    let c = std::sync::Arc::new(s.client);
    let root = c.attach().expect("attach").handle;
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let c = std::sync::Arc::clone(&c);
            std::thread::spawn(move || {
                for _ in 0..200 {
                    let w = c.walk(root, &[b"a", b"b", b"file.txt"]).expect("walk");
                    assert_eq!(w.nodes[2].stat.size, 5);
                    for n in w.nodes {
                        c.close(n.handle).expect("close");
                    }
                }
            })
        })
        .collect();
    for th in threads {
        th.join().expect("thread");
    }
}

/// Events read from a host inotify descriptor: (wd, mask, cookie, name).
fn inotify_events(fd: &OwnedFd) -> Vec<(i32, u32, u32, Vec<u8>)> {
    let mut buf = vec![0u8; 65536];
    // SAFETY: reads into a buffer we own, of its length.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    let mut out = Vec::new();
    let mut b = &buf[..usize::try_from(n).unwrap_or(0)];
    while b.len() >= 16 {
        let word = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let len = word(12) as usize;
        let name = b[16..16 + len].split(|&c| c == 0).next().unwrap_or(&[]);
        out.push((word(0) as i32, word(4), word(8), name.to_vec()));
        b = &b[16 + len..];
    }
    out
}

#[test]
fn host_watches() {
    const CREATE: u32 = 0x100;
    const DELETE_SELF: u32 = 0x400;
    let t = TempDir::new("watch");
    populate(t.path());
    let s = serve_dir(t.path(), ServerOptions::default());
    let c = &s.client;
    let root = c.attach().expect("attach").handle;
    let w = c.walk(root, &[b"a", b"b"]).expect("walk");
    let (a, b) = (w.nodes[0].handle, w.nodes[1].handle);
    let file = c.walk(b, &[b"file.txt"]).expect("walk").nodes[0].handle;
    let rel = c.walk(root, &[b"rel"]).expect("walk").nodes[0].handle;
    let ino = c.watch_init().expect("watch_init");
    // The same instance every time.
    let again = c.watch_init().expect("watch_init");
    let st = |fd: &OwnedFd| std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    assert_eq!(
        st(&ino).expect("stat").ino(),
        st(&again).expect("stat").ino()
    );
    drop(again);

    // Only change events, and some of them.
    assert_eq!(c.add_watch(b, 0).err(), Some(Errno::EINVAL));
    assert_eq!(c.add_watch(b, 0x20).err(), Some(Errno::EINVAL), "IN_OPEN");
    assert_eq!(
        c.add_watch(b, CREATE | 0x0100_0000).err(),
        Some(Errno::EINVAL)
    );
    assert_eq!(c.add_watch(Handle(999), CREATE).err(), Some(Errno::EBADF));

    let wd_b = c.add_watch(b, CREATE).expect("watch dir");
    assert_eq!(c.add_watch(b, CREATE).expect("again"), wd_b);
    let wd_file = c.add_watch(file, DELETE_SELF).expect("watch file");
    // The symlink rel -> a/b is watched as itself, not its target.
    let wd_rel = c.add_watch(rel, CREATE).expect("watch link");
    assert_ne!(wd_rel, wd_b);
    // A handle pins its object (an O_PATH descriptor): IN_DELETE_SELF
    // comes when the last one goes, as for any open file on Linux.
    c.close(file).expect("close");
    std::fs::write(t.path().join("a/b/new"), b"x").expect("create");
    std::fs::remove_file(t.path().join("a/b/file.txt")).expect("rm");
    let evs = inotify_events(&ino);
    assert_eq!(
        evs,
        vec![
            (wd_b, CREATE, 0, b"new".to_vec()),
            (wd_file, DELETE_SELF, 0, Vec::new()),
            (wd_file, 0x8000, 0, Vec::new()),
        ]
    );
    // A watch the host ended is still removed without error, once.
    c.rm_watch(wd_file).expect("rm ended watch");
    assert_eq!(c.rm_watch(wd_file).err(), Some(Errno::EINVAL));
    c.rm_watch(wd_b).expect("rm");
    assert_eq!(
        inotify_events(&ino),
        vec![(wd_b, 0x8000, 0, Vec::new())],
        "IN_IGNORED for the removed watch"
    );
    assert_eq!(c.rm_watch(12345).err(), Some(Errno::EINVAL));
    // The gofer's working directory is not left in a watched directory
    // (it would pin it): a/b goes at once.
    let wd_a = c.add_watch(a, DELETE_SELF).expect("watch a");
    c.close(a).expect("close");
    c.close(b).expect("close");
    std::fs::remove_dir_all(t.path().join("a")).expect("rm -r");
    assert_eq!(
        inotify_events(&ino),
        vec![
            (wd_a, DELETE_SELF, 0, Vec::new()),
            (wd_a, 0x8000, 0, Vec::new())
        ]
    );
    drop(s.client);
    s.server.join().expect("join").expect("clean end");
}
