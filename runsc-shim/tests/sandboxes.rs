//! Long-lived sandboxes (`ferrovisor sandbox ...`): state kept between
//! execs, exit statuses and timeouts, files copied in and out, and the
//! ends a sandbox can meet (stop, rm, an idle timeout), each said.

mod common;

use std::time::Duration;

use common::{command, run, Outcome, TempDir};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const TIMEOUT: Duration = Duration::from_secs(120);

/// A state root of the test's own; every sandbox in it is removed on drop.
struct Root(TempDir);

impl Root {
    fn new(tag: &str) -> Root {
        Root(TempDir::new(tag))
    }

    fn cli(&self, args: &[&str]) -> Outcome {
        let mut cmd = command(FERROVISOR, &[]);
        cmd.arg("--root")
            .arg(self.0.path())
            .arg("sandbox")
            .args(args);
        run(cmd, None, TIMEOUT)
    }

    /// `exec NAME -- sh -c SCRIPT`, which must succeed: its stdout.
    fn sh(&self, name: &str, script: &str) -> String {
        self.ok(&["exec", name, "--", "sh", "-c", script])
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.cli(args);
        assert_eq!(o.status, 0, "{args:?}: {}", common::show(&o));
        o.stdout
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let o = self.cli(&["ls", "--json"]);
        if let Ok(list) = serde_json::from_str::<Vec<serde_json::Value>>(&o.stdout) {
            for s in list {
                if let Some(n) = s["name"].as_str() {
                    self.cli(&["rm", n]);
                }
            }
        }
    }
}

fn native(script: &str) -> String {
    let mut cmd = command("sh", &[]);
    cmd.args(["-c", script]);
    let o = run(cmd, None, TIMEOUT);
    assert_eq!(o.status, 0, "native: {}", common::show(&o));
    o.stdout
}

