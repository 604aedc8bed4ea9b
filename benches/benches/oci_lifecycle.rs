//! A container's whole life through the OCI runtime CLI, as a container
//! engine drives it: `create`, `start`, wait for the program (`/bin/true`
//! from a busybox rootfs) to exit, `delete`; ferrovisor against runc doing
//! the same with its own template `config.json`, in the same run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use benches::{criterion, ferrovisor_bin};
use criterion::SamplingMode;

/// runc as Debian installs it.
const RUNC: &str = "/usr/sbin/runc";

/// How long one container may take before the bench gives up on it.
const DEADLINE: Duration = Duration::from_secs(30);

/// One OCI runtime under test, with a bundle and a state root of its own.
struct Runtime {
    label: &'static str,
    bin: PathBuf,
    bundle: PathBuf,
    state: PathBuf,
    /// standard error of the last invocation: a file, not a pipe, since
    /// the container's processes inherit it from `create` and hold it
    /// open until they exit
    stderr: PathBuf,
}

impl Runtime {
    fn ok(&self, args: &[&str]) -> Result<(), String> {
        let fail = |e: &dyn std::fmt::Display| format!("{} {args:?}: {e}", self.label);
        let err = std::fs::File::create(&self.stderr).map_err(|e| fail(&e))?;
        let status = Command::new(&self.bin)
            .arg("--root")
            .arg(&self.state)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .status()
            .map_err(|e| fail(&e))?;
        if status.success() {
            Ok(())
        } else {
            let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
            Err(fail(&format!("{status}: {}", text.trim())))
        }
    }

    /// create, start, wait, delete of container `id`; returns the time the
    /// four took.
    fn lifecycle(&self, id: &str) -> Result<Duration, String> {
        let pid_file = self.state.with_extension(format!("{id}.pid"));
        let bundle = self.bundle.to_string_lossy();
        let pid_path = pid_file.to_string_lossy();
        let start = Instant::now();
        self.ok(&["create", "--bundle", &bundle, "--pid-file", &pid_path, id])?;
        let pid = std::fs::read_to_string(&pid_file)
            .map_err(|e| format!("{}: {e}", pid_file.display()))?;
        self.ok(&["start", id])?;
        // runc has no `wait`: both are waited for the same way, by watching
        // the container's process (reaped by whoever adopted it) go away.
        let stat = format!("/proc/{}/stat", pid.trim());
        loop {
            match std::fs::read_to_string(&stat) {
                Ok(s) if !s.contains(") Z") && !s.contains(") X") => {}
                _ => break,
            }
            if start.elapsed() > DEADLINE {
                return Err(format!(
                    "{}: {id} still running after {DEADLINE:?}",
                    self.label
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        self.ok(&["delete", id])?;
        let took = start.elapsed();
        let _ = std::fs::remove_file(&pid_file);
        Ok(took)
    }
}

/// A bundle in `dir`: a rootfs of busybox (statically linked, so nothing
/// else is needed) with `/bin/true`, and the runtime's own template
/// `config.json` (`spec`) set to run it without a terminal.
fn bundle(dir: &Path, runtime: &Path) -> Result<PathBuf, String> {
    let bin = dir.join("rootfs/bin");
    std::fs::create_dir_all(&bin).map_err(|e| format!("{}: {e}", bin.display()))?;
    std::fs::copy("/bin/busybox", bin.join("busybox")).map_err(|e| format!("busybox: {e}"))?;
    std::os::unix::fs::symlink("busybox", bin.join("true")).map_err(|e| format!("true: {e}"))?;
    let out = Command::new(runtime)
        .arg("spec")
        .current_dir(dir)
        .output()
        .map_err(|e| format!("{} spec: {e}", runtime.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} spec: {}",
            runtime.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let path = dir.join("config.json");
    let text = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut config: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    config["process"]["terminal"] = false.into();
    config["process"]["args"] = serde_json::json!(["/bin/true"]);
    std::fs::write(&path, config.to_string()).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(dir.to_path_buf())
}

fn fail(message: &str) -> ! {
    eprintln!("error: oci_lifecycle: {message}");
    std::process::exit(1);
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let work = ferrovisor_bin()
        .parent()
        .map(|p| p.join(format!("bench-oci-lifecycle-{}", std::process::id())))
        .unwrap_or_else(|| fail("no target directory"));
    let _ = std::fs::remove_dir_all(&work);
    let mut runtimes = Vec::new();
    for (label, bin) in [
        ("runc", PathBuf::from(RUNC)),
        ("ferrovisor", ferrovisor_bin()),
    ] {
        if !bin.is_file() {
            let message = format!("{label} not found at {}", bin.display());
            if bench {
                fail(&format!(
                    "{message} (cargo build --release -p runsc-shim; runc from the runc package)"
                ));
            }
            eprintln!("note: {message}; skipped");
            continue;
        }
        let dir = work.join(label);
        let bundle = bundle(&dir, &bin).unwrap_or_else(|e| fail(&e));
        runtimes.push(Runtime {
            label,
            bin,
            bundle,
            state: work.join(format!("{label}-state")),
            stderr: work.join(format!("{label}.err")),
        });
    }

    let mut c = criterion();
    let mut group = c.benchmark_group("oci_lifecycle");
    // Each iteration is four runtime invocations and a container: tens of
    // milliseconds or more, so flat sampling and criterion's fewest samples.
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .sampling_mode(SamplingMode::Flat);
    let mut medians = Vec::new();
    for rt in &runtimes {
        // Milliseconds of each run, per criterion call; the measurement
        // phase is the last 10 calls (warm-up comes before).
        let mut calls: Vec<Vec<f64>> = Vec::new();
        let mut n = 0u64;
        group.bench_function(rt.label, |b| {
            b.iter_custom(|iters| {
                let mut runs = Vec::new();
                for _ in 0..iters {
                    n += 1;
                    let took = rt
                        .lifecycle(&format!("bench{n}"))
                        .unwrap_or_else(|e| fail(&e));
                    runs.push(took);
                }
                calls.push(runs.iter().map(|d| d.as_secs_f64() * 1e3).collect());
                runs.iter().sum()
            });
        });
        if calls.len() >= 10 {
            let mut ms: Vec<f64> = calls[calls.len() - 10..].concat();
            ms.sort_by(f64::total_cmp);
            medians.push((rt.label, ms[ms.len() / 2], ms.len()));
        }
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&work);

    // Medians of whole create+start+wait+delete runs, and ferrovisor's
    // time over runc's.
    match medians[..] {
        [(base, b, n), (other, o, m)] => println!(
            "oci_lifecycle: {base} {b:.2} ms, {other} {o:.2} ms, ratio {:.1}x ({n} and {m} runs)",
            o / b
        ),
        _ => {
            for &(label, ms, n) in &medians {
                println!("oci_lifecycle: {label} {ms:.2} ms ({n} runs)");
            }
        }
    }
    c.final_summary();
}
