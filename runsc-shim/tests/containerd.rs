//! containerd end to end: a private `containerd` (root, state and sockets
//! under a temp dir) imports an OCI image built here from `busybox-static`,
//! then runs it in ferrovisor two ways: through containerd's own runc shim
//! with ferrovisor as its runc binary, and through ferrovisor's shim v2
//! (`--runtime io.containerd.ferrovisor.v1`). Skipped, with a message, when
//! containerd is not installed (`apt-get install containerd`).

mod common;

use std::time::{Duration, Instant};

use common::containerd::{build_image, tools, which, Engine, FERROVISOR, IMAGE, TIMEOUT};
use common::{run, Outcome};

/// What these tests do with the engine (started and torn down by
/// `common::containerd`).
impl Engine {
    /// `ctr run --rm` of the image with `runtime_args` (which runtime,
    /// which binary), FIFOs under the temp dir.
    fn run(&mut self, id: &str, runtime_args: &[&str], cmd: &[&str]) -> Outcome {
        self.ids.push(id.to_string());
        let fifo = self.dir.join("fifo").to_string_lossy().into_owned();
        let mut args = vec!["run", "--rm", "--fifo-dir", &fifo];
        args.extend_from_slice(runtime_args);
        args.push(IMAGE);
        args.push(id);
        args.extend_from_slice(cmd);
        self.ctr(&args)
    }

    /// An interactive `ctr run --rm -t` (ctr needs a terminal of its own,
    /// which script(1) provides): output through the terminal, and the exit
    /// status.
    fn run_tty(&mut self, id: &str, runtime_args: &[&str]) {
        self.ids.push(id.to_string());
        let script = which("script").expect("script (util-linux) is installed");
        let cmd = format!(
            "{} --address {} run --rm -t --fifo-dir {} {} {IMAGE} {id} \
             sh -c 'echo hi there; exit 4'",
            self.tools.ctr.display(),
            self.sock().display(),
            self.dir.join("fifo").display(),
            runtime_args.join(" "),
        );
        let mut script_cmd = common::command(&script.to_string_lossy(), &[]);
        script_cmd.args(["-qec", &cmd, "/dev/null"]);
        let out = run(script_cmd, None, TIMEOUT);
        assert_eq!(out.status, 4, "ctr run -t: {out:?}");
        // The container's terminal turns its newline into CR LF.
        assert!(out.stdout.contains("hi there\r"), "{out:?}");
    }

    /// A detached task (`ctr run -d ... sleep`): listed as running, its
    /// pids listed, `exec` run (its output and status come back), killed
    /// by SIGKILL, deleted with its exit status 137.
    fn detached_kill(&mut self, id: &str, runtime_args: &[&str]) {
        self.ids.push(id.to_string());
        let fifo = self.dir.join("fifo").to_string_lossy().into_owned();
        let mut args = vec!["run", "-d", "--fifo-dir", &fifo];
        args.extend_from_slice(runtime_args);
        args.extend_from_slice(&[IMAGE, id, "sleep", "1000"]);
        let out = self.ctr(&args);
        assert_eq!(out.status, 0, "ctr run -d: {out:?}");
        let ls = self.ctr(&["tasks", "ls"]);
        assert!(
            ls.stdout
                .lines()
                .any(|l| l.starts_with(&format!("{id} ")) && l.contains("RUNNING")),
            "{ls:?}"
        );
        let ps = self.ctr(&["tasks", "ps", id]);
        assert_eq!(ps.status, 0, "ctr tasks ps: {ps:?}");
        assert!(ps.stdout.lines().count() >= 2, "a pid at least: {ps:?}");
        let out = self.ctr(&[
            "tasks",
            "exec",
            "--fifo-dir",
            &fifo,
            "--exec-id",
            "x1",
            id,
            "sh",
            "-c",
            "echo from-exec; exit 4",
        ]);
        assert_eq!(out.status, 4, "exec status: {out:?}");
        assert_eq!(out.stdout, "from-exec\n", "{out:?}");
        // An exec'd program on a terminal of its own (`exec -t`; ctr needs
        // a terminal too, which script(1) provides).
        let script = which("script").expect("script (util-linux) is installed");
        let cmd = format!(
            "{} --address {} tasks exec -t --fifo-dir {} --exec-id x2 {id} \
             sh -c '[ -t 0 ] && [ -t 1 ] && echo tty-exec; exit 5'",
            self.tools.ctr.display(),
            self.sock().display(),
            self.dir.join("fifo").display(),
        );
        let mut script_cmd = common::command(&script.to_string_lossy(), &[]);
        script_cmd.args(["-qec", &cmd, "/dev/null"]);
        let out = run(script_cmd, None, TIMEOUT);
        assert_eq!(out.status, 5, "ctr tasks exec -t: {out:?}");
        assert!(out.stdout.contains("tty-exec\r"), "{out:?}");
        let out = self.ctr(&["tasks", "kill", "--signal", "SIGKILL", id]);
        assert_eq!(out.status, 0, "ctr tasks kill: {out:?}");
        self.wait_stopped(id);
        let out = self.ctr(&["tasks", "delete", id]);
        assert_eq!(out.status, 0, "ctr tasks delete: {out:?}");
        assert!(out.stderr.contains("137"), "exit 128+9 reported: {out:?}");
        let out = self.ctr(&["containers", "delete", id]);
        assert_eq!(out.status, 0, "ctr containers delete: {out:?}");
    }