#[test]
fn a_sandbox_keeps_its_state_between_execs() {
    let root = Root::new("sb-state");
    assert_eq!(
        root.ok(&["create", "box", "--overlay", "-e", "GREETING=hello"]),
        "box\n"
    );
    // The environment given at create, and the host name its name.
    assert_eq!(
        root.ok(&["exec", "box", "--", "sh", "-c", "echo $GREETING; hostname"]),
        "hello\nbox\n"
    );
    // A file written by one exec is there for the next.
    root.sh("box", "echo kept > /etc/new; mkdir -p /work");
    assert_eq!(root.ok(&["exec", "box", "--", "cat", "/etc/new"]), "kept\n");
    // A background process started by one exec outlives it.
    root.ok(&[
        "exec",
        "box",
        "--",
        "sh",
        "-c",
        "sleep 1000 > /dev/null 2>&1 &",
    ]);
    let ps = root.ok(&["exec", "box", "--", "ps", "-eo", "stat=,comm="]);
    assert!(ps.contains("sleep"), "{ps}");
    // Orphans are reaped by the sandbox's init: no zombies.
    root.ok(&["exec", "box", "--", "sh", "-c", "sleep 0.1 & exit 0"]);
    std::thread::sleep(Duration::from_millis(400));
    let ps = root.ok(&["exec", "box", "--", "ps", "-eo", "stat=,comm="]);
    assert!(!ps.lines().any(|l| l.starts_with('Z')), "{ps}");
    // Statuses, working directory, user and environment as asked.
    assert_eq!(
        root.cli(&["exec", "box", "--", "sh", "-c", "exit 7"])
            .status,
        7
    );
    let script = "pwd; id -u; id -g; echo $X";
    assert_eq!(
        root.ok(&[
            "exec", "box", "--cwd", "/work", "-u", "1000:100", "-e", "X=y", "--", "sh", "-c",
            script
        ]),
        "/work\n1000\n100\ny\n"
    );
    // Users by name or number, from the sandbox's own /etc/passwd and
    // /etc/group (written here by an exec, into the overlay), as docker
    // exec --user finds them: the passwd entry's group unless one is
    // given, and the groups that list the user.
    root.sh(
        "box",
        "echo 'alice:x:1234:2345::/home/alice:/bin/sh' >> /etc/passwd; \
         echo 'team:x:2345:' >> /etc/group; echo 'extra:x:3456:bob,alice' >> /etc/group",
    );
    let ids = "id -u; id -g; id -G";
    let as_user = |u: &str| root.ok(&["exec", "box", "-u", u, "--", "sh", "-c", ids]);
    assert_eq!(as_user("alice"), "1234\n2345\n2345 3456\n");
    assert_eq!(as_user("1234"), "1234\n2345\n2345 3456\n");
    assert_eq!(as_user("alice:extra"), "1234\n3456\n3456\n");
    assert_eq!(as_user("alice:77"), "1234\n77\n77 3456\n");
    assert_eq!(as_user("4321"), "4321\n0\n0\n");
    assert_eq!(
        as_user("nobody"),
        native(&format!(
            "setpriv --reuid=nobody --regid=$(id -g nobody) --init-groups sh -c '{ids}'"
        ))
    );
    for (user, why) in [
        ("mallory", "no user \"mallory\""),
        ("alice:nosuch", "no group \"nosuch\""),
    ] {
        let o = root.cli(&["exec", "box", "-u", user, "--", "true"]);
        assert!(
            o.status != 0 && o.stderr.contains(why),
            "{user}: {}",
            common::show(&o)
        );
    }
    let o = root.cli(&["exec", "box", "--timeout", "0.3", "--", "sleep", "10"]);
    assert_eq!(o.status, 137, "{}", common::show(&o));
    assert!(o.stderr.contains("--timeout"), "{}", o.stderr);
    // What a program prints is what it prints natively.
    let script = "printf 'a\\tb\\n'; seq 3 | tr '\\n' ,; echo; expr 6 \\* 7";
    assert_eq!(
        root.ok(&["exec", "box", "--", "sh", "-c", script]),
        native(script)
    );
    let o = root.cli(&["exec", "box", "--", "no-such-program"]);
    assert_ne!(o.status, 0);
    assert!(o.stderr.contains("no-such-program"), "{}", o.stderr);
    let ls = root.ok(&["ls"]);
    assert!(ls.contains("box") && ls.contains("running"), "{ls}");
}

#[test]
fn files_are_copied_in_and_out_whole() {
    let root = Root::new("sb-cp");
    root.ok(&["create", "files"]);
    let host = TempDir::new("sb-cp-host");
    let src = host.path().join("src");
    std::fs::create_dir_all(src.join("sub")).expect("mkdir");
    let blob: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(src.join("blob"), &blob).expect("write");
    std::fs::write(src.join("sub/note"), "a note\n").expect("write");
    let s = |p: &std::path::Path| p.to_str().expect("utf-8").to_string();
    root.ok(&["cp", &s(&src), "files:/tmp/copy"]);
    assert_eq!(
        root.ok(&[
            "exec",
            "files",
            "--",
            "sh",
            "-c",
            "cd /tmp/copy && find . | sort && cat sub/note"
        ]),
        ".\n./blob\n./sub\n./sub/note\na note\n"
    );
    let back = host.path().join("back");
    root.ok(&["cp", "files:/tmp/copy", &s(&back)]);
    assert_eq!(std::fs::read(back.join("blob")).expect("read"), blob);
    assert_eq!(
        std::fs::read_to_string(back.join("sub/note")).expect("read"),
        "a note\n"
    );
    // One file, into folders that do not exist yet.
    root.ok(&["cp", &s(&src.join("blob")), "files:/tmp/a/b/c"]);
    let one = host.path().join("one");
    root.ok(&["cp", "files:/tmp/a/b/c", &s(&one)]);
    assert_eq!(std::fs::read(&one).expect("read"), blob);
    let o = root.cli(&["cp", "files:/tmp/none", &s(&one)]);
    assert_eq!(o.status, 1);
    assert!(o.stderr.contains("/tmp/none: no such file"), "{}", o.stderr);
    // The root is read-only without --overlay: writing there is refused.
    let o = root.cli(&["cp", &s(&src.join("blob")), "files:/etc/blob"]);
    assert_ne!(o.status, 0);
    assert!(o.stderr.contains("Read-only"), "{}", o.stderr);
}

