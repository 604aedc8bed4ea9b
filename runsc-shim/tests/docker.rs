//! Docker end to end: a private `containerd` and a private `dockerd` from
//! Debian's packages (data, state and sockets under a temp dir, in a mount
//! namespace of their own, no network), `docker load` of an image built
//! here from `busybox-static`, then containers run with `--runtime
//! ferrovisor`: Docker drives containerd's runc shim with the built
//! `ferrovisor` as its runc binary. Skipped, with a message, when Docker or
//! containerd is not installed (`apt-get install docker.io`).

mod common;

use std::fs;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::containerd::{build_docker_archive, tools, Engine, Watchdog, FERROVISOR, TIMEOUT};
use common::{run, Outcome};

/// The programs of Debian's `docker.io` package, named by path: a `docker`
/// elsewhere in PATH (e.g. a client-only /usr/local/bin/docker) may be of
/// another version.
const DOCKERD: &str = "/usr/sbin/dockerd";
const DOCKER: &str = "/usr/bin/docker";
const IMAGE: &str = "ferrovisor-busybox:test";
/// The whole test, engines' start and teardown included.
const WATCHDOG: Duration = Duration::from_secs(300);

/// A private dockerd over a private containerd, torn down on drop:
/// containers removed, dockerd stopped, then the containerd [`Engine`]'s own
/// teardown (every process naming the temp dir killed, mounts undone, the
/// dir removed).
struct Docker {
    child: Option<Child>,
    /// containers to remove on drop
    ids: Vec<String>,
    engine: Engine,
    /// Dropped last: covers the teardown too.
    _watchdog: Watchdog,
}

impl Docker {
    fn start(tag: &str) -> Option<Docker> {
        if !Path::new(DOCKERD).is_file() || !Path::new(DOCKER).is_file() {
            eprintln!("SKIP {tag}: no {DOCKERD} or {DOCKER} (apt-get install docker.io)");
            return None;
        }
        let tools = tools(tag)?;
        // dockerd's state paths (/etc/docker, /run/docker) are fixed: the
        // engines get a mount namespace of their own with those under the
        // temp dir (see `PrivateMounts`).
        let engine = Engine::start_private(tag, tools);
        let watchdog = Watchdog::start(&engine.dir, WATCHDOG);
        let mut d = Docker {
            child: None,
            ids: Vec::new(),
            engine,
            _watchdog: watchdog,
        };
        let dir = d.dir().to_path_buf();
        std::fs::create_dir_all(dir.join("client")).expect("mkdir client");
        // Nothing from the host's daemon.json; experimental for `docker
        // checkpoint`.
        std::fs::write(dir.join("daemon.json"), "{\"experimental\": true}\n")
            .expect("write daemon.json");
        let containerd = d.engine.child.as_ref().expect("containerd runs").id();
        let mounts: OwnedFd = std::fs::File::open(format!("/proc/{containerd}/ns/mnt"))
            .expect("containerd's mount namespace")
            .into();
        let log = std::fs::File::create(dir.join("dockerd.log")).expect("dockerd log");
        let mut cmd = Command::new(DOCKERD);
        cmd.arg("--config-file")
            .arg(dir.join("daemon.json"))
            .arg("--pidfile")
            .arg(dir.join("docker.pid"))
            .arg("--data-root")
            .arg(dir.join("data"))
            .arg("--exec-root")
            .arg(dir.join("exec"))
            .arg("-H")
            .arg(format!("unix://{}", d.sock().display()))
            .arg("--containerd")
            .arg(d.engine.sock())
            .args([
                "--bridge",
                "none",
                "--iptables=false",
                "--ip6tables=false",
                "--ip-masq=false",
                "--userland-proxy=false",
            ])
            .arg("--add-runtime")
            .arg(format!("ferrovisor={FERROVISOR}"))
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("HOME", &dir)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup log"))
            .stderr(log);
        let ns = mounts.as_raw_fd();
        // SAFETY: setsid and setns are async-signal-safe system calls; the
        // child is single-threaded between fork and exec, and `ns` stays
        // open until spawn returns.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setsid() < 0 || libc::setns(ns, libc::CLONE_NEWNS) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        d.child = Some(cmd.spawn().expect("spawn dockerd"));
        drop(mounts);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = d.docker(&["version"]);
            if out.status == 0 {
                break;
            }
            if let Some(Ok(Some(st))) = d.child.as_mut().map(Child::try_wait) {
                panic!("dockerd exited ({st}) before serving:\n{}", d.log());
            }
            assert!(
                Instant::now() < deadline,
                "dockerd did not answer within 60 s:\n{}\n{}",
                out.stderr,
                d.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Some(d)
    }

    fn dir(&self) -> &Path {
        &self.engine.dir
    }

    fn sock(&self) -> PathBuf {
        self.dir().join("docker.sock")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir().join("dockerd.log")).unwrap_or_default()
    }