    /// Waits until `ctr tasks ls` says task `id` stopped.
    fn wait_stopped(&self, id: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ls = self.ctr(&["tasks", "ls"]);
            if ls
                .stdout
                .lines()
                .any(|l| l.starts_with(&format!("{id} ")) && l.contains("STOPPED"))
            {
                return;
            }
            assert!(Instant::now() < deadline, "{id} not stopped: {ls:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A container ferrovisor refuses (a host device in the guest): `ctr
    /// run` fails with the runtime's one-line reason naming the field, and
    /// the task's rootfs is not left mounted.
    fn refused(&mut self, id: &str, runtime_args: &[&str]) {
        self.ids.push(id.to_string());
        let fifo = self.dir.join("fifo").to_string_lossy().into_owned();
        let mut args = vec!["run", "--rm", "--device", "/dev/fuse", "--fifo-dir", &fifo];
        args.extend_from_slice(runtime_args);
        args.extend_from_slice(&[IMAGE, id, "true"]);
        let out = self.ctr(&args);
        assert_ne!(out.status, 0, "refused: {out:?}");
        assert!(
            out.stderr.contains("linux.devices[0]: not supported")
                && out.stderr.contains("/dev/fuse"),
            "{out:?}"
        );
        let bundle = format!("/io.containerd.runtime.v2.task/default/{id}/");
        let left: Vec<String> = self
            .our_mounts()
            .into_iter()
            .filter(|m| m.contains(&bundle))
            .collect();
        assert!(left.is_empty(), "left mounted: {left:?}");
    }

    /// The runtime flags for containerd's runc shim with ferrovisor as its
    /// runc binary, its state (`--root`) under the temp dir.
    fn runc_shim_args(&self) -> Vec<String> {
        vec![
            "--runc-binary".into(),
            FERROVISOR.into(),
            "--runc-root".into(),
            self.dir.join("runc").to_string_lossy().into_owned(),
        ]
    }
}

#[test]
fn runc_shim_with_ferrovisor_as_binary_name() {
    let Some(tools) = tools("runc_shim_with_ferrovisor_as_binary_name") else {
        return;
    };
    let mut e = Engine::start("runc", tools);
    // The CRI plugin started with the guide's runtimes, BinaryName and all.
    let log = e.containerd_log();
    assert!(
        !log.contains("failed to load plugin io.containerd.grpc.v1.cri"),
        "{log}"
    );
    let cri = log
        .lines()
        .find(|l| l.contains("Start cri plugin with config"))
        .unwrap_or_else(|| panic!("the CRI plugin did not start:\n{log}"));
    assert!(cri.contains(&format!("BinaryName:{FERROVISOR}")), "{cri}");
    assert!(
        cri.contains("ferrovisor-v2:{Type:io.containerd.ferrovisor.v1"),
        "{cri}"
    );
    let archive = build_image(&e.dir);
    e.import(&archive);
    let rt = e.runc_shim_args();
    let rt: Vec<&str> = rt.iter().map(String::as_str).collect();

    let out = e.run("hello", &rt, &["echo", "hello"]);
    assert_eq!(
        out.status,
        0,
        "ctr run echo hello: {out:?}\n{}",
        e.containerd_log()
    );
    assert_eq!(out.stdout, "hello\n", "{out:?}");

    let out = e.run("exit3", &rt, &["sh", "-c", "echo before; exit 3"]);
    assert_eq!(out.status, 3, "exit status propagated: {out:?}");
    assert_eq!(out.stdout, "before\n", "{out:?}");

    e.run_tty("tty1", &rt);
    // containerd's runc shim runs `ferrovisor exec --process --detach`.
    e.detached_kill("bg", &rt);
    e.refused("refused", &rt);

    // ferrovisor really ran them: its state root was used, and is empty
    // again after --rm.
    let runc_root = e.dir.join("runc/default");
    assert!(runc_root.is_dir(), "ferrovisor's --root was used");
    assert_eq!(
        std::fs::read_dir(&runc_root)
            .map(|d| d.count())
            .unwrap_or(1),
        0,
        "containers deleted"
    );
}

/// ferrovisor's own shim v2: `ctr run --runtime io.containerd.ferrovisor.v1`.
#[cfg(feature = "containerd-shim")]
#[test]
fn ferrovisor_shim_v2() {
    let Some(tools) = tools("ferrovisor_shim_v2") else {
        return;
    };
    let mut e = Engine::start("shim", tools);
    let archive = build_image(&e.dir);
    e.import(&archive);
    let rt = ["--runtime", "io.containerd.ferrovisor.v1"];

    let out = e.run("hello", &rt, &["echo", "hello"]);
    assert_eq!(
        out.status,
        0,
        "ctr run echo hello: {out:?}\n{}",
        e.containerd_log()
    );
    assert_eq!(out.stdout, "hello\n", "{out:?}");

    let out = e.run(
        "exit3",
        &rt,
        &["sh", "-c", "echo out; echo err >&2; exit 3"],
    );
    assert_eq!(out.status, 3, "exit status propagated: {out:?}");
    assert_eq!(out.stdout, "out\n", "{out:?}");
    assert!(out.stderr.contains("err\n"), "{out:?}");

    let fifo = e.dir.join("fifo").to_string_lossy().into_owned();
    // Stdin through its FIFO: ctr sends CloseIO at the end of its stdin,
    // and the guest reads EOF after the data.
    e.ids.push("stdin1".into());
    let mut cmd = e.ctr_command(&[
        "run",
        "--rm",
        "--fifo-dir",
        &fifo,
        rt[0],
        rt[1],
        IMAGE,
        "stdin1",
        "sh",
        "-c",
        "cat; echo end",
    ]);
    cmd.current_dir("/");
    let out = run(cmd, Some(b"piped in\n"), TIMEOUT);
    assert_eq!(
        (out.status, out.stdout.as_str()),
        (0, "piped in\nend\n"),
        "stdin through ctr: {out:?}"
    );
    e.run_tty("tty1", &rt);
    e.detached_kill("bg", &rt);
    e.refused("refused", &rt);
    // Statistics: the sandbox's host processes.
    e.ids.push("stats".into());
    let out = e.ctr(&[
        "run",
        "-d",
        "--fifo-dir",
        &fifo,
        rt[0],
        rt[1],
        IMAGE,
        "stats",
        "sh",
        "-c",
        "sleep 1000 & sleep 1000 & wait",
    ]);
    assert_eq!(out.status, 0, "ctr run -d: {out:?}");
    // The shim reports the sandbox cgroup's own counters: memory in use
    // (the Sentry's at least) and its CPU time; and the guest's tasks as
    // runc's cgroup would count them: the shell and two sleepers (the
    // host cgroup counts the Sentry's threads, stubs and gofer instead).
    let deadline = Instant::now() + TIMEOUT;
    let metrics = loop {
        let m = e.ctr(&["tasks", "metrics", "stats"]);
        assert_eq!(m.status, 0, "ctr tasks metrics: {m:?}");
        if m.stdout
            .lines()
            .any(|l| l.split_whitespace().eq(["pids.current", "3"]))
        {
            break m;
        }
        assert!(Instant::now() < deadline, "never 3 tasks: {m:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let metric = |name: &str| -> u64 {
        metrics
            .stdout
            .lines()
            .find_map(|l| {
                let mut f = l.split_whitespace();
                (f.next() == Some(name)).then(|| f.next()).flatten()
            })
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {metrics:?}"))
    };
    assert!(metric("memory.usage_in_bytes") > 0, "{metrics:?}");
    assert!(metric("cpuacct.usage") > 0, "{metrics:?}");
    assert_eq!(metric("pids.current"), 3, "{metrics:?}");
    // Pause and Resume: the sandbox's cgroup freezer.
    let status = |e: &Engine| {
        let ls = e.ctr(&["tasks", "ls"]);
        ls.stdout
            .lines()
            .find(|l| l.starts_with("stats "))
            .and_then(|l| l.split_whitespace().last())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(e.ctr(&["tasks", "pause", "stats"]).status, 0);
    assert_eq!(status(&e), "PAUSED");
    assert_eq!(e.ctr(&["tasks", "resume", "stats"]).status, 0);
    assert_eq!(status(&e), "RUNNING");
    let out = e.ctr(&["tasks", "kill", "--signal", "SIGKILL", "stats"]);
    assert_eq!(out.status, 0, "ctr tasks kill: {out:?}");
    e.wait_stopped("stats");
    assert_eq!(e.ctr(&["tasks", "delete", "stats"]).status, 0);
    assert_eq!(e.ctr(&["containers", "delete", "stats"]).status, 0);

    // The shim kept ferrovisor's state beside containerd's and left none.
    let root = e.dir.join("state/ferrovisor/default");
    assert!(root.is_dir(), "ferrovisor state root {}", root.display());
    assert_eq!(
        std::fs::read_dir(&root).map(|d| d.count()).unwrap_or(1),
        0,
        "containers deleted"
    );
}

/// The shim's runtime config file (`ConfigPath` in containerd's runtime
/// options, here from `ctr run --runtime-config-path`): `network = "host"`
/// gives the guest the host's network (the container shares the test's
/// network namespace, `--net-host`), where a server of the test's listens;
/// without it the guest has its own loopback only. `network = "sandbox"`
/// with an `allow_cidr` rule naming a server of the test's on one of the
/// host's addresses reaches it through the Sentry's relay; without the
/// rule the connection is refused and the refusal named. An unknown key,
/// and a bad rule, are refused in one line.
#[cfg(feature = "containerd-shim")]
#[test]
fn shim_v2_runtime_config_sets_the_network() {
    use std::io::{Read, Write};

    let Some(tools) = tools("shim_v2_runtime_config_sets_the_network") else {
        return;
    };
    let mut e = Engine::start("shimcfg", tools);
    let archive = build_image(&e.dir);
    e.import(&archive);

    // A one-line HTTP server on the test's loopback.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut req = [0u8; 1024];
            let _ = conn.read(&mut req);
            let _ = conn.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 14\r\n\r\nfrom-the-host\n");
        }
    });
    let url = format!("http://127.0.0.1:{port}/");
    let fetch = ["busybox", "wget", "-q", "-O", "-", url.as_str()];

    let host = e.dir.join("host.toml");
    std::fs::write(&host, "# runtime flags\nnetwork = \"host\"\n").expect("write config");
    let host = host.to_string_lossy().into_owned();
    let rt = [
        "--runtime",
        "io.containerd.ferrovisor.v1",
        "--net-host",
        "--runtime-config-path",
        host.as_str(),
    ];
    let out = e.run("cfg-host", &rt, &fetch);
    assert_eq!(
        (out.status, out.stdout.as_str()),
        (0, "from-the-host\n"),
        "with network = \"host\": {out:?}\n{}",
        e.containerd_log()
    );

    // The same container without the config file: the Sentry's own
    // loopback, where nothing listens.
    let rt = ["--runtime", "io.containerd.ferrovisor.v1", "--net-host"];
    let out = e.run("cfg-none", &rt, &fetch);
    assert_ne!(out.status, 0, "without the config: {out:?}");
    assert!(!out.stdout.contains("from-the-host"), "{out:?}");

    // `network = "sandbox"`: a server on one of the host's own addresses
    // (closed unless a rule names it, as with the flags).
    match host_address() {
        None => eprintln!("no global IPv4 address on this host: the sandbox part is skipped"),
        Some(addr) => {
            let listener = std::net::TcpListener::bind((addr, 0)).expect("bind");
            let port = listener.local_addr().expect("addr").port();
            let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let counter = seen.clone();
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    let Ok(mut conn) = conn else { continue };
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let mut req = [0u8; 1024];
                    let _ = conn.read(&mut req);
                    let _ = conn
                        .write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 14\r\n\r\nfrom-the-host\n");
                }
            });
            let url = format!("http://{addr}:{port}/");
            let fetch = ["busybox", "wget", "-q", "-O", "-", url.as_str()];
            for (id, config, allowed) in [
                (
                    "cfg-sbx",
                    format!("network = \"sandbox\"\nallow_cidr = [\"{addr}/32:{port}\"]\n"),
                    true,
                ),
                ("cfg-sbx-none", "network = \"sandbox\"\n".to_string(), false),
            ] {
                let file = e.dir.join(format!("{id}.toml"));
                std::fs::write(&file, config).expect("write config");
                let file = file.to_string_lossy().into_owned();
                let rt = [
                    "--runtime",
                    "io.containerd.ferrovisor.v1",
                    "--net-host",
                    "--runtime-config-path",
                    file.as_str(),
                ];
                let before = seen.load(std::sync::atomic::Ordering::SeqCst);
                let out = e.run(id, &rt, &fetch);
                let after = seen.load(std::sync::atomic::Ordering::SeqCst);
                if allowed {
                    assert_eq!(
                        (out.status, out.stdout.as_str(), after - before),
                        (0, "from-the-host\n", 1),
                        "{id}: {out:?}\n{}",
                        e.containerd_log()
                    );
                } else {
                    assert_ne!(out.status, 0, "{id}: {out:?}");
                    assert_eq!(after, before, "{id}: the server saw nothing");
                    assert!(out.stderr.contains("Connection refused"), "{id}: {out:?}");
                    assert!(
                        out.stderr
                            .contains(&format!("ferrovisor: egress to {addr}:{port} refused")),
                        "{id}: {out:?}"
                    );
                }
            }
        }
    }

    for (id, config, says) in [
        (
            "cfg-bad",
            "network = \"host\"\nplatform = \"vmx\"\n",
            "platform: must be \"seccomp\" or \"kvm\", not \"vmx\"",
        ),
        (
            "cfg-bad-key",
            "network = \"host\"\nplatforms = \"kvm\"\n",
            "unknown key `platforms` (only `network`, `allow_cidr`, `allow_host`, `allow_http`, `secret`, `egress_log`, `overlay`, `platform`, `nvproxy` and `nvproxy_capabilities` are supported)",
        ),
        (
            "cfg-bad-rule",
            "network = \"sandbox\"\nallow_cidr = [\"10.0.0.0/33\"]\n",
            "allow_cidr \"10.0.0.0/33\": invalid prefix length",
        ),
    ] {
        let bad = e.dir.join(format!("{id}.toml"));
        std::fs::write(&bad, config).expect("write config");
        let bad = bad.to_string_lossy().into_owned();
        let rt = [
            "--runtime",
            "io.containerd.ferrovisor.v1",
            "--runtime-config-path",
            bad.as_str(),
        ];
        let out = e.run(id, &rt, &["true"]);
        assert_ne!(out.status, 0, "{id}: accepted: {out:?}");
        assert!(out.stderr.contains(says), "{id}: {out:?}");
    }
    // `platform = "kvm"`: the container's code in a KVM virtual machine.
    if common::kvm_usable() {
        let cfg = e.dir.join("cfg-kvm.toml");
        std::fs::write(&cfg, "platform = \"kvm\"\n").expect("write config");
        let cfg = cfg.to_string_lossy().into_owned();
        let rt = [
            "--runtime",
            "io.containerd.ferrovisor.v1",
            "--runtime-config-path",
            cfg.as_str(),
        ];
        let out = e.run("cfg-kvm", &rt, &["sh", "-c", "echo kvm $((6 * 7))"]);
        assert_eq!(
            (out.status, out.stdout.as_str()),
            (0, "kvm 42\n"),
            "{out:?}"
        );
    }
}