#[test]
fn a_sandbox_ends_when_told_and_says_why() {
    let root = Root::new("sb-end");
    root.ok(&["create", "one"]);
    let o = root.cli(&["create", "one"]);
    assert_eq!(o.status, 1);
    assert!(o.stderr.contains("exists already"), "{}", o.stderr);
    let o = root.cli(&["create", "no/slash"]);
    assert!(
        o.status != 0 && o.stderr.contains("sandbox name"),
        "{}",
        o.stderr
    );
    let o = root.cli(&["create", "badroot", "--root", "/no/such/dir"]);
    assert_eq!(o.status, 1);
    assert!(
        o.stderr.contains("did not start") && o.stderr.contains("/no/such/dir"),
        "{}",
        o.stderr
    );
    root.ok(&["stop", "one"]);
    let ls = root.ok(&["ls"]);
    assert!(ls.contains("ended") && ls.contains("stopped by"), "{ls}");
    let o = root.cli(&["exec", "one", "--", "true"]);
    assert_eq!(o.status, 1);
    assert!(o.stderr.contains("has ended"), "{}", o.stderr);
    root.ok(&["rm", "one"]);
    assert!(!root.ok(&["ls"]).contains("one"));
    let o = root.cli(&["exec", "one", "--", "true"]);
    assert!(o.stderr.contains("no sandbox named"), "{}", o.stderr);
    // An idle timeout ends it, and `ls` says so; one exec keeps it alive.
    root.ok(&["create", "idle", "--idle-timeout", "1500ms"]);
    root.ok(&["exec", "idle", "--", "sleep", "2"]);
    assert!(root.ok(&["ls"]).contains("running"));
    std::thread::sleep(Duration::from_millis(2500));
    let ls = root.ok(&["ls"]);
    assert!(
        ls.contains("ended") && ls.contains("idle for its --idle-timeout of 1500ms"),
        "{ls}"
    );
    // An ended sandbox has nothing to save.
    let o = root.cli(&[
        "snapshot",
        "idle",
        &root.0.path().join("img").display().to_string(),
    ]);
    assert!(
        o.status != 0 && o.stderr.contains("has ended"),
        "{}",
        o.stderr
    );
}

/// `snapshot` saves a running sandbox, which runs on; `create --from`
/// and `fork` make copies that start where it stood and then go apart.
#[test]
fn snapshots_and_forks_start_where_the_sandbox_stood() {
    let root = Root::new("sb-fork");
    root.ok(&["create", "base"]);
    root.ok(&["exec", "base", "--", "sh", "-c", "echo 41 > /tmp/n"]);
    let image = root.0.path().join("snap").display().to_string();
    assert_eq!(root.ok(&["snapshot", "base", &image]).trim(), image);
    root.ok(&["create", "copy", "--from", &image]);
    root.ok(&["fork", "base", "forked"]);
    root.ok(&["exec", "forked", "--", "sh", "-c", "echo 42 > /tmp/n"]);
    root.ok(&["exec", "base", "--", "sh", "-c", "echo 40 > /tmp/n"]);
    let read = |name: &str| root.ok(&["exec", name, "--", "cat", "/tmp/n"]);
    assert_eq!(
        [read("base"), read("copy"), read("forked")],
        ["40\n", "41\n", "42\n"]
    );
    let ls = root.ok(&["ls"]);
    assert_eq!(ls.matches("running").count(), 3, "{ls}");
    // A program exec started in the background is forked too (the exec's
    // stdin it holds is /dev/null in the copy), and counts on there.
    root.ok(&[
        "exec",
        "base",
        "--",
        "sh",
        "-c",
        "(i=0; while :; do i=$((i+1)); echo $i > /tmp/c; sleep 0.05; done) > /dev/null 2>&1 & \
         sleep 0.2",
    ]);
    root.ok(&["fork", "base", "busy"]);
    // (a read between the shell's truncation of /tmp/c and its write
    // finds it empty: it is read again)
    let count = |name: &str| -> u64 {
        (0..50)
            .map(|_| {
                let n = root.ok(&["exec", name, "--", "cat", "/tmp/c"]);
                n.trim().parse().unwrap_or(0)
            })
            .find(|&n| n > 0)
            .unwrap_or(0)
    };
    let first = count("busy");
    std::thread::sleep(Duration::from_millis(400));
    let then = count("busy");
    assert!(
        first > 0 && then > first,
        "the copy's counter runs on: {first}, then {then}"
    );
    let o = root.cli(&["fork", "base", "forked"]);
    assert!(
        o.status != 0 && o.stderr.contains("exists already"),
        "{}",
        o.stderr
    );
}

