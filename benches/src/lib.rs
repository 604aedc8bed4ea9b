//! Shared machinery for the criterion benchmarks that compare the sandbox with
//! native runs: finding the `ferrovisor` binary and the guest programs,
//! running a guest natively or under each platform, and printing the
//! sandbox/native ratio of the medians.
//!
//! Each bench in `benches/` is a thin `main` over [`runners`] and [`compare`].

#![forbid(unsafe_code)]

use std::env;
use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{self, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};

/// Platforms every comparison runs under, as given to `ferrovisor do
/// --platform`. Adding a platform here adds it to every bench.
pub const PLATFORMS: &[&str] = &["seccomp", "seccomp-spin", "ptrace"];

/// Overrides where the `ferrovisor` binary is looked for.
pub const BIN_ENV: &str = "FERROVISOR_BIN";

/// The gVisor binary to compare with (default: `runsc` on the PATH); it
/// joins every bench when it runs `/bin/true` on its systrap platform.
/// Set it empty to leave gVisor out.
pub const RUNSC_ENV: &str = "FERROVISOR_BENCH_RUNSC";

/// The label of gVisor's runs.
pub const GVISOR: &str = "gvisor-systrap";

/// When set (to anything but `0` or empty), only native runs are measured:
/// for checking the benches themselves on a machine without a sandbox.
pub const NATIVE_ONLY_ENV: &str = "FERROVISOR_BENCH_NATIVE_ONLY";

/// The command that builds the binary, for error messages.
const BUILD_HINT: &str = "cargo build --release -p runsc-shim";

/// How long the start-up check (`ferrovisor do -- /bin/true`) may take before
/// the sandbox is declared hung. Far above any sane start-up time; it only
/// keeps a broken sandbox from stalling `cargo bench` forever.
const SMOKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Failure to run a guest or to make sense of what it printed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A program could not be started.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// The program that did not start (the guest, or `ferrovisor`).
        program: String,
        /// Why.
        source: io::Error,
    },
    /// A program exited unsuccessfully.
    #[error("`{command}` failed ({status}){stderr}")]
    Failed {
        /// The whole command line.
        command: String,
        /// How it ended.
        status: ExitStatus,
        /// Its standard error, prefixed with a newline, or empty.
        stderr: String,
    },
    /// A guest printed something other than its loop time.
    #[error("`{command}` printed {stdout:?}, not a nanosecond count")]
    BadOutput {
        /// The whole command line.
        command: String,
        /// What it printed.
        stdout: String,
    },
    /// A program ran past its deadline and was killed.
    #[error("`{command}` did not finish within {timeout:?}")]
    Timeout {
        /// The whole command line.
        command: String,
        /// How long it was given.
        timeout: Duration,
    },
}

/// A guest program built by `build.rs` from `guests/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guest {
    /// `getppid_loop N`: N raw getppid calls.
    GetppidLoop,
    /// `getppid_libc_loop N`: N getppid calls through glibc's wrapper (a
    /// site the sandbox may patch).
    GetppidLibcLoop,
    /// `open_read_close N`: N rounds of open, read 4 KiB, close of
    /// /etc/os-release.
    OpenReadClose,
    /// `clock_gettime_loop N`: N `clock_gettime(CLOCK_MONOTONIC)` calls
    /// through the C library (the vDSO).
    ClockGettimeLoop,
    /// `fork_exec_wait N`: N rounds of fork, execve of /bin/true in the
    /// child, wait4 in the parent.
    ForkExecWait,
    /// `pipe_throughput N`: a forked child writes N MiB through a pipe in
    /// 64 KiB writes, the parent reads and discards them.
    PipeThroughput,
    /// `tcp_loopback_throughput N`: a forked child connects to the parent
    /// over TCP on 127.0.0.1 and writes N MiB in 64 KiB writes, the parent
    /// reads and discards them.
    TcpLoopbackThroughput,
    /// `tcp_rr_latency N`: N one-byte requests and one-byte responses over
    /// one TCP connection (`TCP_NODELAY`) between two processes.
    TcpRrLatency,
    /// `connect_accept N`: N rounds of connect, accept and both closes
    /// between two processes, one connection at a time.
    ConnectAccept,
    /// `stat_loop N`: N `stat`s of /usr/bin/env.
    StatLoop,
    /// `page_faults N`: first touches of N fresh anonymous pages.
    PageFaults,
    /// `readdir N`: N listings (open, every entry, close) of /usr/bin.
    Readdir,
    /// `pipe_pingpong_blocked N`: N one-byte round trips between two
    /// threads over a pair of pipes while 200 more threads sleep in
    /// `read` on pipes of their own.
    PipePingpongBlocked,
}