    /// The client, talking to this dockerd only, its own configuration
    /// under the temp dir.
    fn command(&self, args: &[&str]) -> Command {
        let host = format!("unix://{}", self.sock().display());
        let config = self.dir().join("client");
        let mut cmd = common::command(
            DOCKER,
            &[
                ("DOCKER_HOST", &host),
                ("DOCKER_CONFIG", &config.to_string_lossy()),
            ],
        );
        cmd.args(args);
        cmd
    }

    fn docker(&self, args: &[&str]) -> Outcome {
        run(self.command(args), None, TIMEOUT)
    }

    /// `docker` that must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.docker(args);
        assert_eq!(
            out.status,
            0,
            "docker {}: {out:?}\ndockerd:\n{}",
            args.join(" "),
            self.log()
        );
        out.stdout
    }

    /// `docker run -d` of `sh -c SCRIPT` in ferrovisor, without a network;
    /// the container's id, removed on drop.
    fn run_detached(&mut self, script: &str) -> String {
        self.run_detached_argv(&["sh", "-c", script])
    }

    /// [`Docker::run_detached`] of the image's command `argv`.
    fn run_detached_argv(&mut self, argv: &[&str]) -> String {
        let mut args = vec![
            "run",
            "-d",
            "--runtime",
            "ferrovisor",
            "--network",
            "none",
            IMAGE,
        ];
        args.extend_from_slice(argv);
        let id = self.ok(&args).trim().to_string();
        assert!(!id.is_empty(), "docker run -d printed the id");
        self.ids.push(id.clone());
        id
    }

    fn load(&self) {
        let archive = build_docker_archive(self.dir(), IMAGE);
        let out = self.ok(&["load", "-i", &archive.to_string_lossy()]);
        assert!(out.contains(IMAGE), "docker load: {out}");
    }
}