#[test]
fn a_guest_port_is_reached_from_the_host_loopback() {
    use std::io::{BufRead, BufReader, Read, Write};
    let root = Root::new("sb-port");
    root.ok(&["create", "web"]);
    // A guest server that answers each connection with what it read, upper-cased.
    let server = "import socket\ns=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(('127.0.0.1', 7000)); s.listen()\nwhile True:\n    c,_=s.accept(); d=b''\n    while not d.endswith(b'.'):\n        d+=c.recv(65536)\n    c.sendall(d.upper()); c.close()\n";
    root.ok(&[
        "exec",
        "web",
        "--",
        "sh",
        "-c",
        &format!("python3 -c \"{server}\" > /dev/null 2>&1 &"),
    ]);
    let mut cmd = command(FERROVISOR, &[]);
    cmd.arg("--root")
        .arg(root.0.path())
        .args(["sandbox", "port", "web", "7000"]);
    let mut fwd = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sandbox port");
    let mut line = String::new();
    BufReader::new(fwd.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("its address");
    let addr = line.trim().to_string();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let talk = |msg: &[u8]| -> Option<Vec<u8>> {
        let mut s = std::net::TcpStream::connect(&addr).ok()?;
        s.write_all(msg).ok()?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).ok()?;
        Some(out)
    };
    // (the guest's server may still be starting)
    let mut answer = None;
    for _ in 0..100 {
        answer = talk(b"hello.").filter(|a| !a.is_empty());
        if answer.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(answer.as_deref(), Some(&b"HELLO."[..]));
    let big: Vec<u8> = (0..2_000_000u32)
        .map(|i| b'a' + (i % 26) as u8)
        .chain(*b".")
        .collect();
    assert_eq!(talk(&big).expect("an answer"), big.to_ascii_uppercase());
    // Nothing listens on another port: the connection is closed at once.
    let mut cmd = command(FERROVISOR, &[]);
    cmd.arg("--root")
        .arg(root.0.path())
        .args(["sandbox", "port", "web", "7001"]);
    let mut other = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sandbox port");
    let mut line = String::new();
    BufReader::new(other.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("its address");
    let mut s = std::net::TcpStream::connect(line.trim()).expect("the host side accepts");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert!(out.is_empty());
    // The forwarders end with the sandbox.
    root.ok(&["rm", "web"]);
    for f in [&mut fwd, &mut other] {
        let st = f.wait().expect("forwarder");
        assert_eq!(st.code(), Some(1));
    }
    assert!(std::net::TcpStream::connect(&addr).is_err());
}

#[test]
fn memory_and_cpu_limits_hold_through_a_host_cgroup() {
    let root = Root::new("sb-limits");
    root.ok(&["create", "lim", "--memory", "128m", "--cpus", "0.5"]);
    // The guest is told of its limits...
    let seen = root.ok(&[
        "exec",
        "lim",
        "--",
        "sh",
        "-c",
        "head -1 /proc/meminfo; cat /sys/fs/cgroup/cpu.max",
    ]);
    assert_eq!(
        seen.split_whitespace().collect::<Vec<_>>(),
        ["MemTotal:", "131072", "kB", "50000", "100000"]
    );
    // ... and the host holds them: a program that goes past the memory
    // limit is killed, and the sandbox lives on.
    let o = root.cli(&[
        "exec",
        "lim",
        "--",
        "python3",
        "-c",
        "a = bytearray(400 << 20); a[::4096] = b'x' * len(a[::4096]); print(len(a))",
    ]);
    assert_eq!(o.status, 137, "{}", common::show(&o));
    assert_eq!(root.ok(&["exec", "lim", "--", "echo", "alive"]), "alive\n");
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.0.path().join(".sandboxes/lim/sandbox.json")).expect("sandbox.json"),
    )
    .expect("JSON");
    let dirs: Vec<String> = meta["cgroup"]["dirs"]
        .as_array()
        .expect("its cgroup")
        .iter()
        .filter_map(|d| d.as_str().map(str::to_string))
        .collect();
    assert!(!dirs.is_empty());
    root.ok(&["rm", "lim"]);
    for d in dirs {
        assert!(!std::path::Path::new(&d).exists(), "{d} is left behind");
    }
    let o = root.cli(&["create", "bad", "--memory", "lots"]);
    assert!(
        o.status == 1 && o.stderr.contains("--memory"),
        "{}",
        o.stderr
    );
}

