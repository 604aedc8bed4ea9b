//! Volumes: host directories and files mounted into the sandbox with
//! `ferrovisor do --volume HOST:GUEST[:ro]`. The same file operations run
//! natively on one directory and in the sandbox on another mounted at
//! `/data`: what they print and what they leave on the host's disk must
//! agree. A read-only volume leaves the host untouched.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use common::{command, run, Outcome, TempDir};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const TIMEOUT: Duration = Duration::from_secs(120);

fn sandboxed(opts: &[String], script: &str) -> Outcome {
    // `$D` names the volume in the sandbox.
    let mut cmd = command(FERROVISOR, &[("D", "/data")]);
    cmd.arg("do").args(opts).args(["--", "bash", "-c", script]);
    run(cmd, None, TIMEOUT)
}

fn native(dir: &Path, script: &str) -> Outcome {
    let mut cmd = command("bash", &[]);
    cmd.args(["-c", script]).env("D", dir);
    run(cmd, None, TIMEOUT)
}

/// Runs `script` natively in a fresh directory and in the sandbox with a
/// fresh directory as its volume, and checks that both print the same
/// and exit alike; returns the native directory, the volume and the
/// native run.
fn native_and_on_a_volume(label: &str, script: &str) -> (TempDir, TempDir, Outcome) {
    let nat_dir = TempDir::new(&format!("{label}-native"));
    let sb_dir = TempDir::new(&format!("{label}-sandbox"));
    let nat = native(nat_dir.path(), script);
    assert_eq!(nat.status, 0, "the NATIVE run failed: {}", nat.stderr);
    let sb = sandboxed(
        &[
            "--volume".into(),
            format!("{}:/data", sb_dir.path_str().to_owned()),
        ],
        script,
    );
    assert_eq!(
        (sb.status, &sb.stdout),
        (nat.status, &nat.stdout),
        "sandbox stderr: {}",
        sb.stderr
    );
    (nat_dir, sb_dir, nat)
}

