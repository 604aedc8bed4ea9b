//! containerd end to end: a private `containerd` (root, state and sockets
//! under a temp dir) imports an OCI image built here from `busybox-static`,
//! then runs it in ferrovisor two ways: through containerd's own runc shim
//! with ferrovisor as its runc binary, and through ferrovisor's shim v2
//! (`--runtime io.containerd.ferrovisor.v1`). Skipped, with a message, when
//! containerd is not installed (`apt-get install containerd`).

mod common;

use std::os::unix::fs::symlink;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{run, Outcome};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
/// ferrovisor's own shim, built with the `containerd-shim` feature.
#[cfg(feature = "containerd-shim")]
const SHIM: &str = env!("CARGO_BIN_EXE_containerd-shim-ferrovisor-v1");
const TIMEOUT: Duration = Duration::from_secs(120);
const IMAGE: &str = "docker.io/library/ferrovisor-busybox:test";
const APPLETS: &[&str] = &["sh", "echo", "cat", "true", "false", "sleep", "ls", "env"];
/// The containerd configuration the Kubernetes guide gives, with the path of
/// the ferrovisor binary to substitute.
const CONFIG_SNIPPET: &str = include_str!("../../docs/kubernetes/containerd-config.toml");
const SNIPPET_BINARY: &str = "/usr/local/bin/ferrovisor";

/// Finds `name` in the test's PATH (or the usual system directories).
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain([
            "/usr/local/sbin",
            "/usr/local/bin",
            "/usr/sbin",
            "/usr/bin",
            "/sbin",
            "/bin",
        ])
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    found
}

/// The programs of Debian's `containerd` package, or `None` (the test is
/// skipped) when containerd is not installed.
struct Tools {
    containerd: PathBuf,
    ctr: PathBuf,
    /// the directory of containerd-shim-runc-v2
    shim_dir: PathBuf,
}

fn tools(test: &str) -> Option<Tools> {
    let Some(containerd) = which("containerd") else {
        eprintln!("SKIP {test}: no containerd binary in PATH (apt-get install containerd)");
        return None;
    };
    let ctr = which("ctr").expect("containerd is installed but ctr is not");
    let runc_shim =
        which("containerd-shim-runc-v2").expect("containerd is installed but its runc shim is not");
    Some(Tools {
        containerd,
        ctr,
        shim_dir: runc_shim.parent().expect("shim dir").to_path_buf(),
    })
}

/// A directory for one test. Unix socket paths must fit in 108 bytes, so it
/// is under cargo's per-target temp dir only when that is short enough.
fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "ctrd-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let base = if target.as_os_str().len() + name.len() + 40 < 100 {
        target.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let p = base.join(name);
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).expect("create temp dir");
    p
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("run sha256sum");
    assert!(out.status.success(), "sha256sum {}", path.display());
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("a digest")
        .to_string()
}

/// Stores `bytes` as a blob of an OCI layout and returns its descriptor
/// fields (digest, size).
fn blob(layout: &Path, src: &Path) -> (String, u64) {
    let digest = sha256(src);
    let size = std::fs::metadata(src).expect("blob size").len();
    std::fs::copy(src, layout.join("blobs/sha256").join(&digest)).expect("store blob");
    (format!("sha256:{digest}"), size)
}

/// Writes an OCI image archive (oci-layout, index.json, blobs) holding one
/// uncompressed layer: /bin/busybox from the host and applet symlinks.
fn build_image(dir: &Path) -> PathBuf {
    let busybox = Path::new("/bin/busybox");
    let layer = dir.join("layer");
    std::fs::create_dir_all(layer.join("bin")).expect("mkdir layer/bin");
    std::fs::create_dir_all(layer.join("tmp")).expect("mkdir layer/tmp");
    std::fs::copy(busybox, layer.join("bin/busybox")).expect("copy busybox");
    for a in APPLETS {
        symlink("busybox", layer.join("bin").join(a)).expect("applet symlink");
    }
    let layer_tar = dir.join("layer.tar");
    let st = Command::new("tar")
        .args(["--numeric-owner", "--owner=0", "--group=0", "-cf"])
        .arg(&layer_tar)
        .arg("-C")
        .arg(&layer)
        .arg(".")
        .status()
        .expect("run tar");
    assert!(st.success(), "tar of the layer");

    let layout = dir.join("oci");
    std::fs::create_dir_all(layout.join("blobs/sha256")).expect("mkdir blobs");
    // Uncompressed, the layer's digest is also its diff_id.
    let (layer_digest, layer_size) = blob(&layout, &layer_tar);
    let config = serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "config": { "Env": ["PATH=/bin"], "Cmd": ["sh"], "WorkingDir": "/" },
        "rootfs": { "type": "layers", "diff_ids": [layer_digest] },
    });
    let config_path = dir.join("config.json");
    std::fs::write(&config_path, config.to_string()).expect("write image config");
    let (config_digest, config_size) = blob(&layout, &config_path);
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": config_size,
        },
        "layers": [{
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": layer_digest,
            "size": layer_size,
        }],
    });
    let manifest_path = dir.join("manifest.json");
    std::fs::write(&manifest_path, manifest.to_string()).expect("write manifest");
    let (manifest_digest, manifest_size) = blob(&layout, &manifest_path);
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest,
            "size": manifest_size,
            "annotations": { "org.opencontainers.image.ref.name": IMAGE },
        }],
    });
    std::fs::write(layout.join("index.json"), index.to_string()).expect("write index");
    std::fs::write(
        layout.join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .expect("write oci-layout");
    let archive = dir.join("image.tar");
    let st = Command::new("tar")
        .arg("-cf")
        .arg(&archive)
        .arg("-C")
        .arg(&layout)
        .args(["oci-layout", "index.json", "blobs"])
        .status()
        .expect("run tar");
    assert!(st.success(), "tar of the image");
    archive
}