impl Guest {
    /// The static binary in this package's `OUT_DIR`.
    pub fn path(self) -> PathBuf {
        let name = match self {
            Guest::GetppidLoop => "getppid_loop",
            Guest::GetppidLibcLoop => "getppid_libc_loop",
            Guest::OpenReadClose => "open_read_close",
            Guest::ClockGettimeLoop => "clock_gettime_loop",
            Guest::ForkExecWait => "fork_exec_wait",
            Guest::PipeThroughput => "pipe_throughput",
            Guest::TcpLoopbackThroughput => "tcp_loopback_throughput",
            Guest::TcpRrLatency => "tcp_rr_latency",
            Guest::ConnectAccept => "connect_accept",
            Guest::StatLoop => "stat_loop",
            Guest::PageFaults => "page_faults",
            Guest::Readdir => "readdir",
            Guest::PipePingpongBlocked => "pipe_pingpong_blocked",
        };
        Path::new(env!("OUT_DIR")).join(name)
    }

    /// The fewest loop iterations worth a guest run. Each run reads the
    /// clock twice, which in a sandbox without a vDSO costs two more
    /// round trips; at this many iterations that stays below 0.1%, even
    /// when criterion asks for a single iteration (warm-up, `--test`).
    pub fn min_iterations(self) -> u64 {
        match self {
            Guest::GetppidLoop | Guest::GetppidLibcLoop => 10_000,
            Guest::OpenReadClose => 1_000,
            // Tens of nanoseconds a call: enough calls to dwarf the two
            // clock reads around the loop and a stray page fault.
            Guest::ClockGettimeLoop => 100_000,
            // Hundreds of microseconds natively, milliseconds sandboxed: the
            // clock reads vanish at any count, so this only smooths over
            // scheduling noise without making a warm-up call cost seconds.
            Guest::ForkExecWait => 20,
            // An iteration is a MiB (32 writes and reads, tens of
            // microseconds natively); 16 MiB keeps the go-byte hand-over and
            // the clock reads well below 0.1%.
            Guest::PipeThroughput => 16,
            // As for the pipe: a MiB an iteration, and the handshake and go
            // byte stay out of the time.
            Guest::TcpLoopbackThroughput => 16,
            // Several microseconds a round trip natively: a thousand make a
            // few milliseconds, far above the clock reads.
            Guest::TcpRrLatency => 1_000,
            // Tens of microseconds a round natively. Each round leaves a
            // TIME-WAIT entry on the host, so a run's count is kept to what
            // the measurement needs rather than padded.
            Guest::ConnectAccept => 100,
            // A microsecond or so natively: as for getppid, many calls.
            Guest::StatLoop => 10_000,
            // A fraction of a microsecond natively, tens of them on PVM.
            Guest::PageFaults => 10_000,
            // Tens of microseconds natively (a thousand entries).
            Guest::Readdir => 100,
            // Tens of microseconds a round trip natively, so the clock
            // reads vanish already; a sandbox that wakes every sleeper on
            // each write takes milliseconds a round trip, so no more.
            Guest::PipePingpongBlocked => 200,
        }
    }
}

/// Where a program runs: on the host, or in the sandbox on one platform.
#[derive(Debug, Clone)]
pub enum Runner {
    /// Directly on the host.
    Native,
    /// Under `ferrovisor do --platform <platform> --`.
    Sandbox {
        /// The `ferrovisor` binary.
        bin: PathBuf,
        /// The platform name, as passed to `--platform`.
        platform: &'static str,
    },
    /// Under gVisor: `runsc --network=none --platform=systrap do`.
    Gvisor {
        /// The `runsc` binary.
        bin: PathBuf,
    },
}