fn make_image(kind: &str, out: &std::path::Path, host_dir: Option<&std::path::Path>) {
    let mut cmd = command("/usr/bin/python3", &[("PYTHONDONTWRITEBYTECODE", "1")]);
    cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/make_image.py"))
        .arg(kind)
        .arg(out);
    if let Some(h) = host_dir {
        cmd.arg(h);
    }
    let o = run(cmd, None, TIMEOUT);
    assert_eq!(o.status, 0, "make_image.py {kind}: {}", common::show(&o));
}

#[test]
fn a_sandbox_runs_an_oci_image_with_its_layers_and_whiteouts() {
    let root = Root::new("sb-image");
    let dir = TempDir::new("sb-image-src");
    let layout = dir.path().join("layout");
    let saved = dir.path().join("saved.tar");
    let zstd = dir.path().join("zstd");
    make_image("layout", &layout, None);
    make_image("docker", &saved, None);
    make_image("zstd", &zstd, None);
    let script =
        "cat /etc/greeting; ls /data; echo $IMAGE_VAR; [ -e /etc/old.txt ] || echo old.txt gone";
    for (name, image) in [("oci", &layout), ("docker", &saved), ("zstd", &zstd)] {
        root.ok(&["create", name, "--image", image.to_str().expect("utf-8")]);
        // The second layer's file, its opaque folder and whiteout, and the
        // config's environment.
        assert_eq!(
            root.ok(&["exec", name, "--", "sh", "-c", script]),
            "hello from the image\nc\nfrom-image\nold.txt gone\n",
            "{name}"
        );
        // The config's WorkingDir and User, unless the exec says.
        let ids = "pwd; id -u; id -g";
        assert_eq!(
            root.ok(&["exec", name, "--", "sh", "-c", ids]),
            "/data\n65534\n65533\n",
            "{name}"
        );
        assert_eq!(
            root.ok(&["exec", name, "--cwd", "/", "-u", "0", "--", "sh", "-c", ids]),
            "/\n0\n0\n",
            "{name}"
        );
    }
    // A second sandbox of the same image reuses what was unpacked.
    root.ok(&[
        "create",
        "again",
        "--image",
        layout.to_str().expect("utf-8"),
    ]);
    let unpacked = std::fs::read_dir(root.0.path().join(".images"))
        .expect(".images")
        .count();
    assert_eq!(unpacked, 3);
    // `prune` keeps what sandboxes use, ended ones too, and removes the
    // rest.
    root.ok(&["stop", "docker"]);
    assert_eq!(root.ok(&["prune"]), "0 images, 0.0 MiB\n");
    root.ok(&["rm", "docker", "zstd"]);
    let said = root.ok(&["prune"]);
    assert_eq!(
        said.lines()
            .filter(|l| l.starts_with("removed image "))
            .count(),
        2,
        "{said}"
    );
    assert!(
        said.ends_with(" MiB\n") && said.contains("\n2 images, "),
        "{said}"
    );
    let unpacked = std::fs::read_dir(root.0.path().join(".images"))
        .expect(".images")
        .count();
    assert_eq!(unpacked, 1);
    assert_eq!(
        root.sh("again", "cat /etc/greeting"),
        "hello from the image\n"
    );
    // An image whose layer writes through a symlink to a host folder is
    // refused, and the folder stays empty.
    let host = TempDir::new("sb-image-host");
    let evil = dir.path().join("evil");
    make_image("evil", &evil, Some(host.path()));
    let o = root.cli(&["create", "evil", "--image", evil.to_str().expect("utf-8")]);
    assert_eq!(o.status, 1, "{}", common::show(&o));
    assert!(o.stderr.contains("outside"), "{}", o.stderr);
    assert_eq!(std::fs::read_dir(host.path()).expect("host dir").count(), 0);
    // A corrupt blob, and something that is no image, are said to be.
    let corrupt = dir.path().join("corrupt");
    make_image("corrupt", &corrupt, None);
    let o = root.cli(&[
        "create",
        "corrupt",
        "--image",
        corrupt.to_str().expect("utf-8"),
    ]);
    assert!(
        o.status == 1 && o.stderr.contains("is corrupt"),
        "{}",
        o.stderr
    );
    let o = root.cli(&["create", "none", "--image", "/etc/hostname"]);
    assert!(
        o.status == 1 && o.stderr.contains("--image /etc/hostname"),
        "{}",
        o.stderr
    );
    let ls = root.ok(&["ls"]);
    assert!(!ls.contains("evil") && !ls.contains("corrupt"), "{ls}");
}

