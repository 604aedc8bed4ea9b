//! A private containerd for the engine tests: root, state and sockets under
//! a temp dir, an image built here from `busybox-static`, and a teardown
//! that leaves no process, mount or directory behind.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{run, Outcome};

pub const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
/// ferrovisor's own shim, built with the `containerd-shim` feature.
#[cfg(feature = "containerd-shim")]
pub const SHIM: &str = env!("CARGO_BIN_EXE_containerd-shim-ferrovisor-v1");
pub const TIMEOUT: Duration = Duration::from_secs(120);
pub const IMAGE: &str = "docker.io/library/ferrovisor-busybox:test";
pub const APPLETS: &[&str] = &[
    "sh", "echo", "cat", "true", "false", "sleep", "ls", "env", "id", "mkdir", "touch", "test",
];
/// The containerd configuration the Kubernetes guide gives, with the path of
/// the ferrovisor binary to substitute.
pub const CONFIG_SNIPPET: &str = include_str!("../../../docs/kubernetes/containerd-config.toml");
pub const SNIPPET_BINARY: &str = "/usr/local/bin/ferrovisor";

/// Finds `name` in the test's PATH (or the usual system directories).
pub fn which(name: &str) -> Option<PathBuf> {
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
pub struct Tools {
    pub containerd: PathBuf,
    pub ctr: PathBuf,
    /// the directory of containerd-shim-runc-v2
    pub shim_dir: PathBuf,
}

pub fn tools(test: &str) -> Option<Tools> {
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
pub fn temp_dir(tag: &str) -> PathBuf {
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

pub fn sha256(path: &Path) -> String {
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
pub fn blob(layout: &Path, src: &Path) -> (String, u64) {
    let digest = sha256(src);
    let size = std::fs::metadata(src).expect("blob size").len();
    std::fs::copy(src, layout.join("blobs/sha256").join(&digest)).expect("store blob");
    (format!("sha256:{digest}"), size)
}

/// Writes an uncompressed layer tarball under `dir`: /bin/busybox from the
/// host and applet symlinks. Returns its path and its digest, which, the
/// layer being uncompressed, is also its diff_id.
/// `/bin/count` of the test image: prints 0, 1, 2, ... one line every
/// 200 ms, in one single-threaded process, and leaves the last number in
/// /tmp/count where it can (for a copy whose stdout nobody reads).
pub const COUNT_C: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <time.h>
int main(void) {
    struct timespec ts = {0, 200 * 1000 * 1000};
    signal(SIGPIPE, SIG_IGN);
    for (long i = 0;; i++) {
        printf("%ld\n", i);
        fflush(stdout);
        FILE *f = fopen("/tmp/count", "w");
        if (f) {
            fprintf(f, "%ld\n", i);
            fclose(f);
        }
        nanosleep(&ts, NULL);
    }
}
"#;

fn build_layer(dir: &Path) -> (PathBuf, String) {
    let busybox = Path::new("/bin/busybox");
    let layer = dir.join("layer");
    std::fs::create_dir_all(layer.join("bin")).expect("mkdir layer/bin");
    std::fs::create_dir_all(layer.join("tmp")).expect("mkdir layer/tmp");
    std::fs::copy(busybox, layer.join("bin/busybox")).expect("copy busybox");
    for a in APPLETS {
        symlink("busybox", layer.join("bin").join(a)).expect("applet symlink");
    }
    // One process that counts (a shell's `sleep` is a second process):
    // what the checkpoint tests save.
    let count = super::compile_static(dir, "count", COUNT_C);
    std::fs::copy(count, layer.join("bin/count")).expect("copy count");
    // Users and groups for `docker run --user NAME`: `user` is also a
    // member of `users`, which engines add as a supplementary group.
    std::fs::create_dir_all(layer.join("etc")).expect("mkdir layer/etc");
    std::fs::write(
        layer.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/sh\n\
         nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
    )
    .expect("write etc/passwd");
    std::fs::write(
        layer.join("etc/group"),
        "root:x:0:\nusers:x:100:user\nuser:x:1000:\nnogroup:x:65534:\n",
    )
    .expect("write etc/group");
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
    let digest = format!("sha256:{}", sha256(&layer_tar));
    (layer_tar, digest)
}

/// The image configuration: a shell, PATH=/bin, the one layer.
fn image_config(diff_id: &str) -> serde_json::Value {
    serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "config": { "Env": ["PATH=/bin"], "Cmd": ["sh"], "WorkingDir": "/" },
        "rootfs": { "type": "layers", "diff_ids": [diff_id] },
    })
}

/// `tar -cf archive -C dir names...`
fn tar(archive: &Path, dir: &Path, names: &[&str]) {
    let st = Command::new("tar")
        .arg("-cf")
        .arg(archive)
        .arg("-C")
        .arg(dir)
        .args(names)
        .status()
        .expect("run tar");
    assert!(st.success(), "tar of {}", archive.display());
}

/// Writes an OCI image archive (oci-layout, index.json, blobs) holding one
/// uncompressed layer (see [`build_layer`]), named [`IMAGE`].
pub fn build_image(dir: &Path) -> PathBuf {
    let (layer_tar, _) = build_layer(dir);
    let layout = dir.join("oci");
    std::fs::create_dir_all(layout.join("blobs/sha256")).expect("mkdir blobs");
    let (layer_digest, layer_size) = blob(&layout, &layer_tar);
    let config_path = dir.join("config.json");
    std::fs::write(&config_path, image_config(&layer_digest).to_string())
        .expect("write image config");
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
    tar(&archive, &layout, &["oci-layout", "index.json", "blobs"]);
    archive
}

/// Writes the same image as [`build_image`] as a `docker save` archive
/// (manifest.json, the config, the layer), tagged `tag`: the format
/// `docker load` of Docker 20.10 reads.
pub fn build_docker_archive(dir: &Path, tag: &str) -> PathBuf {
    let dir = dir.join("docker-image");
    std::fs::create_dir_all(&dir).expect("mkdir docker-image");
    let (_, diff_id) = build_layer(&dir);
    std::fs::write(dir.join("config.json"), image_config(&diff_id).to_string())
        .expect("write image config");
    let manifest = serde_json::json!([{
        "Config": "config.json",
        "RepoTags": [tag],
        "Layers": ["layer.tar"],
    }]);
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).expect("write manifest");
    let archive = dir.join("image.tar");
    tar(
        &archive,
        &dir,
        &["manifest.json", "config.json", "layer.tar"],
    );
    archive
}

/// A private containerd and everything it made, torn down on drop: tasks
/// killed, every process that names the temp dir killed (containerd, its
/// shims, which run in process groups of their own, and the sandboxes),
/// mounts under the temp dir undone, the temp dir removed.
pub struct Engine {
    /// Held for the engine's life (dropped last).
    _serial: std::sync::MutexGuard<'static, ()>,
    pub dir: PathBuf,
    pub tools: Tools,
    pub child: Option<Child>,
    /// containers to kill and delete through `ctr` on drop
    pub ids: Vec<String>,
}

impl Engine {
    /// Starts containerd in the test's own mount namespace.
    pub fn start(tag: &str, tools: Tools) -> Engine {
        Engine::start_with(tag, tools, false)
    }

    /// Starts containerd in a mount namespace of its own (see
    /// [`PrivateMounts`]), for engines whose state paths are fixed.
    pub fn start_private(tag: &str, tools: Tools) -> Engine {
        Engine::start_with(tag, tools, true)
    }

    fn start_with(tag: &str, tools: Tools, private: bool) -> Engine {
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
        let private = private.then(|| PrivateMounts::new(&e.dir));
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
        // SAFETY: setsid, unshare and mount are async-signal-safe system
        // calls; the child is single-threaded between fork and exec, and
        // `PrivateMounts::enter` allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                match &private {
                    Some(p) => p.enter(),
                    None => Ok(()),
                }
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

    pub fn sock(&self) -> PathBuf {
        self.dir.join("c.sock")
    }

    /// config.toml: everything containerd keeps under the temp dir, then the
    /// guide's snippet for the CRI plugin pointing at the built ferrovisor.
    pub fn config(&self) -> String {
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

    pub fn containerd_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default()
    }

    pub fn ctr_command(&self, args: &[&str]) -> Command {
        let mut cmd = super::command(&self.tools.ctr.to_string_lossy(), &[]);
        cmd.arg("--address").arg(self.sock()).args(args);
        cmd
    }

    pub fn ctr(&self, args: &[&str]) -> Outcome {
        run(self.ctr_command(args), None, TIMEOUT)
    }

    pub fn import(&self, archive: &Path) {
        let out = self.ctr(&["images", "import", &archive.to_string_lossy()]);
        assert_eq!(out.status, 0, "ctr images import: {out:?}");
        let ls = self.ctr(&["images", "ls", "-q"]);
        assert!(ls.stdout.lines().any(|l| l == IMAGE), "imported: {ls:?}");
    }

    /// Pids of live processes whose command line names the temp dir.
    pub fn our_processes(&self) -> Vec<i32> {
        processes_naming(&self.dir)
    }

    /// Mount points under the temp dir, deepest first.
    pub fn our_mounts(&self) -> Vec<String> {
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
        kill_processes_naming(&self.dir);
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
pub static ENGINE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Pids of live processes (other than this one) whose command line names
/// `dir`.
pub fn processes_naming(dir: &Path) -> Vec<i32> {
    // With the slash, so that a sibling dir whose name extends ours does not
    // match.
    let needle = format!("{}/", dir.display());
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

/// SIGKILLs every process naming `dir` (see [`processes_naming`]) until
/// none is left, for at most five seconds.
pub fn kill_processes_naming(dir: &Path) {
    for _ in 0..50 {
        let left = processes_naming(dir);
        if left.is_empty() {
            return;
        }
        for pid in left {
            // SAFETY: kill(2) of a pid whose command line names this test's
            // private temp dir.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A mount namespace for an engine and everything it starts, entered
/// between fork and exec: mount propagation to the host cut, an empty tmpfs
/// on /run (containerd's /run/containerd/s, dockerd's /run/docker and
/// /run/docker.sock) and the temp dir's `etc-docker` over /etc/docker
/// (dockerd writes its key.json there). So the engine writes no state
/// outside the temp dir, and every mount it makes goes away with its last
/// process, even if the test itself is killed.
pub struct PrivateMounts {
    root: CString,
    run: CString,
    tmpfs: CString,
    tmpfs_options: CString,
    /// (source, target) of the /etc/docker bind mount, when the host has
    /// that directory to mount over
    etc_docker: Option<(CString, CString)>,
}

impl PrivateMounts {
    fn new(dir: &Path) -> PrivateMounts {
        let c = |s: &str| CString::new(s).expect("no NUL");
        let etc_docker = Path::new("/etc/docker").is_dir().then(|| {
            let src = dir.join("etc-docker");
            std::fs::create_dir_all(&src).expect("mkdir etc-docker");
            (c(&src.to_string_lossy()), c("/etc/docker"))
        });
        PrivateMounts {
            root: c("/"),
            run: c("/run"),
            tmpfs: c("tmpfs"),
            tmpfs_options: c("mode=0755"),
            etc_docker,
        }
    }

    /// Moves the calling process into its own mount namespace set up as
    /// above. Runs between fork and exec: makes system calls only, allocates
    /// nothing.
    fn enter(&self) -> std::io::Result<()> {
        let check = |r: libc::c_int| {
            if r < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        let null = std::ptr::null();
        // SAFETY: unshare(2) of the calling, single-threaded process.
        check(unsafe { libc::unshare(libc::CLONE_NEWNS) })?;
        // SAFETY: mount(2) with valid C strings or null where the call
        // ignores the argument.
        check(unsafe {
            libc::mount(
                null,
                self.root.as_ptr(),
                null,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        })?;
        // SAFETY: as above.
        check(unsafe {
            libc::mount(
                self.tmpfs.as_ptr(),
                self.run.as_ptr(),
                self.tmpfs.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                self.tmpfs_options.as_ptr().cast(),
            )
        })?;
        if let Some((src, target)) = &self.etc_docker {
            // SAFETY: as above.
            check(unsafe {
                libc::mount(
                    src.as_ptr(),
                    target.as_ptr(),
                    null,
                    libc::MS_BIND,
                    std::ptr::null(),
                )
            })?;
        }
        Ok(())
    }
}

/// Fails the test, rather than hanging CI, when it runs past a deadline:
/// kills every process naming the test's temp dir (the engines and
/// sandboxes: with a private mount namespace, their mounts go with them),
/// removes the dir and exits the test process. Dropping it disarms it.
pub struct Watchdog {
    disarm: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    pub fn start(dir: &Path, limit: Duration) -> Watchdog {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let dir = dir.to_path_buf();
        let thread = std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                // Straight to stderr: the test harness captures eprintln!,
                // and its capture is lost at exit.
                let _ = writeln!(
                    std::io::stderr(),
                    "watchdog: test still running after {limit:?}; killing the engines under {}",
                    dir.display()
                );
                kill_processes_naming(&dir);
                let _ = std::fs::remove_dir_all(&dir);
                std::process::exit(101);
            }
        });
        Watchdog {
            disarm: Some(tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.disarm.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