impl Runner {
    /// The name used in criterion's benchmark ids and in the ratio lines.
    pub fn label(&self) -> &str {
        match self {
            Runner::Native => "native",
            Runner::Sandbox { platform, .. } => platform,
            Runner::Gvisor { .. } => GVISOR,
        }
    }

    /// A command that runs `program args` here, with null stdin.
    pub fn command<I, S>(&self, program: &Path, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = match self {
            Runner::Native => Command::new(program),
            Runner::Sandbox { bin, platform } => {
                let mut cmd = Command::new(bin);
                cmd.args(["do", "--platform", platform, "--"]).arg(program);
                cmd
            }
            Runner::Gvisor { bin } => {
                let mut cmd = Command::new(bin);
                cmd.args(["--network=none", "--platform=systrap", "do"])
                    .arg(program);
                cmd
            }
        };
        // `cargo bench` points the loader at its target directories; a
        // guest would try each (through the gofer) before the system's.
        cmd.args(args)
            .stdin(Stdio::null())
            .env_remove("LD_LIBRARY_PATH");
        cmd
    }

    /// Runs `guest N` and returns the duration the guest measured around
    /// its own loop, which leaves process start-up out.
    ///
    /// N is `iterations`, raised to [`Guest::min_iterations`] if lower; the
    /// duration is then scaled back to `iterations`, so it is always the
    /// time `iterations` iterations took at the measured rate.
    pub fn run_timed(&self, guest: Guest, iterations: u64) -> Result<Duration, BenchError> {
        let n = iterations.max(guest.min_iterations());
        let loop_time = self.run_guest(guest, n)?;
        let scaled = loop_time.as_nanos() * u128::from(iterations) / u128::from(n);
        Ok(Duration::from_nanos(
            u64::try_from(scaled).unwrap_or(u64::MAX),
        ))
    }

    /// Runs `guest n` and returns the loop time the guest printed.
    fn run_guest(&self, guest: Guest, n: u64) -> Result<Duration, BenchError> {
        let mut cmd = self.command(&guest.path(), [n.to_string()]);
        let output = cmd.output().map_err(|source| spawn_error(&cmd, source))?;
        if !output.status.success() {
            return Err(failed(&cmd, output.status, &output.stderr));
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        stdout
            .trim()
            .parse::<u64>()
            .map(Duration::from_nanos)
            .map_err(|_| BenchError::BadOutput {
                command: command_line(&cmd),
                stdout: stdout.into_owned(),
            })
    }

    /// Runs `program args` to completion and returns the wall time from
    /// spawn to reaped exit. Standard error goes to ours, so a failing
    /// sandbox explains itself.
    pub fn run_wall(&self, program: &Path, args: &[&str]) -> Result<Duration, BenchError> {
        let mut cmd = self.command(program, args);
        cmd.stdout(Stdio::null()).stderr(Stdio::inherit());
        let start = Instant::now();
        let status = cmd.status().map_err(|source| spawn_error(&cmd, source))?;
        let elapsed = start.elapsed();
        if !status.success() {
            return Err(failed(&cmd, status, &[]));
        }
        Ok(elapsed)
    }
}

/// What criterion was asked to do, as far as setting up runners cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunMode {
    /// `cargo bench`: measure for real.
    Bench,
    /// `cargo test --benches` or `cargo bench -- --test`: run each routine
    /// once.
    Test,
    /// `--list`: nothing runs.
    List,
}

/// Mirrors criterion's own reading of its arguments (`--bench` is what
/// `cargo bench` passes; without it criterion runs in test mode).
fn run_mode() -> RunMode {
    let args: Vec<String> = env::args().skip(1).collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    if has("--list") {
        RunMode::List
    } else if has("--bench") && !has("--test") {
        RunMode::Bench
    } else {
        RunMode::Test
    }
}