/// Without a host cgroup (here: an empty, read-only /sys/fs/cgroup in a
/// mount namespace of the sandbox's own), `--memory` is held by the
/// Sentry: a program past it is killed and the sandbox lives on; so is
/// `--cpus` (the guest's `cpu.max` says it).
#[test]
fn memory_limits_hold_without_a_host_cgroup() {
    let root = Root::new("sb-nocg");
    let without_cgroups = |args: &[&str]| {
        let mut cmd = command("unshare", &[]);
        cmd.args(["-m", "--propagation", "private", "/bin/sh", "-c"])
            .arg("mount -t tmpfs -o ro none /sys/fs/cgroup && exec \"$0\" \"$@\"")
            .arg(FERROVISOR)
            .arg("--root")
            .arg(root.0.path())
            .arg("sandbox")
            .args(args);
        run(cmd, None, TIMEOUT)
    };
    let made = without_cgroups(&["create", "lim", "--memory", "64m"]);
    assert_eq!(made.status, 0, "{}", common::show(&made));
    // (a MiB at a time with a pause, as limits.rs says why)
    let hog = "python3 -c 'import time\nb = []\nfor _ in range(300): \
               b.append(bytearray(1 << 20)); time.sleep(0.001)'; echo \"status $?\"; \
               cat /sys/fs/cgroup/memory.max";
    assert_eq!(root.sh("lim", hog), "status 137\n67108864\n");
    assert_eq!(root.sh("lim", "echo alive"), "alive\n");
    let o = without_cgroups(&["create", "cpu", "--cpus", "0.5"]);
    assert_eq!(o.status, 0, "{}", common::show(&o));
    assert_eq!(
        root.sh("cpu", "cat /sys/fs/cgroup/cpu.max"),
        "50000 100000\n"
    );
}