/// A global IPv4 address of this host (`ip -4 addr`), if it has one.
#[cfg(feature = "containerd-shim")]
fn host_address() -> Option<std::net::Ipv4Addr> {
    let out = std::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)?
        .split('/')
        .next()?
        .parse()
        .ok()
}

/// containerd's checkpoint and restore through ferrovisor's shim v2: a
/// task that counts is checkpointed into containerd's content store
/// (`ctr containers checkpoint --task`), deleted, and restored from it
/// (`ctr containers restore --live`); the copy goes on from the next
/// number.
#[cfg(feature = "containerd-shim")]
#[test]
fn ctr_checkpoint_and_restore_go_on_counting() {
    let Some(tools) = tools("ctr_checkpoint") else {
        return;
    };
    let mut e = Engine::start("ckpt", tools);
    let archive = build_image(&e.dir);
    e.import(&archive);
    let log = e.dir.join("ck1.log");
    let uri = format!("file://{}", log.display());
    e.ids.push("ck1".into());
    let out = e.ctr(&[
        "run",
        "-d",
        "--log-uri",
        &uri,
        "--runtime",
        "io.containerd.ferrovisor.v1",
        IMAGE,
        "ck1",
        "count",
    ]);
    assert_eq!(out.status, 0, "ctr run -d: {out:?}");
    let lines_in = |path: &std::path::Path, n: usize| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = common::counted(&std::fs::read_to_string(path).unwrap_or_default());
            if got.len() >= n || Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    assert!(lines_in(&log, 3).len() >= 3, "it counts");
    let out = e.ctr(&[
        "containers",
        "checkpoint",
        "--task",
        "ck1",
        "checkpoint/ck1:1",
    ]);
    assert_eq!(
        out.status,
        0,
        "ctr containers checkpoint: {out:?}\n{}",
        e.containerd_log()
    );
    // Left running (containerd's default); stopped here by hand.
    let out = e.ctr(&["tasks", "kill", "--signal", "SIGKILL", "ck1"]);
    assert_eq!(out.status, 0, "kill: {out:?}");
    e.wait_stopped("ck1");
    let saved_at = common::counted(&std::fs::read_to_string(&log).unwrap_or_default());
    assert_eq!(e.ctr(&["tasks", "delete", "ck1"]).status, 0);
    assert_eq!(e.ctr(&["containers", "delete", "ck1"]).status, 0);
    // ctr gives the restored task its own stdio and returns: the copy's
    // count is read from the file it keeps.
    let mut cmd = e.ctr_command(&["containers", "restore", "--live", "ck1", "checkpoint/ck1:1"]);
    cmd.current_dir("/");
    let out = run(cmd, None, TIMEOUT);
    assert_eq!(out.status, 0, "restore: {out:?}\n{}", e.containerd_log());
    let fifo = e.dir.join("fifo").to_string_lossy().into_owned();
    let now = |e: &Engine, n: usize| {
        let exec_id = format!("read{n}");
        let out = e.ctr(&[
            "tasks",
            "exec",
            "--fifo-dir",
            &fifo,
            "--exec-id",
            &exec_id,
            "ck1",
            "cat",
            "/tmp/count",
        ]);
        assert_eq!(out.status, 0, "exec: {out:?}");
        common::counted(&out.stdout).first().copied().unwrap_or(0)
    };
    // (a new snapshot: the file is back at the copy's next count)
    std::thread::sleep(Duration::from_millis(500));
    let first = now(&e, 1);
    std::thread::sleep(Duration::from_millis(700));
    let later = now(&e, 2);
    // Saved where it was (not started anew), and counting on.
    let saved = saved_at.first().copied().unwrap_or(0) + 2;
    assert!(first >= saved, "{first} after {saved_at:?}");
    assert!(later >= first + 2, "{first} then {later}");
}