/// The `ferrovisor` binary: `$FERROVISOR_BIN`, else `release/ferrovisor` in
/// the target directory this bench was built into (so `CARGO_TARGET_DIR`
/// is honoured).
pub fn ferrovisor_bin() -> PathBuf {
    if let Some(bin) = env::var_os(BIN_ENV) {
        return PathBuf::from(bin);
    }
    // Bench executables live in <target>/<profile>/deps/.
    env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.to_path_buf()))
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("release/ferrovisor")
}

/// The runners for this bench run: native first, then one per entry of
/// [`PLATFORMS`].
///
/// Exits the process with a message when the sandbox cannot be used for a
/// real benchmark run: the binary is missing, or it cannot run `/bin/true`.
/// Under `cargo test --benches` a missing binary only drops the sandbox
/// runners, so a test build does not depend on a release build.
pub fn runners() -> Vec<Runner> {
    let mut runners = vec![Runner::Native];
    if env::var(NATIVE_ONLY_ENV).is_ok_and(|v| !v.is_empty() && v != "0") {
        eprintln!("note: {NATIVE_ONLY_ENV} is set, measuring native runs only");
        return runners;
    }

    let bin = ferrovisor_bin();
    let mode = run_mode();
    if mode != RunMode::List && !bin.is_file() {
        let message = format!(
            "ferrovisor binary not found at {}; build it with `{BUILD_HINT}` \
             (or point {BIN_ENV} at one)",
            bin.display()
        );
        if mode == RunMode::Test {
            eprintln!("note: {message}; checking native runs only");
            return runners;
        }
        exit_with(&message);
    }

    // KVM's where /dev/kvm opens (its own line beside the others).
    let kvm = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    let extra: &[&'static str] = if kvm { &["kvm"] } else { &[] };
    for &platform in PLATFORMS.iter().chain(extra) {
        let runner = Runner::Sandbox {
            bin: bin.clone(),
            platform,
        };
        if mode != RunMode::List {
            if let Err(e) = smoke_test(&runner) {
                exit_with(&format!(
                    "the sandbox cannot run /bin/true on platform {platform}: {e}"
                ));
            }
        }
        runners.push(runner);
    }
    eprintln!(
        "sandbox: {} (platforms: {}{})",
        bin.display(),
        PLATFORMS.join(", "),
        if kvm { ", kvm" } else { "" }
    );
    if mode != RunMode::List {
        runners.extend(gvisor());
    }
    runners
}

/// gVisor's runner, when its binary runs `/bin/true` on systrap (Debian
/// 12's runsc predates systrap; Debian 13's has it).
fn gvisor() -> Option<Runner> {
    let bin = match env::var_os(RUNSC_ENV) {
        Some(b) if b.is_empty() => return None,
        Some(b) => PathBuf::from(b),
        None => PathBuf::from("runsc"),
    };
    let runner = Runner::Gvisor { bin: bin.clone() };
    match smoke_test(&runner) {
        Ok(()) => {
            eprintln!("gVisor: {} --platform=systrap", bin.display());
            Some(runner)
        }
        Err(e) => {
            eprintln!("note: no gVisor comparison ({e}); set {RUNSC_ENV} to a runsc with systrap");
            None
        }
    }
}

/// Checks that `runner` runs `/bin/true` within [`SMOKE_TIMEOUT`], so a
/// broken sandbox is reported once and clearly instead of mid-benchmark.
fn smoke_test(runner: &Runner) -> Result<(), BenchError> {
    let mut cmd = runner.command(Path::new("/bin/true"), [] as [&str; 0]);
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|source| spawn_error(&cmd, source))?;
    let deadline = Instant::now() + SMOKE_TIMEOUT;
    loop {
        if child
            .try_wait()
            .map_err(|source| spawn_error(&cmd, source))?
            .is_some()
        {
            break;
        }
        if Instant::now() >= deadline {
            // Best effort: the child may have exited since try_wait.
            let _ = child.kill();
            let _ = child.wait();
            return Err(BenchError::Timeout {
                command: command_line(&cmd),
                timeout: SMOKE_TIMEOUT,
            });
        }
        thread::sleep(Duration::from_millis(10));
    }
    let output = child
        .wait_with_output()
        .map_err(|source| spawn_error(&cmd, source))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(failed(&cmd, output.status, &output.stderr))
    }
}