/// Every object below `dir`: relative path, type, permissions, link
/// count, size, and contents or link target.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        names.sort();
        for n in names {
            let p = dir.join(&n);
            let m = std::fs::symlink_metadata(&p).expect("lstat");
            let rel = p
                .strip_prefix(base)
                .expect("below base")
                .display()
                .to_string();
            let ft = m.file_type();
            let what = if ft.is_symlink() {
                format!("-> {}", std::fs::read_link(&p).expect("readlink").display())
            } else if ft.is_file() {
                String::from_utf8_lossy(&std::fs::read(&p).expect("read")).into_owned()
            } else if ft.is_dir() {
                "dir".into()
            } else {
                "other".into()
            };
            let mode = m.permissions().mode() & 0o7777;
            out.push(format!(
                "{rel} {mode:o} n{} s{} {what}",
                m.nlink(),
                if ft.is_dir() { 0 } else { m.size() }
            ));
            if ft.is_dir() {
                walk(base, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out
}

/// File operations on `$D`, printing what a program would observe.
const SCRIPT: &str = r#"
set -u
cd "$D"
umask 022
echo hello > a
head -c 10000 /dev/zero | tr '\0' x > big
mkdir -p d1/d2
echo deep > d1/d2/f
mv a d1/a2
ln d1/a2 hard
ln -s d1/a2 sym
cat sym
echo appended >> hard
cat d1/a2
stat -c '%a %h %s %F' hard d1 sym
chmod 640 hard
stat -c '%a' d1/a2
truncate -s 3 big
wc -c < big
touch -d '2020-01-02 03:04:05 UTC' big
stat -c '%Y' big
rmdir d1 2>&1 | sed 's/^[^:]*: //'
rm -r d1/d2
rm sym
ls -1A . d1
mkfifo fifo
stat -c '%F' fifo
rm fifo
python3 - <<'PY'
import errno, os
fd = os.open("o", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, b"abcdef")
os.lseek(fd, 0, os.SEEK_SET)
print(os.read(fd, 4))
os.pwrite(fd, b"XY", 1)
print(os.pread(fd, 6, 0))
os.ftruncate(fd, 2)
os.fsync(fd)
print(os.fstat(fd).st_size, oct(os.fstat(fd).st_mode))
os.close(fd)
try:
    os.open("o", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
except OSError as e:
    print(errno.errorcode[e.errno])
fd = os.open("o", os.O_WRONLY | os.O_APPEND)
os.write(fd, b"++")
print(os.lseek(fd, 0, os.SEEK_CUR))
os.close(fd)
os.rename("o", "big")
print(open("big", "rb").read())
try:
    os.rename("d1", "d1/sub")
except OSError as e:
    print(errno.errorcode[e.errno])
os.mkdir("e")
os.rename("e", "d1/e")
try:
    os.unlink("d1")
except OSError as e:
    print(errno.errorcode[e.errno])
print(sorted(os.listdir("d1")))
PY
ls -1A
"#;

#[test]
fn a_volume_is_changed_as_a_native_directory_would_be() {
    let (nat_dir, sb_dir, _) = native_and_on_a_volume("changes", SCRIPT);
    assert_eq!(tree(sb_dir.path()), tree(nat_dir.path()));
    assert!(!tree(sb_dir.path()).is_empty());
}

#[test]
fn a_read_only_volume_refuses_writes_and_the_host_is_untouched() {
    let dir = TempDir::new("ro");
    std::fs::write(dir.path().join("keep"), "original\n").expect("write");
    std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
    let before = tree(dir.path());
    let script = r#"
        cat /data/keep
        for op in "touch /data/new" "rm /data/keep" "mkdir /data/x" "rmdir /data/sub" \
                  "chmod 777 /data/keep" "mv /data/keep /data/k2" "ln -s a /data/l"; do
            $op 2>&1 | grep -o 'Read-only file system' || echo "$op: not refused"
        done
        echo more >> /data/keep || true
        rmdir /data 2>&1 | grep -o 'busy'
        grep ' /data ' /proc/mounts | cut -d' ' -f2,4
    "#;
    let out = sandboxed(
        &[
            "--volume".into(),
            format!("{}:/data:ro", dir.path_str().to_owned()),
        ],
        script,
    );
    assert_eq!(
        out.stdout,
        "original\n".to_string()
            + &"Read-only file system\n".repeat(7)
            + "busy\n/data ro,nosuid,nodev\n",
        "{out:?}"
    );
    assert_eq!(tree(dir.path()), before);
}

#[test]
fn a_file_volume_shows_only_that_file() {
    let dir = TempDir::new("file");
    std::fs::write(dir.path().join("hosts"), "192.0.2.1 example\n").expect("write");
    std::fs::write(dir.path().join("secret"), "do not show\n").expect("write");
    let script = r#"
        cat /etc/hosts
        echo "192.0.2.2 other" >> /etc/hosts
        ls /etc/hosts/x 2>&1 | grep -o 'Not a directory'
    "#;
    let vol = format!("{}:/etc/hosts", dir.path().join("hosts").display());
    let out = sandboxed(&["--volume".into(), vol], script);
    assert_eq!(
        out.stdout, "192.0.2.1 example\nNot a directory\n",
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hosts")).expect("read"),
        "192.0.2.1 example\n192.0.2.2 other\n"
    );
}

#[test]
fn bad_volumes_get_one_line() {
    let dir = TempDir::new("bad");
    let cases = [
        format!("{}/missing:/x", dir.path_str().to_owned()),
        "nocolon".to_string(),
        format!("{}:relative", dir.path_str().to_owned()),
        "/dev/null:/x".to_string(),
    ];
    for spec in cases {
        let out = sandboxed(&["--volume".into(), spec.clone()], "true");
        assert_eq!(out.status, 2, "{spec}: {out:?}");
        assert_eq!(out.stderr.trim_end().lines().count(), 1, "{spec}: {out:?}");
        assert!(out.stderr.contains("--volume"), "{spec}: {out:?}");
    }
}

#[test]
fn nothing_in_a_volume_leads_out_of_the_sandbox() {
    // A root with busybox and its own /etc/hostname; a volume whose
    // symlinks point at the host's /etc and above the volume.
    let root = TempDir::new("root");
    std::fs::create_dir_all(root.path().join("bin")).expect("mkdir bin");
    std::fs::copy("/bin/busybox", root.path().join("bin/busybox")).expect("copy busybox");
    std::fs::create_dir_all(root.path().join("etc")).expect("mkdir etc");
    std::fs::write(root.path().join("etc/hostname"), "guest-root\n").expect("hostname");
    let vol = TempDir::new("escape");
    std::os::unix::fs::symlink("/etc", vol.path().join("abs")).expect("symlink");
    std::os::unix::fs::symlink("../../../../../../etc", vol.path().join("up")).expect("symlink");
    let script = "cat /data/abs/hostname /data/up/hostname; \
                  ln /etc/hostname /data/hard 2>&1 | grep -o 'Invalid cross-device link'; \
                  mv /data/abs /etc/moved 2>&1 | grep -q . && echo refused; \
                  cd /data/../..; pwd; cat etc/hostname";
    let mut cmd = command(FERROVISOR, &[]);
    cmd.arg("do")
        .args(["--root", root.path_str(), "--volume"])
        .arg(format!("{}:/data", vol.path_str()))
        .args(["--", "/bin/busybox", "sh", "-c", script]);
    let out = run(cmd, None, TIMEOUT);
    assert_eq!(
        out.stdout, "guest-root\nguest-root\nInvalid cross-device link\nrefused\n/\nguest-root\n",
        "{out:?}"
    );
    assert!(!vol.path().join("hard").exists());
    assert!(vol.path().join("abs").is_symlink());
}

/// Unix sockets bound by path on a volume: a stream and a datagram pair
/// reach each other, the name is a socket inode on the host, a second bind
/// of it is `EADDRINUSE`, a closed socket's name refuses connections, and
/// `mknod` makes a socket inode too.
const UNIX_SOCKETS: &str = r#"
set -eu
cd "$D"
python3 - <<'PY'
import errno, os, socket, stat
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind("s")
srv.listen(1)
print("socket inode", stat.S_ISSOCK(os.stat("s").st_mode))
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect(os.path.abspath("s"))
conn, _ = srv.accept()
c.sendall(b"ping")
print(conn.recv(4))
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).bind("s")
except OSError as e:
    print("second bind", errno.errorcode[e.errno])
d1 = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
d1.bind("d")
d2 = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
d2.sendto(b"datagram", "d")
print(d1.recv(16))
for s in (c, conn, srv):
    s.close()
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect("s")
except OSError as e:
    print("closed", errno.errorcode[e.errno])
os.unlink("s")
again = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
again.bind("s")
print("bound again")
os.mknod("n", stat.S_IFSOCK | 0o600)
print("mknod", stat.S_ISSOCK(os.stat("n").st_mode))
PY
"#;

#[test]
fn unix_sockets_bound_on_a_volume_work_by_path() {
    let (_nat, vol, nat) = native_and_on_a_volume("unix", UNIX_SOCKETS);
    assert!(
        nat.stdout.contains("second bind EADDRINUSE") && nat.stdout.contains("closed ECONNREFUSED"),
        "{nat:?}"
    );
    // On the host, the sandbox's socket is an inode bound to nothing.
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::symlink_metadata(vol.path().join("s")).expect("stat s");
    assert!(meta.file_type().is_socket(), "{meta:?}");
    let refused = std::os::unix::net::UnixStream::connect(vol.path().join("s"))
        .expect_err("a host connect reaches nothing");
    assert_eq!(refused.raw_os_error(), Some(libc::ECONNREFUSED));
}

/// SQLite in WAL mode on `$D`: its `-shm` index is a file mapped
/// `MAP_SHARED` read-write by every connection. One process keeps a
/// connection open while another writes (so the index is live and shared
/// between two processes), then a last one exits without closing, leaving
/// the WAL and its index on disk for the next reader to recover.
const SQLITE_WAL: &str = r#"
set -eu
cd "$D"
python3 - <<'PY'
import sqlite3, subprocess
c = sqlite3.connect("db")
print(c.execute("pragma journal_mode=wal").fetchone()[0])
c.execute("create table t(a integer primary key, b text)")
c.executemany("insert into t(b) values (?)", [("row %d" % i,) for i in range(2000)])
c.commit()
print(c.execute("select count(*) from t").fetchone())
subprocess.run(["sqlite3", "db",
    "insert into t(b) select 'other ' || a from t where a <= 700; select count(*) from t;"],
    check=True)
print(c.execute("select count(*), sum(length(b)), max(b) from t").fetchone())
c.execute("update t set b = b || '+' where a % 3 = 0")
c.commit()
print(c.execute("pragma integrity_check").fetchone()[0])
c.close()
PY
sqlite3 db "select count(*), sum(length(b)) from t; pragma journal_mode;"
python3 - <<'PY'
import os, sqlite3
c = sqlite3.connect("db")
c.execute("insert into t(b) values ('left in the wal')")
c.commit()
os._exit(0)
PY
ls
"#;

/// What a native `sqlite3` makes of the database in `dir` afterwards.
fn query_db(dir: &Path) -> String {
    let mut cmd = command("sqlite3", &[]);
    cmd.arg(dir.join("db")).arg(
        "select count(*), sum(length(b)), max(a), max(b) from t; \
         select b from t where a in (1, 2001, 2701); pragma integrity_check;",
    );
    let out = run(cmd, None, TIMEOUT);
    assert_eq!(out.status, 0, "sqlite3 on the host: {}", out.stderr);
    out.stdout
}

#[test]
fn sqlite_in_wal_mode_on_a_volume_works_and_the_host_reads_its_database() {
    let (nat_dir, sb_dir, nat) = native_and_on_a_volume("sqlite", SQLITE_WAL);
    assert!(nat.stdout.contains("db-shm"), "{}", nat.stdout);
    // What reached the host's disk: the same database, the last row (in
    // the WAL the sandbox left behind) included.
    let host_view = query_db(sb_dir.path());
    assert_eq!(host_view, query_db(nat_dir.path()));
    assert!(host_view.contains("left in the wal"), "{host_view}");
}

/// While the sandbox still runs: what a shared mapping of a volume file
/// holds is on the host's disk once `msync(MS_SYNC)` returns, and once the
/// mapping is unmapped; what `fsync` is asked for too.
#[test]
fn msync_munmap_and_fsync_put_mapped_stores_on_the_host_while_the_sandbox_runs() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let dir = TempDir::new("msync");
    let script = r#"
import mmap, os, sys
def step(name):
    print(name, flush=True)
    sys.stdin.readline()
fd = os.open("/data/f", os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 8192)
m = mmap.mmap(fd, 8192)
m[0:6] = b"synced"
m.flush()
step("msync")
m[4096:4104] = b"unmapped"
m.close()
step("munmap")
m = mmap.mmap(fd, 8192)
m[100:106] = b"fsyncd"
os.fsync(fd)
step("fsync")
"#;
    let mut cmd = command(FERROVISOR, &[]);
    cmd.arg("do")
        .arg("--volume")
        .arg(format!("{}:/data", dir.path_str()))
        .args(["--", "python3", "-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("spawn ferrovisor");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let host = dir.path().join("f");
    for (step, at, want) in [
        ("msync", 0, &b"synced"[..]),
        ("munmap", 4096, b"unmapped"),
        ("fsync", 100, b"fsyncd"),
    ] {
        let mut line = String::new();
        out.read_line(&mut line).expect("read a step");
        assert_eq!(line.trim(), step);
        let bytes = std::fs::read(&host).expect("read the host file");
        assert_eq!(bytes.len(), 8192, "{step}");
        assert_eq!(&bytes[at..at + want.len()], want, "after {step}");
        stdin.write_all(b"go\n").expect("let the guest go on");
    }
    drop(stdin);
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
}

/// Four processes writing one WAL-mode database on `$D` at once: they
/// coordinate through the `-shm` index every one of them maps shared (and
/// through locks on it), so none of their rows may be lost.
#[test]
fn concurrent_sqlite_writers_on_a_volume_lose_no_row() {
    let script = r#"
set -eu
cd "$D"
sqlite3 db "pragma journal_mode=wal; create table t(p, i);" >/dev/null
for p in 1 2 3 4; do
  python3 - "$p" <<'PY' &
import sqlite3, sys
p = int(sys.argv[1])
c = sqlite3.connect("db", timeout=60)
for i in range(100):
    c.execute("insert into t values (?, ?)", (p, i))
    c.commit()
    if i % 25 == 0:
        c.execute("select count(*) from t").fetchone()
c.close()
PY
done
wait
sqlite3 db "select p, count(*), sum(i) from t group by p; pragma integrity_check;"
"#;
    let (_nat_dir, sb_dir, _) = native_and_on_a_volume("sqlite-conc", script);
    let mut cmd = command("sqlite3", &[]);
    cmd.arg(sb_dir.path().join("db"))
        .arg("select count(*) from t; pragma integrity_check;");
    let host = run(cmd, None, TIMEOUT);
    assert_eq!(host.stdout, "400\nok\n", "{}", host.stderr);
}

/// Reads a directory's inotify events with ctypes and prints them: the
/// watch's label, the mask's names, the name, and cookies numbered in
/// order of appearance (so the two halves of a rename show the same one).
///
/// `host`: watches `$1` and `$1/sub` for changes, prints `ready`, and reads
/// (blocking) until the directory `end` is made, listing `$1` before and
/// after. `self`: watches `$1` for every
/// event, changes it itself, and reads what is queued without waiting.
/// `limits`: adds and removes watches, saying what it did and waiting for
/// a line on its input after each step.
const WATCHER: &str = r#"
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
NAMES = [(0x1, "ACCESS"), (0x2, "MODIFY"), (0x4, "ATTRIB"), (0x8, "CLOSE_WRITE"),
         (0x10, "CLOSE_NOWRITE"), (0x20, "OPEN"), (0x40, "MOVED_FROM"),
         (0x80, "MOVED_TO"), (0x100, "CREATE"), (0x200, "DELETE"),
         (0x400, "DELETE_SELF"), (0x800, "MOVE_SELF"), (0x4000, "Q_OVERFLOW"),
         (0x8000, "IGNORED"), (0x40000000, "ISDIR")]
CHANGES = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
d, mode = sys.argv[1], sys.argv[2]
fd = libc.inotify_init1(os.O_NONBLOCK if mode == "self" else 0)
labels, cookies = {}, {}
def watch(path, label, mask):
    wd = libc.inotify_add_watch(fd, path.encode(), mask)
    if wd < 0:
        sys.exit("inotify_add_watch %s: errno %d" % (path, ctypes.get_errno()))
    labels[wd] = label
def show(buf):
    out, off = [], 0
    while off < len(buf):
        wd, m, cookie, n = struct.unpack_from("iIII", buf, off)
        name = buf[off + 16:off + 16 + n].rstrip(b"\0").decode()
        off += 16 + n
        line = "%s %s %s" % (labels.get(wd, wd), "|".join(s for b, s in NAMES if m & b), name)
        if cookie:
            line += " cookie%d" % cookies.setdefault(cookie, len(cookies) + 1)
        out.append(line.rstrip())
    return out
lines = []
if mode == "host":
    watch(d, "D", CHANGES)
    watch(d + "/sub", "sub", CHANGES)
    lines.append("listed %s" % sorted(os.listdir(d)))
    print("ready", flush=True)
    while "D CREATE|ISDIR end" not in lines:
        lines += show(os.read(fd, 65536))
    # The directory as it is now, not as it was first listed.
    lines.append("listed %s" % sorted(os.listdir(d)))
elif mode == "limits":
    def step(what):
        print(what, flush=True)
        sys.stdin.readline()
    watch(d, "D", CHANGES)
    watch(d + "/sub", "sub", CHANGES)
    step("two")
    libc.inotify_rm_watch(fd, [w for w, l in labels.items() if l == "sub"][0])
    step("one")
    os.close(fd)
    step("none")
    a, b = libc.inotify_init1(0), libc.inotify_init1(0)
    for i in (a, b):
        if libc.inotify_add_watch(i, d.encode(), CHANGES) < 0:
            sys.exit("add_watch")
    step("shared")
    os.close(a)
    step("still shared")
    os.close(b)
    step("none again")
    c = libc.inotify_init1(0)
    n = 0
    while n < 8200:
        if libc.inotify_add_watch(c, ("%s/many/%d" % (d, n)).encode(), CHANGES) < 0:
            break
        n += 1
    step("%d watches, then errno %d" % (n, ctypes.get_errno()))
else:
    watch(d, "D", 0xfff)
    p = d + "/f"
    f = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(f, b"hi")
    os.close(f)
    os.chmod(p, 0o600)
    f = os.open(p, os.O_RDONLY)
    os.read(f, 10)
    os.close(f)
    os.rename(p, d + "/g")
    os.unlink(d + "/g")
    os.mkdir(d + "/s")
    os.rmdir(d + "/s")
    while True:
        try:
            lines += show(os.read(fd, 65536))
        except BlockingIOError:
            break
print("\n".join(lines), flush=True)
"#;

/// Runs `cmd` (the watcher in `host` mode on `dir`), and once it is ready
/// changes `dir` from the host; what it printed after `ready`.
fn watch_host_changes(mut cmd: std::process::Command, dir: &Path) -> String {
    use std::io::{BufRead, BufReader, Read};
    use std::os::unix::fs::PermissionsExt;
    use std::process::Stdio;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("spawn the watcher");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read readiness");
    assert_eq!(line.trim(), "ready", "the watcher did not start");
    // Another host process (this one) edits the tree, as a user's editor
    // would: create and write, chmod, rename, delete, remove a watched
    // directory; `end` tells the watcher to stop.
    let f = dir.join("f");
    std::fs::write(&f, b"edited on the host").expect("write f");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::fs::rename(&f, dir.join("g")).expect("rename");
    std::fs::remove_file(dir.join("g")).expect("rm");
    std::fs::remove_dir(dir.join("sub")).expect("rmdir");
    std::fs::create_dir(dir.join("end")).expect("end");
    let mut rest = String::new();
    let reader = std::thread::spawn(move || {
        out.read_to_string(&mut rest).expect("read events");
        rest
    });
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "watcher: {status:?}");
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the watcher never saw the host's changes");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    reader.join().expect("reader")
}

/// A program in the sandbox watching a volume directory hears of what a
/// host process does there: the same events, names and rename cookies, in
/// the same order, as the same program watching a host directory natively.
#[test]
fn inotify_on_a_volume_sees_the_hosts_changes() {
    let native_dir = TempDir::new("inotify-native");
    let vol = TempDir::new("inotify-volume");
    for d in [native_dir.path(), vol.path()] {
        std::fs::create_dir(d.join("sub")).expect("mkdir sub");
    }
    let mut native = command("python3", &[]);
    native.args(["-c", WATCHER, native_dir.path_str(), "host"]);
    let want = watch_host_changes(native, native_dir.path());
    assert!(
        want.contains("D MOVED_FROM f cookie1\nD MOVED_TO g cookie1")
            && want.contains("sub DELETE_SELF\nsub IGNORED")
            && want.ends_with("listed ['end']\n"),
        "native run: {want}"
    );

    let mut sandboxed = command(FERROVISOR, &[]);
    sandboxed
        .arg("do")
        .arg("--volume")
        .arg(format!("{}:/data", vol.path_str()))
        .args(["--", "python3", "-c", WATCHER, "/data", "host"]);
    let got = watch_host_changes(sandboxed, vol.path());
    assert_eq!(got, want);
}

/// The guest's own changes to a volume directory are reported once each
/// (not once by the Sentry and again as the host saw them), in Linux's
/// order, and are queued by the time the calls return.
#[test]
fn inotify_on_a_volume_reports_the_guests_own_changes_once() {
    let native_dir = TempDir::new("inotify-self-native");
    let vol = TempDir::new("inotify-self-volume");
    let mut cmd = command("python3", &[]);
    cmd.args(["-c", WATCHER, native_dir.path_str(), "self"]);
    let want = run(cmd, None, TIMEOUT);
    assert_eq!(want.status, 0, "native: {want:?}");
    assert!(
        want.stdout
            .starts_with("D CREATE f\nD OPEN f\nD MODIFY f\nD CLOSE_WRITE f\n"),
        "native: {}",
        want.stdout
    );
    let mut cmd = command(FERROVISOR, &[]);
    cmd.arg("do")
        .arg("--volume")
        .arg(format!("{}:/data", vol.path_str()))
        .args(["--", "python3", "-c", WATCHER, "/data", "self"]);
    let got = run(cmd, None, TIMEOUT);
    assert_eq!(got.status, 0, "sandbox: {got:?}");
    assert_eq!(got.stdout, want.stdout);
}

/// Host inotify watches held by the gofer serving `dir` (counted from
/// `/proc/PID/fdinfo`, where each watch is one `inotify wd:` line).
fn gofer_watches(dir: &Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let is_ours = args.get(1) == Some(&&b"gofer"[..])
            && args.contains(&dir.as_os_str().as_encoded_bytes());
        if !is_ours {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fdinfo")) else {
            continue;
        };
        for fd in fds.flatten() {
            let info = std::fs::read_to_string(fd.path()).unwrap_or_default();
            n += info
                .lines()
                .filter(|l| l.starts_with("inotify wd:"))
                .count();
        }
    }
    n
}

/// Guest watches on a volume hold host watches only while they exist:
/// `inotify_rm_watch`, closing the instance and the last of two instances
/// watching one directory each give them back. A sandbox holds at most
/// 8192 host watches; the next `inotify_add_watch` is `ENOSPC`.
#[test]
fn inotify_on_a_volume_gives_host_watches_back_and_is_bounded() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let vol = TempDir::new("inotify-limits");
    std::fs::create_dir(vol.path().join("sub")).expect("mkdir sub");
    for i in 0..8200 {
        std::fs::create_dir_all(vol.path().join(format!("many/{i}"))).expect("mkdir");
    }
    let mut cmd = command(FERROVISOR, &[]);
    cmd.arg("do")
        .arg("--volume")
        .arg(format!("{}:/data", vol.path_str()))
        .args(["--", "python3", "-c", WATCHER, "/data", "limits"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("spawn ferrovisor");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    for (step, want) in [
        ("two", 2),
        ("one", 1),
        ("none", 0),
        ("shared", 1),
        ("still shared", 1),
        ("none again", 0),
        ("8192 watches, then errno 28", 8192),
    ] {
        let mut line = String::new();
        out.read_line(&mut line).expect("read a step");
        assert_eq!(line.trim(), step);
        assert_eq!(gofer_watches(vol.path()), want, "host watches after {step}");
        stdin.write_all(b"go\n").expect("let the guest go on");
    }
    drop(stdin);
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
}