/// A private containerd and everything it made, torn down on drop: tasks
/// killed, every process that names the temp dir killed (containerd, its
/// shims, which run in process groups of their own, and the sandboxes),
/// mounts under the temp dir undone, the temp dir removed.
struct Engine {
    /// Held for the engine's life (dropped last).
    _serial: std::sync::MutexGuard<'static, ()>,
    dir: PathBuf,
    tools: Tools,
    child: Option<Child>,
    ids: Vec<String>,
}

impl Engine {
    fn start(tag: &str, tools: Tools) -> Engine {
        let serial = ENGINE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let dir = temp_dir(tag);
        let mut e = Engine {
            _serial: serial,
            dir,
            tools,
            child: None,
            ids: Vec::new(),
        };
        std::fs::write(e.dir.join("config.toml"), e.config()).expect("write config.toml");
        // containerd finds shim binaries (containerd-shim-NAME-v1 for runtime
        // io.containerd.NAME.v1) in its PATH.
        let bin = e.dir.join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir bin");
        #[cfg(feature = "containerd-shim")]
        symlink(SHIM, bin.join("containerd-shim-ferrovisor-v1")).expect("link the shim");
        let path = format!(
            "{}:{}:/usr/sbin:/usr/bin:/sbin:/bin",
            bin.display(),
            e.tools.shim_dir.display()
        );
        let log = std::fs::File::create(e.dir.join("containerd.log")).expect("containerd log");
        let mut cmd = Command::new(&e.tools.containerd);
        cmd.arg("--config")
            .arg(e.dir.join("config.toml"))
            .env_clear()
            .env("PATH", path)
            .env("HOME", &e.dir)
            .current_dir(&e.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup log"))
            .stderr(log);
        // SAFETY: setsid is async-signal-safe; the child is single-threaded
        // between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        e.child = Some(cmd.spawn().expect("spawn containerd"));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = e.ctr(&["version"]);
            if out.status == 0 {
                break;
            }
            if let Some(Ok(Some(st))) = e.child.as_mut().map(Child::try_wait) {
                panic!(
                    "containerd exited ({st}) before serving:\n{}",
                    e.containerd_log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "containerd did not answer within 30 s:\n{}\n{}",
                out.stderr,
                e.containerd_log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        e
    }

    fn sock(&self) -> PathBuf {
        self.dir.join("c.sock")
    }

    /// config.toml: everything containerd keeps under the temp dir, then the
    /// guide's snippet for the CRI plugin pointing at the built ferrovisor.
    fn config(&self) -> String {
        let d = self.dir.display();
        let snippet = CONFIG_SNIPPET.replace(SNIPPET_BINARY, FERROVISOR);
        assert_ne!(
            snippet, CONFIG_SNIPPET,
            "the snippet names {SNIPPET_BINARY}"
        );
        format!(
            r#"version = 2
root = "{d}/root"
state = "{d}/state"

[grpc]
  address = "{d}/c.sock"
[ttrpc]
  address = "{d}/c.sock.ttrpc"
[debug]
  address = "{d}/debug.sock"
  level = "debug"
[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "{d}/cni/bin"
  conf_dir = "{d}/cni/conf"

{snippet}"#
        )
    }

    fn containerd_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default()
    }

    fn ctr_command(&self, args: &[&str]) -> Command {
        let mut cmd = common::command(&self.tools.ctr.to_string_lossy(), &[]);
        cmd.arg("--address").arg(self.sock()).args(args);
        cmd
    }

    fn ctr(&self, args: &[&str]) -> Outcome {
        run(self.ctr_command(args), None, TIMEOUT)
    }

    fn import(&self, archive: &Path) {
        let out = self.ctr(&["images", "import", &archive.to_string_lossy()]);
        assert_eq!(out.status, 0, "ctr images import: {out:?}");
        let ls = self.ctr(&["images", "ls", "-q"]);
        assert!(ls.stdout.lines().any(|l| l == IMAGE), "imported: {ls:?}");
    }

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

    /// A container ferrovisor refuses (a CPU weight it cannot apply): `ctr
    /// run` fails with the runtime's one-line reason naming the field, and
    /// the task's rootfs is not left mounted.
    fn refused(&mut self, id: &str, runtime_args: &[&str]) {
        self.ids.push(id.to_string());
        let fifo = self.dir.join("fifo").to_string_lossy().into_owned();
        let mut args = vec!["run", "--rm", "--cpu-shares", "512", "--fifo-dir", &fifo];
        args.extend_from_slice(runtime_args);
        args.extend_from_slice(&[IMAGE, id, "true"]);
        let out = self.ctr(&args);
        assert_ne!(out.status, 0, "refused: {out:?}");
        assert!(
            out.stderr.contains("linux.resources.cpu: not supported"),
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

    /// Pids of live processes whose command line names the temp dir.
    fn our_processes(&self) -> Vec<i32> {
        // With the slash, so that a sibling dir whose name extends ours
        // does not match.
        let needle = format!("{}/", self.dir.display());
        let me = std::process::id() as i32;
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if pid == me {
                continue;
            }
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(&needle) {
                out.push(pid);
            }
        }
        out
    }

    /// Mount points under the temp dir, deepest first.
    fn our_mounts(&self) -> Vec<String> {
        // With the slash, so that a sibling dir whose name extends ours
        // does not match.
        let needle = format!("{}/", self.dir.display());
        let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut points: Vec<String> = info
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|p| p.starts_with(&needle))
            .map(str::to_string)
            .collect();
        points.reverse();
        points
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Politely first, while containerd still answers.
        for id in std::mem::take(&mut self.ids) {
            let _ = run(
                self.ctr_command(&["tasks", "kill", "--signal", "SIGKILL", &id]),
                None,
                Duration::from_secs(20),
            );
            let _ = run(
                self.ctr_command(&["tasks", "delete", "--force", &id]),
                None,
                Duration::from_secs(20),
            );
            let _ = run(
                self.ctr_command(&["containers", "delete", &id]),
                None,
                Duration::from_secs(20),
            );
        }
        if let Some(mut child) = self.child.take() {
            let pgid = child.id() as i32;
            // SAFETY: kill(2) on the process group containerd leads (it was
            // started with setsid), which holds no process of ours besides.
            unsafe { libc::kill(-pgid, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
            // SAFETY: as above.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = child.wait();
        }
        // Shims and sandboxes outlive containerd by design.
        for _ in 0..50 {
            let left = self.our_processes();
            if left.is_empty() {
                break;
            }
            for pid in left {
                // SAFETY: kill(2) of a pid whose command line names this
                // test's private temp dir.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for _ in 0..3 {
            for m in self.our_mounts() {
                if let Ok(c) = std::ffi::CString::new(m) {
                    // SAFETY: umount2 with a valid C string; MNT_DETACH so a
                    // busy mount goes too.
                    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        // containerd 1.6 puts shim sockets under /run/containerd/s whatever
        // its config says: remove the directories if they are empty (the
        // engines of this file run one at a time, see ENGINE_LOCK).
        let _ = std::fs::remove_dir("/run/containerd/s");
        let _ = std::fs::remove_dir("/run/containerd");
    }
}

/// One engine at a time: they share /run/containerd/s (see `Drop`).
static ENGINE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

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
    e.run_tty("tty1", &rt);
    e.detached_kill("bg", &rt);
    e.refused("refused", &rt);
    // Statistics: the sandbox's host processes (no cgroup of its own yet).
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
        "sleep",
        "1000",
    ]);
    assert_eq!(out.status, 0, "ctr run -d: {out:?}");
    let metrics = e.ctr(&["tasks", "metrics", "stats"]);
    assert_eq!(metrics.status, 0, "ctr tasks metrics: {metrics:?}");
    assert!(
        metrics
            .stdout
            .lines()
            .any(|l| l.starts_with("pids.current")),
        "{metrics:?}"
    );
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