/// The unit a comparison is reported in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Nanoseconds per system call.
    NsPerCall,
    /// Nanoseconds per loop iteration.
    NsPerIter,
    /// Milliseconds per run.
    Ms,
    /// Throughput, for benches whose iteration moves one MiB: printed as
    /// MiB/s. The ratio stays sandbox time over native time, which is native
    /// throughput over sandbox throughput: how many times slower, as for
    /// every other unit.
    MibPerSec,
    /// Microseconds per request/response round trip.
    UsPerRoundTrip,
    /// Connections per second, for benches whose iteration is one whole
    /// connection. As for [`Unit::MibPerSec`], the ratio is still sandbox
    /// time over native time.
    ConnPerSec,
}

impl Unit {
    /// Formats a per-iteration time given in nanoseconds.
    fn format(self, ns: f64) -> String {
        match self {
            Unit::NsPerCall => format!("{ns:.0} ns/call"),
            Unit::NsPerIter => format!("{ns:.0} ns/iter"),
            Unit::Ms => format!("{:.2} ms", ns / 1e6),
            Unit::MibPerSec => format!("{:.0} MiB/s", 1e9 / ns),
            Unit::UsPerRoundTrip => format!("{:.1} µs/round trip", ns / 1e3),
            Unit::ConnPerSec => format!("{:.0} conn/s", 1e9 / ns),
        }
    }
}

/// How one comparison is measured. The defaults keep a whole
/// `cargo bench -p benches` well under two minutes on two cores.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// Criterion group name, also the prefix of the ratio line.
    pub name: &'static str,
    /// The unit of the ratio line.
    pub unit: Unit,
    /// Criterion samples per runner (criterion's minimum is 10).
    pub sample_size: usize,
    /// Criterion warm-up time per runner.
    pub warm_up: Duration,
    /// Criterion measurement time per runner.
    pub measurement: Duration,
    /// `Flat` suits routines of a millisecond or more per iteration.
    pub sampling: SamplingMode,
}

impl Comparison {
    /// A comparison with the default sample counts and times.
    pub fn new(name: &'static str, unit: Unit) -> Self {
        Comparison {
            name,
            unit,
            sample_size: 10,
            warm_up: Duration::from_millis(1000),
            measurement: Duration::from_secs(3),
            sampling: SamplingMode::Auto,
        }
    }

    /// Sets the sampling mode.
    pub fn sampling(mut self, sampling: SamplingMode) -> Self {
        self.sampling = sampling;
        self
    }
}

/// A criterion instance for these benches: no plots, command line honoured.
pub fn criterion() -> Criterion {
    Criterion::default().without_plots().configure_from_args()
}

/// Benchmarks `measure` under every runner in one criterion group, then
/// prints one line per sandbox runner with the native and sandbox medians
/// and their ratio, e.g.
/// `syscall_roundtrip: native 95 ns/call, ptrace 4600 ns/call, ratio 48x`.
///
/// `measure(runner, iters)` returns the time `iters` iterations took (as for
/// criterion's `iter_custom`). Its errors end the process with a message.
pub fn compare<F>(c: &mut Criterion, cmp: &Comparison, runners: &[Runner], mut measure: F)
where
    F: FnMut(&Runner, u64) -> Result<Duration, BenchError>,
{
    let mut group = c.benchmark_group(cmp.name);
    group
        .sample_size(cmp.sample_size)
        .warm_up_time(cmp.warm_up)
        .measurement_time(cmp.measurement)
        .sampling_mode(cmp.sampling);

    let mut medians: Vec<(&str, f64)> = Vec::new();
    for runner in runners {
        // Per-iteration times of every call, warm-up included; criterion's
        // measurement phase is the last `sample_size` calls.
        let mut per_iter_ns: Vec<f64> = Vec::new();
        group.bench_function(runner.label(), |b| {
            b.iter_custom(|iters| {
                let elapsed = measure(runner, iters).unwrap_or_else(|e| {
                    exit_with(&format!("{} ({}): {e}", cmp.name, runner.label()))
                });
                per_iter_ns.push(elapsed.as_nanos() as f64 / iters.max(1) as f64);
                elapsed
            });
        });
        // Fewer calls than samples means test mode (one call) or a filtered
        // out benchmark: nothing worth a median.
        if per_iter_ns.len() >= cmp.sample_size {
            let first = per_iter_ns.len() - cmp.sample_size;
            medians.push((runner.label(), median(&mut per_iter_ns[first..])));
        }
    }
    group.finish();

    for line in ratio_lines(cmp, &medians) {
        println!("{line}");
    }
}