/// `sandbox watch NAME DIR` prints the folder's changes as they come and
/// ends when the folder goes (the SDK's test compares them with a native
/// inotify watch); a folder that is not there gets one line.
#[test]
fn watch_prints_a_folders_changes_until_it_goes() {
    use std::io::BufRead;
    let root = Root::new("sb-watch");
    root.ok(&["create", "w"]);
    root.sh("w", "mkdir /tmp/w");
    let mut cmd = command(FERROVISOR, &[]);
    cmd.arg("--root")
        .arg(root.0.path())
        .args(["sandbox", "watch", "w", "/tmp/w"])
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("watch");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    // (it prints nothing until a change: the watch is set once a first
    // exec's change arrives, so the changes are made until one does)
    let first = loop {
        root.sh("w", "touch /tmp/w/first");
        if let Some(Ok(l)) = lines.next() {
            break l;
        }
    };
    assert_eq!(first, "create first");
    root.sh(
        "w",
        "mkdir /tmp/w/d; rm /tmp/w/first; rmdir /tmp/w/d; rmdir /tmp/w",
    );
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    // (touch's own chmod and write of `first` come before)
    assert!(rest.contains(&"create d/".to_string()), "{rest:?}");
    assert!(
        rest.ends_with(&["remove first".into(), "remove d/".into(), "gone".into()]),
        "{rest:?}"
    );
    let o = root.cli(&["watch", "w", "/tmp/nope"]);
    assert!(
        o.status != 0 && o.stderr.contains("no such directory"),
        "{}",
        common::show(&o)
    );
}

/// `sandbox watch -r` follows the folders below too: those there at the
/// start, those made later (with what they held before their watch was
/// set), and a folder moved within the tree under its new name.
#[test]
fn a_recursive_watch_follows_the_folders_below() {
    use std::io::BufRead;
    let root = Root::new("sb-rwatch");
    root.ok(&["create", "w"]);
    root.sh("w", "mkdir -p /tmp/r/a");
    let mut cmd = command(FERROVISOR, &[]);
    cmd.arg("--root")
        .arg(root.0.path())
        .args(["sandbox", "watch", "-r", "w", "/tmp/r"])
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("watch");
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = loop {
        root.sh("w", "echo > /tmp/r/a/first");
        if let Some(Ok(l)) = lines.next() {
            break l;
        }
    };
    assert_eq!(first, "create a/first");
    root.sh(
        "w",
        "mkdir -p /tmp/r/a/b/c/d; sleep 0.3; echo x > /tmp/r/a/b/c/f; rm /tmp/r/a/b/c/f; \
         mv /tmp/r/a/b /tmp/r/m; sleep 0.3; echo y > /tmp/r/m/c/g; sleep 0.3; rm -r /tmp/r",
    );
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    for want in [
        "create a/b/",
        "create a/b/c/",
        "create a/b/c/d/",
        "create a/b/c/f",
        "write a/b/c/f",
        "remove a/b/c/f",
        "moved_from a/b/",
        "moved_to m/",
        "create m/c/",
        "create m/c/d/",
        "create m/c/g",
        "write m/c/g",
        "remove m/c/g",
        "remove m/",
        "gone",
    ] {
        assert!(rest.iter().any(|l| l == want), "{want:?} in {rest:?}");
    }
    // Nothing under the old name once it moved, and `gone` last.
    let moved = rest
        .iter()
        .position(|l| l == "moved_from a/b/")
        .unwrap_or(0);
    assert!(
        !rest[moved + 1..].iter().any(|l| l.contains(" a/b")),
        "{rest:?}"
    );
    assert_eq!(rest.last().map(String::as_str), Some("gone"), "{rest:?}");
}