impl Drop for Docker {
    fn drop(&mut self) {
        // Politely first, while dockerd still answers.
        for id in std::mem::take(&mut self.ids) {
            let _ = run(
                self.command(&["rm", "--force", &id]),
                None,
                Duration::from_secs(30),
            );
        }
        if let Some(mut child) = self.child.take() {
            let pgid = child.id() as i32;
            // SAFETY: kill(2) on the process group dockerd leads (it was
            // started with setsid), which holds no process of ours besides.
            unsafe { libc::kill(-pgid, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(15);
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
            // SAFETY: as above.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = child.wait();
        }
        // Then the engine's teardown (containerd, shims, sandboxes).
    }
}

#[test]
fn docker_runs_containers_in_ferrovisor() {
    let Some(mut d) = Docker::start("docker") else {
        return;
    };
    let info = d.ok(&["info", "--format", "{{json .Runtimes}}"]);
    assert!(info.contains(FERROVISOR), "ferrovisor registered: {info}");
    d.load();

    // A container run to completion, output through Docker's logging.
    let out = d.ok(&[
        "run",
        "--rm",
        "--runtime",
        "ferrovisor",
        "--network",
        "none",
        IMAGE,
        "sh",
        "-c",
        "echo hi; cat /proc/self/status",
    ]);
    assert!(out.starts_with("hi\n"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("Pid:")), "{out}");
    // Without --network: this dockerd has no bridge (--bridge none), so the
    // default network is none as well.
    let out = d.ok(&[
        "run",
        "--rm",
        "--runtime",
        "ferrovisor",
        IMAGE,
        "sh",
        "-c",
        "echo hi; cat /proc/self/status",
    ]);
    assert!(out.starts_with("hi\n"), "{out}");

    // Docker's masked and read-only paths (/proc/sys among them) and a
    // namespaced sysctl, applied as runc applies them.
    let out = d.ok(&[
        "run",
        "--rm",
        "--runtime",
        "ferrovisor",
        "--network",
        "none",
        "--sysctl",
        "kernel.shmmax=68719476736",
        IMAGE,
        "sh",
        "-c",
        "cat /proc/sys/kernel/shmmax; sh -c 'echo 1 > /proc/sys/kernel/shmmax' 2>&1; \
         cat /proc/kcore 2>&1; true",
    ]);
    assert_eq!(
        out,
        "68719476736\nsh: can't create /proc/sys/kernel/shmmax: Read-only file system\n\
         cat: can't open '/proc/kcore': No such file or directory\n",
        "{out}"
    );

    // A detached one: exec, logs, stop, rm.
    let id = d.run_detached("echo started; sleep 1000");
    let state = d.ok(&["inspect", "--format", "{{.State.Status}}", &id]);
    assert_eq!(state.trim(), "running", "{state}");
    let out = d.ok(&["exec", &id, "sh", "-c", "echo from exec"]);
    assert_eq!(out, "from exec\n");
    // The engine's /etc files, as copies: the hostname is the short id.
    let out = d.ok(&["exec", &id, "cat", "/etc/hostname", "/etc/hosts"]);
    assert!(out.starts_with(&format!("{}\n", &id[..12])), "{out}");
    assert!(out.contains("localhost"), "{out}");
    let out = d.docker(&["exec", &id, "sh", "-c", "exit 3"]);
    assert_eq!(out.status, 3, "exec status: {out:?}");
    // The first echo may reach the log file after `run -d` returned.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let logs = d.ok(&["logs", &id]);
        if logs == "started\n" {
            break;
        }
        assert!(Instant::now() < deadline, "docker logs: {logs:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The run timeout bounds the whole stop: SIGTERM, then SIGKILL after
    // 2 s.
    let out = run(
        d.command(&["stop", "-t", "2", &id]),
        None,
        Duration::from_secs(60),
    );
    assert_eq!(out.status, 0, "docker stop: {out:?}\n{}", d.log());
    let state = d.ok(&[
        "inspect",
        "--format",
        "{{.State.Status}} {{.State.ExitCode}}",
        &id,
    ]);
    // sh as the first process of a PID namespace ignores SIGTERM (it has
    // no handler), so SIGKILL ends it: 137, under runc and ferrovisor alike.
    let state = state.trim();
    assert_eq!(state, "exited 137");
    d.ok(&["rm", &id]);
    d.ids.clear();
    let left = d.ok(&["ps", "--all", "--quiet"]);
    assert_eq!(left, "", "no container left");
}

/// `docker run --user` (a uid, uid:gid with `--group-add`, a name) and
/// the `HOME` it gets: the guest's ids, supplementary groups and `HOME` as
/// under runc, Docker's default runtime, where runc is installed.
#[test]
fn docker_run_user_and_group_add_as_runc() {
    let Some(d) = Docker::start("docker-user") else {
        return;
    };
    d.load();
    let runc = ["/usr/local/sbin/runc", "/usr/sbin/runc", "/usr/bin/runc"]
        .iter()
        .any(|p| Path::new(p).is_file());
    if !runc {
        eprintln!("note: runc is not installed: docker run --user is not compared with runc");
    }
    let cases: [(&[&str], &str); 5] = [
        (&[], "0\n0\nHOME=/root\n"),
        (&["--user", "1000"], "1000\n1000 100\nHOME=/home/user\n"),
        (
            &["--user", "1000:1000", "--group-add", "5"],
            "1000\n1000 5\nHOME=/home/user\n",
        ),
        (&["--user", "nobody"], "65534\n65534\nHOME=/nonexistent\n"),
        (&["--user", "4321:4321"], "4321\n4321\nHOME=/\n"),
    ];
    for (flags, want) in cases {
        for runtime in ["ferrovisor", "runc"].iter().take(1 + usize::from(runc)) {
            let mut args = vec!["run", "--rm", "--runtime", runtime, "--network", "none"];
            args.extend(flags);
            args.extend([IMAGE, "sh", "-c", "id -u; id -G; echo HOME=$HOME"]);
            assert_eq!(d.ok(&args), want, "{runtime} with {flags:?}");
        }
    }
}

/// `--security-opt seccomp`: Docker's default profile, `unconfined` and a
/// profile of one's own filter the guest's calls as under runc, where runc
/// is installed; so does `--device` of a device every guest has.
#[test]
fn docker_seccomp_profiles_filter_as_runc() {
    let Some(d) = Docker::start("docker-seccomp") else {
        return;
    };
    d.load();
    let profile = d.dir().join("deny-mkdir.json");
    let deny = r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
        {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13}]}"#;
    fs::write(&profile, deny).expect("write the profile");
    let opt = format!("seccomp={}", profile.display());
    let runc = ["/usr/local/sbin/runc", "/usr/sbin/runc", "/usr/bin/runc"]
        .iter()
        .any(|p| Path::new(p).is_file());
    // `--device` of a device every guest has, as runc gives it.
    for runtime in ["ferrovisor", "runc"].iter().take(1 + usize::from(runc)) {
        let args = [
            "run",
            "--rm",
            "--runtime",
            runtime,
            "--network",
            "none",
            "--device",
            "/dev/urandom",
            IMAGE,
            "sh",
            "-c",
            "head -c 5 /dev/urandom | wc -c",
        ];
        assert_eq!(d.ok(&args).trim(), "5", "{runtime} with --device");
    }
    let script = "grep '^Seccomp:' /proc/self/status; mkdir /made 2>&1 && echo made; true";
    let cases: [(&[&str], &str); 3] = [
        (&[], "Seccomp:\t2\nmade\n"),
        (
            &["--security-opt", "seccomp=unconfined"],
            "Seccomp:\t0\nmade\n",
        ),
        (
            &["--security-opt", &opt],
            "Seccomp:\t2\nmkdir: can't create directory '/made': Permission denied\n",
        ),
    ];
    for (flags, want) in cases {
        for runtime in ["ferrovisor", "runc"].iter().take(1 + usize::from(runc)) {
            let mut args = vec!["run", "--rm", "--runtime", runtime, "--network", "none"];
            args.extend(flags);
            args.extend([IMAGE, "sh", "-c", script]);
            assert_eq!(d.ok(&args), want, "{runtime} with {flags:?}");
        }
    }
}

/// What a container writes is in its rootfs, where the engine looks: `docker
/// cp` out of (and into) files the container wrote, `/tmp` included,
/// `docker diff`, `docker commit` and a run of the new image; `--read-only`
/// makes `/tmp` read-only unless a `--tmpfs` says otherwise; a signal sent
/// right after `docker run -d` reaches the program's handler. Each as under
/// runc, where runc is installed.
#[test]
fn docker_sees_what_the_container_wrote_as_with_runc() {
    let Some(mut d) = Docker::start("docker-rootfs") else {
        return;
    };
    d.load();
    let id = d.run_detached(
        "echo data > /tmp/made; echo top > /made; mkdir /dir; touch /ready; sleep 1000",
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while d.docker(&["exec", &id, "test", "-f", "/ready"]).status != 0 {
        assert!(
            Instant::now() < deadline,
            "the container never wrote /ready"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out_dir = d.dir().join("copied");
    std::fs::create_dir_all(&out_dir).expect("mkdir copied");
    let dest = out_dir.to_string_lossy().into_owned();
    d.ok(&["cp", &format!("{id}:/tmp/made"), &dest]);
    assert_eq!(
        std::fs::read_to_string(out_dir.join("made")).expect("copied out"),
        "data\n"
    );
    let host_file = out_dir.join("in");
    std::fs::write(&host_file, "from the host\n").expect("write in");
    d.ok(&["cp", &host_file.to_string_lossy(), &format!("{id}:/tmp/in")]);
    assert_eq!(d.ok(&["exec", &id, "cat", "/tmp/in"]), "from the host\n");
    let diff = d.ok(&["diff", &id]);
    for line in ["A /made", "A /dir", "C /tmp", "A /tmp/made", "A /tmp/in"] {
        assert!(
            diff.lines().any(|l| l == line),
            "{line} in docker diff:\n{diff}"
        );
    }
    d.ok(&["commit", &id, "ferrovisor-committed:test"]);
    let out = d.ok(&[
        "run",
        "--rm",
        "--runtime",
        "ferrovisor",
        "--network",
        "none",
        "ferrovisor-committed:test",
        "cat",
        "/made",
        "/tmp/made",
    ]);
    assert_eq!(out, "top\ndata\n");
    d.ok(&["rm", "--force", &id]);
    d.ids.clear();

    let runc = ["/usr/local/sbin/runc", "/usr/sbin/runc", "/usr/bin/runc"]
        .iter()
        .any(|p| Path::new(p).is_file());
    let read_only: [(&[&str], &str); 2] = [
        (&["--read-only"], "touch: /tmp/x: Read-only file system\n"),
        (&["--read-only", "--tmpfs", "/tmp"], "written\n"),
    ];
    for (flags, want) in read_only {
        for runtime in ["ferrovisor", "runc"].iter().take(1 + usize::from(runc)) {
            let mut args = vec!["run", "--rm", "--runtime", runtime, "--network", "none"];
            args.extend(flags);
            args.extend([IMAGE, "sh", "-c", "touch /tmp/x 2>&1 && echo written; true"]);
            assert_eq!(d.ok(&args), want, "{runtime} with {flags:?}");
        }
    }

    // The handler is set up by the time `docker run -d` returns.
    let id = d.run_detached("trap 'echo got TERM; exit 7' TERM; sleep 1000 & wait");
    d.ok(&["kill", "--signal", "TERM", &id]);
    let out = run(d.command(&["wait", &id]), None, Duration::from_secs(20));
    assert_eq!(out.stdout.trim(), "7", "docker wait: {out:?}");
    assert_eq!(d.ok(&["logs", &id]), "got TERM\n");
}

/// `docker checkpoint create` saves a container that counts and stops
/// it; `docker start --checkpoint` goes on from the saved number: the
/// log holds each number once, in order, across both.
#[test]
fn docker_checkpoint_and_start_from_it_go_on_counting() {
    let Some(mut d) = Docker::start("docker-checkpoint") else {
        return;
    };
    d.load();
    let id = d.run_detached_argv(&["count"]);
    let logs_until = |d: &Docker, n: usize| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = common::counted(&d.ok(&["logs", &id]));
            if got.len() >= n || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    assert!(logs_until(&d, 3).len() >= 3, "the container counts");
    d.ok(&["checkpoint", "create", &id, "cp1"]);
    // dockerd 20.10 uploads the checkpoint to containerd again at `start`
    // and fails ("content ... already exists") while containerd still
    // holds the copy `checkpoint create` left there, unreferenced, until
    // its garbage collection runs: a race of the engine's, removed here.
    let listed = d.engine.ctr(&["-n", "moby", "content", "ls"]).stdout;
    let mut leftover = Vec::new();
    for line in listed.lines().filter(|l| l.contains("gc.ref.content")) {
        let mut fields = line.split_whitespace();
        leftover.extend(fields.next().map(str::to_string));
        for label in fields.flat_map(|f| f.split(',')) {
            if let Some((k, v)) = label.split_once('=') {
                if k.starts_with("containerd.io/gc.ref.content") {
                    leftover.push(v.to_string());
                }
            }
        }
    }
    if !leftover.is_empty() {
        let mut args = vec!["-n", "moby", "content", "rm"];
        args.extend(leftover.iter().map(String::as_str));
        let out = d.engine.ctr(&args);
        assert_eq!(out.status, 0, "ctr content rm: {out:?}");
    }
    let running = d.ok(&["inspect", "--format", "{{.State.Running}}", &id]);
    assert_eq!(running.trim(), "false", "checkpoint create stops it");
    let before = common::counted(&d.ok(&["logs", &id]));
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        common::counted(&d.ok(&["logs", &id])),
        before,
        "nothing counts while stopped"
    );
    d.ok(&["start", "--checkpoint", "cp1", &id]);
    let after = logs_until(&d, before.len() + 3);
    let want: Vec<u64> = (0..after.len() as u64).collect();
    assert_eq!(
        after,
        want,
        "saved at {}, the restored copy goes on",
        before.len()
    );
    assert!(after.len() >= before.len() + 3, "{after:?}");
}