/// The ratio lines for measured medians (label, ns per iteration); native
/// must be among them for any line to be printed.
fn ratio_lines(cmp: &Comparison, medians: &[(&str, f64)]) -> Vec<String> {
    let Some(&(_, native)) = medians.iter().find(|(label, _)| *label == "native") else {
        return Vec::new();
    };
    let sandboxed: Vec<_> = medians.iter().filter(|(l, _)| *l != "native").collect();
    if sandboxed.is_empty() {
        return vec![format!("{}: native {}", cmp.name, cmp.unit.format(native))];
    }
    let gvisor = medians
        .iter()
        .find(|(l, _)| *l == GVISOR)
        .map(|&(_, ns)| ns);
    sandboxed
        .into_iter()
        .map(|&(label, ns)| {
            let vs_gvisor = match gvisor {
                Some(g) if label != GVISOR => format!(", {} of gVisor's", share(ns / g)),
                _ => String::new(),
            };
            format!(
                "{}: native {}, {label} {}, ratio {}{vs_gvisor}",
                cmp.name,
                cmp.unit.format(native),
                cmp.unit.format(ns),
                format_ratio(ns / native)
            )
        })
        .collect()
}

/// A share of gVisor's time: two decimals, three below 0.1.
fn share(r: f64) -> String {
    if r < 0.1 {
        format!("{r:.3}")
    } else {
        format!("{r:.2}")
    }
}

/// `48x` for large ratios, `3.2x` for small ones.
fn format_ratio(ratio: f64) -> String {
    if ratio >= 10.0 {
        format!("{ratio:.0}x")
    } else {
        format!("{ratio:.1}x")
    }
}

/// The median of a non-empty slice (mean of the middle two for even sizes).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

fn command_line(cmd: &Command) -> String {
    let mut line = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
    }
    line
}

fn spawn_error(cmd: &Command, source: io::Error) -> BenchError {
    BenchError::Spawn {
        program: cmd.get_program().to_string_lossy().into_owned(),
        source,
    }
}

fn failed(cmd: &Command, status: ExitStatus, stderr: &[u8]) -> BenchError {
    let stderr = String::from_utf8_lossy(stderr);
    let stderr = stderr.trim_end();
    BenchError::Failed {
        command: command_line(cmd),
        status,
        stderr: if stderr.is_empty() {
            String::new()
        } else {
            format!("\n{stderr}")
        },
    }
}

fn exit_with(message: &dyn fmt::Display) -> ! {
    eprintln!("error: {message}");
    process::exit(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn ratio_line_matches_the_documented_shape() {
        let cmp = Comparison::new("syscall_roundtrip", Unit::NsPerCall);
        let lines = ratio_lines(&cmp, &[("native", 95.0), ("ptrace", 4600.0)]);
        assert_eq!(
            lines,
            ["syscall_roundtrip: native 95 ns/call, ptrace 4600 ns/call, ratio 48x"]
        );
    }

    #[test]
    fn one_line_per_platform_and_small_ratios_keep_a_decimal() {
        let cmp = Comparison::new("startup", Unit::Ms);
        let lines = ratio_lines(
            &cmp,
            &[("native", 1e6), ("ptrace", 40e6), ("seccomp", 3.2e6)],
        );
        assert_eq!(
            lines,
            [
                "startup: native 1.00 ms, ptrace 40.00 ms, ratio 40x",
                "startup: native 1.00 ms, seccomp 3.20 ms, ratio 3.2x",
            ]
        );
    }

    #[test]
    fn with_gvisor_each_platform_also_gets_its_share_of_gvisors_time() {
        let cmp = Comparison::new("syscall_roundtrip", Unit::NsPerCall);
        let lines = ratio_lines(
            &cmp,
            &[("native", 100.0), ("seccomp", 500.0), (GVISOR, 1000.0)],
        );
        assert_eq!(
            lines,
            [
                "syscall_roundtrip: native 100 ns/call, seccomp 500 ns/call, ratio 5.0x, 0.50 of gVisor's",
                "syscall_roundtrip: native 100 ns/call, gvisor-systrap 1000 ns/call, ratio 10x",
            ]
        );
    }

    #[test]
    fn throughput_is_printed_as_a_rate_with_the_slowdown_as_ratio() {
        // 250 us per MiB natively is 4000 MiB/s; 1 ms per MiB is 1000 MiB/s.
        let cmp = Comparison::new("pipe_throughput", Unit::MibPerSec);
        let lines = ratio_lines(&cmp, &[("native", 250e3), ("ptrace", 1e6)]);
        assert_eq!(
            lines,
            ["pipe_throughput: native 4000 MiB/s, ptrace 1000 MiB/s, ratio 4.0x"]
        );
    }

    #[test]
    fn round_trips_in_microseconds_and_connections_as_a_rate() {
        let rr = Comparison::new("tcp_rr_latency", Unit::UsPerRoundTrip);
        assert_eq!(
            ratio_lines(&rr, &[("native", 7_300.0), ("seccomp", 73_000.0)]),
            ["tcp_rr_latency: native 7.3 µs/round trip, seccomp 73.0 µs/round trip, ratio 10x"]
        );
        // 25 us per connection is 40000 conn/s; 100 us is 10000 conn/s.
        let ca = Comparison::new("connect_accept", Unit::ConnPerSec);
        assert_eq!(
            ratio_lines(&ca, &[("native", 25e3), ("ptrace", 100e3)]),
            ["connect_accept: native 40000 conn/s, ptrace 10000 conn/s, ratio 4.0x"]
        );
    }

    #[test]
    fn no_ratio_without_native() {
        let cmp = Comparison::new("x", Unit::NsPerIter);
        assert!(ratio_lines(&cmp, &[("ptrace", 1.0)]).is_empty());
    }

    #[test]
    fn sandbox_command_line() {
        let runner = Runner::Sandbox {
            bin: PathBuf::from("/bin/ferrovisor"),
            platform: "ptrace",
        };
        let cmd = runner.command(Path::new("/guest"), ["7"]);
        assert_eq!(
            command_line(&cmd),
            "/bin/ferrovisor do --platform ptrace -- /guest 7"
        );
    }

    #[test]
    fn guests_report_their_loop_time_natively() {
        for guest in [
            Guest::GetppidLoop,
            Guest::OpenReadClose,
            Guest::ClockGettimeLoop,
            Guest::ForkExecWait,
            Guest::PipeThroughput,
            Guest::TcpLoopbackThroughput,
            Guest::TcpRrLatency,
            Guest::ConnectAccept,
            Guest::StatLoop,
            Guest::PageFaults,
            Guest::Readdir,
            Guest::PipePingpongBlocked,
        ] {
            let elapsed = Runner::Native.run_timed(guest, guest.min_iterations());
            assert!(elapsed.is_ok(), "{guest:?}: {elapsed:?}");
        }
    }

    #[test]
    fn a_failing_guest_is_an_error() {
        // No iteration count: the guest prints usage and exits 2.
        let mut cmd = Runner::Native.command(&Guest::GetppidLoop.path(), [] as [&str; 0]);
        cmd.stderr(Stdio::null());
        let status = cmd.status();
        assert!(matches!(status, Ok(s) if s.code() == Some(2)), "{status:?}");
    }
}
