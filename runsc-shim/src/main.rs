//! `ferrovisor`: the command-line front end. `do` runs a host command inside
//! a sandbox whose root is a read-only view of a host directory; the other
//! subcommands are an OCI runtime with runc's command-line contract, a thin
//! shell over the `runsc_shim` library.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use runsc_shim::container::{self, CreateOptions, Runtime};
use runsc_shim::logging::{self, LogFormat};
use runsc_shim::network::{self, Network, Spelling};
use runsc_shim::state::{StateDir, DEFAULT_ROOT};

/// A sandbox for untrusted code: a user-space kernel between the program and
/// the host.
#[derive(Debug, Parser)]
#[command(name = "ferrovisor", version, about)]
struct Cli {
    /// Directory for the state of containers (runc's --root).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_ROOT)]
    root: PathBuf,
    /// Append the runtime's log to FILE (default: warnings on stderr).
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Format of log lines.
    #[arg(long, value_enum, default_value = "text", value_name = "FORMAT")]
    log_format: LogFormatArg,
    /// Log debug detail.
    #[arg(long)]
    debug: bool,
    /// Accepted for runc compatibility; ferrovisor manages cgroupfs itself
    /// (a systemd slice:prefix:name linux.cgroupsPath is refused).
    #[arg(long)]
    systemd_cgroup: bool,
    /// Accepted for runc compatibility (true, false or auto); ignored.
    #[arg(long, value_name = "VALUE", hide = true)]
    rootless: Option<String>,
    /// Accepted for runc compatibility; ignored.
    #[arg(long, value_name = "PATH", hide = true)]
    criu: Option<PathBuf>,
    /// Containers' network (as runsc's --network): none (loopback only;
    /// the default without allow rules), sandbox (the netstack, with a way
    /// out from the container's network namespace for what --allow-cidr
    /// and --allow-host allow; the default with them; without rules every
    /// destination is refused) or host (TCP and UDP through host sockets
    /// in the container's network namespace, no egress policy). For 'do',
    /// give --network and the rules after 'do'.
    #[arg(long, value_enum, value_name = "MODE")]
    network: Option<NetworkKind>,
    /// Let containers reach CIDR (on PORT only, when given) over TCP and
    /// UDP, from their network namespace; repeatable.
    #[arg(long = "allow-cidr", value_name = "CIDR[:PORT]")]
    allow_cidr: Vec<String>,
    /// Let containers resolve DOMAIN (or any name under `*.DOMAIN`)
    /// through the sandbox's DNS and connect to what it resolves to;
    /// repeatable.
    #[arg(long = "allow-host", value_name = "DOMAIN[:PORT/tcp]")]
    allow_host: Vec<String>,
    #[command(flatten)]
    egress: EgressFlags,
    /// Containers' writes to a writable root go to an in-memory layer,
    /// leaving the bundle's rootfs as it was (runsc's
    /// --overlay2=root:memory); without it they reach the rootfs, as under
    /// runc.
    #[arg(long)]
    overlay: bool,
    /// Pass NVIDIA GPUs through to containers whose config.json's
    /// linux.devices names /dev/nvidia* (as the NVIDIA container toolkit
    /// writes them), by ioctl filtering (docs/gpu.md).
    #[arg(long)]
    nvproxy: bool,
    /// With --nvproxy: what containers may do with the GPUs (compute,
    /// utility, graphics, video, all); default: each container's
    /// NVIDIA_DRIVER_CAPABILITIES, else compute,utility.
    #[arg(
        long = "nvproxy-capabilities",
        value_name = "CAPS",
        requires = "nvproxy"
    )]
    nvproxy_capabilities: Option<String>,
    /// With --nvproxy: take the driver version as VERSION instead of
    /// reading /proc/driver/nvidia/version.
    #[arg(
        long = "nvproxy-driver-version",
        value_name = "VERSION",
        requires = "nvproxy"
    )]
    nvproxy_driver_version: Option<String>,
    /// Internal (tests): the host directory holding the NVIDIA devices.
    #[arg(
        long = "nvproxy-dev-dir",
        value_name = "DIR",
        hide = true,
        requires = "nvproxy"
    )]
    nvproxy_dev_dir: Option<PathBuf>,
    /// How containers' code runs: seccomp (the default) or kvm (ring 3 of
    /// a KVM virtual machine; needs /dev/kvm). For 'do', give --platform
    /// after 'do'.
    #[arg(long, value_enum, value_name = "PLATFORM", default_value = "seccomp")]
    platform: container::Platform,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum OutputFormat {
    Table,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run CMD in a sandbox whose root is a read-only view of a host directory.
    Do(DoArgs),
    /// Long-lived sandboxes for agents: create, exec, cp, ls, logs, stop, rm.
    #[command(subcommand)]
    Sandbox(runsc_shim::sandbox::cli::Command),
    /// Serve the sandbox API (HTTP and JSON; docs/agents.md) until ^C,
    /// then end the sandboxes made through it.
    Serve(ServeArgs),
    /// Serve the Model Context Protocol on stdio over one sandbox, made
    /// from these flags and ended with the session (docs/agents.md).
    Mcp(McpArgs),
    /// Create a container from a bundle; it waits for 'start'.
    Create(CreateArgs),
    /// Start the program of a created container.
    Start(IdArg),
    /// Create, start and wait for a container, then delete it.
    Run(RunArgs),
    /// Print the OCI state of a container as JSON.
    State(IdArg),
    /// Send a signal (default TERM) to a container.
    Kill(KillArgs),
    /// Delete a container's state (and kill it, with --force).
    Delete(DeleteArgs),
    /// Run another process in a running container.
    Exec(ExecArgs),
    /// List the host processes of a container.
    Ps(PsArgs),
    /// List containers.
    List(ListArgs),
    /// Write a template config.json into a bundle.
    Spec(SpecArgs),
    /// Print a container's statistics as JSON lines until it stops.
    Events(EventsArgs),
    /// Wait for a container to stop and print its exit status as JSON.
    Wait(IdArg),
    /// Suspend all processes of a container.
    Pause(IdArg),
    /// Resume a paused container.
    Resume(IdArg),
    /// Print what this runtime supports, as JSON (runc's `features`).
    Features,
    /// Change a created or running container's resource limits.
    Update(UpdateArgs),
    /// Save a running container into --image-path (and stop it, unless
    /// --leave-running).
    Checkpoint(CheckpointArgs),
    /// Create and start a container from a checkpoint's --image-path.
    Restore(RestoreArgs),
    /// Make container NEW-ID as a copy of running container ID (its
    /// bundle, its state saved and restored); both run on apart.
    Fork(ForkArgs),
    /// Print every x86-64 system call and how the sandbox supports it
    /// (number, name, support, note).
    Syscalls(SyscallsArgs),
    /// NVIDIA GPU support: the driver versions nvproxy can proxy
    /// (docs/gpu.md).
    #[command(subcommand)]
    Nvproxy(NvproxyCommand),
    /// Internal: the sandbox process of a container (started by 'create').
    #[command(hide = true)]
    Boot(BootArgs),
    /// Internal: serve a root directory to a Sentry (started by `do`, `boot`).
    #[command(hide = true)]
    Gofer(GoferArgs),
    /// Internal: open the GPU's devices for a Sentry (started by `do --gpus`).
    #[command(hide = true)]
    DeviceOpener(DeviceOpenerArgs),
}

#[derive(Debug, clap::Args)]
struct DeviceOpenerArgs {
    /// the host directory of the devices
    #[arg(long)]
    dir: PathBuf,
    /// the inherited socket
    #[arg(long)]
    fd: i32,
    /// the device names it may open
    #[arg(long = "allow")]
    allow: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum NvproxyCommand {
    /// Print the NVIDIA driver versions nvproxy supports, one per line.
    ListSupportedDrivers,
    /// Say whether this host's NVIDIA driver is one of them (exit 1 if not).
    CheckHost,
}

#[derive(Debug, clap::Args)]
struct SyscallsArgs {
    /// Print docs/compatibility.md instead (its content, in Markdown).
    #[arg(long)]
    markdown: bool,
    /// Print docs/filters.md instead: the host system calls the Sentry and
    /// the gofer may make.
    #[arg(long, conflicts_with = "markdown")]
    host_filters: bool,
}

#[derive(Debug, clap::Args)]
struct IdArg {
    /// Container id.
    id: String,
}

#[derive(Debug, clap::Args)]
struct CreateArgs {
    /// Bundle directory (holding config.json).
    #[arg(long, short = 'b', value_name = "DIR", default_value = ".")]
    bundle: PathBuf,
    /// Unix socket to send the terminal's master side to (process.terminal).
    #[arg(long, value_name = "PATH")]
    console_socket: Option<PathBuf>,
    /// Write the container's host pid to FILE.
    #[arg(long, value_name = "FILE")]
    pid_file: Option<PathBuf>,
    /// Pass N descriptors past stdio into the container.
    #[arg(long, value_name = "N", default_value_t = 0)]
    preserve_fds: u32,
    /// Accepted for runc compatibility (there is no pivot_root to skip).
    #[arg(long)]
    no_pivot: bool,
    /// Accepted for runc compatibility (no session keyring is made).
    #[arg(long)]
    no_new_keyring: bool,
    /// Container id.
    id: String,
}

/// runc's `checkpoint` flags: the image's directory and whether the
/// container runs on; CRIU's own tuning is accepted and has no meaning
/// here.
#[derive(Debug, clap::Args)]
struct CheckpointArgs {
    /// Directory to save the image in (made when missing).
    #[arg(long, value_name = "DIR", default_value = "checkpoint")]
    image_path: PathBuf,
    /// Leave the container running after the save.
    #[arg(long)]
    leave_running: bool,
    #[command(flatten)]
    criu: CriuFlags,
    /// Container id.
    id: String,
}

/// CRIU's flags, which runc and engines pass: the Sentry saves its own
/// state, so these mean nothing (the ones that would ask for something
/// it cannot do are refused by name).
#[derive(Debug, clap::Args)]
struct CriuFlags {
    /// Accepted for runc compatibility (CRIU's scratch directory).
    #[arg(long, value_name = "DIR")]
    work_path: Option<PathBuf>,
    /// Refused: images are whole (no pre-dump parents).
    #[arg(long, value_name = "DIR")]
    parent_path: Option<PathBuf>,
    /// Refused: no connection leaves a sandbox saved (see docs/checkpoint.md).
    #[arg(long)]
    tcp_established: bool,
    /// Accepted for runc compatibility.
    #[arg(long)]
    ext_unix_sk: bool,
    /// Accepted for runc compatibility.
    #[arg(long)]
    shell_job: bool,
    /// Accepted for runc compatibility.
    #[arg(long)]
    file_locks: bool,
    /// Refused: no pre-dump.
    #[arg(long)]
    pre_dump: bool,
    /// Refused: no lazy pages.
    #[arg(long)]
    lazy_pages: bool,
    /// Accepted for runc compatibility.
    #[arg(long, value_name = "MODE")]
    manage_cgroups_mode: Option<String>,
    /// Accepted for runc compatibility.
    #[arg(long, value_name = "NS")]
    empty_ns: Vec<String>,
    /// Accepted for runc compatibility.
    #[arg(long)]
    auto_dedup: bool,
}

impl CriuFlags {
    /// The first flag that asks for what a Sentry image cannot give.
    fn refused(&self) -> Option<&'static str> {
        if self.parent_path.is_some() {
            Some("--parent-path (images are whole)")
        } else if self.tcp_established {
            Some("--tcp-established (connections out of a sandbox are not saved)")
        } else if self.pre_dump {
            Some("--pre-dump (images are whole)")
        } else if self.lazy_pages {
            Some("--lazy-pages")
        } else {
            None
        }
    }
}

#[derive(Debug, clap::Args)]
struct ForkArgs {
    /// The running container.
    id: String,
    /// The copy's id.
    new_id: String,
}

/// runc's `restore`: `create` and `start` in one, from an image.
#[derive(Debug, clap::Args)]
struct RestoreArgs {
    /// Directory a `checkpoint` saved the image in.
    #[arg(long, value_name = "DIR", default_value = "checkpoint")]
    image_path: PathBuf,
    #[command(flatten)]
    create: CreateArgs,
    /// Return once restored, leaving the container running.
    #[arg(long, short = 'd')]
    detach: bool,
    /// Accepted for runc compatibility (the sandbox reaps its own).
    #[arg(long)]
    no_subreaper: bool,
    #[command(flatten)]
    criu: CriuFlags,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    #[command(flatten)]
    create: CreateArgs,
    /// Return once started, leaving the container running.
    #[arg(long, short = 'd')]
    detach: bool,
    /// Accepted for runc compatibility: keep is the default only with --detach.
    #[arg(long)]
    keep: bool,
}

#[derive(Debug, clap::Args)]
struct KillArgs {
    /// Send the signal to all processes of the container (the same, today;
    /// no error if it has stopped).
    #[arg(long, short = 'a')]
    all: bool,
    /// Container id.
    id: String,
    /// Signal name (TERM, SIGKILL) or number.
    #[arg(default_value = "TERM")]
    signal: String,
}

#[derive(Debug, clap::Args)]
struct DeleteArgs {
    /// Kill a running container first; no error if it does not exist.
    #[arg(long, short = 'f')]
    force: bool,
    /// Container id.
    id: String,
}

#[derive(Debug, clap::Args)]
struct ExecArgs {
    /// JSON file with the process to run (an OCI `process` object).
    #[arg(long, short = 'p', value_name = "FILE")]
    process: Option<PathBuf>,
    /// Allocate a terminal.
    #[arg(long, short = 't')]
    tty: bool,
    /// Return once started.
    #[arg(long, short = 'd')]
    detach: bool,
    /// Write the process's host pid to FILE.
    #[arg(long, value_name = "FILE")]
    pid_file: Option<PathBuf>,
    /// Unix socket to send the terminal's master side to.
    #[arg(long, value_name = "PATH")]
    console_socket: Option<PathBuf>,
    /// Working directory.
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Environment variable NAME=VALUE.
    #[arg(long, short = 'e', value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// UID[:GID] to run as.
    #[arg(long, short = 'u', value_name = "UID[:GID]")]
    user: Option<String>,
    /// Additional group ids.
    #[arg(long = "additional-gids", short = 'g', value_name = "GID")]
    additional_gids: Vec<u32>,
    /// Capability to add.
    #[arg(long, short = 'c', value_name = "CAP")]
    cap: Vec<String>,
    /// Set no_new_privs.
    #[arg(long)]
    no_new_privs: bool,
    /// Pass N descriptors past stdio into the process.
    #[arg(long, value_name = "N", default_value_t = 0)]
    preserve_fds: u32,
    /// SELinux label.
    #[arg(long, value_name = "LABEL")]
    process_label: Option<String>,
    /// AppArmor profile.
    #[arg(long, value_name = "PROFILE")]
    apparmor: Option<String>,
    /// Container id.
    id: String,
    /// Command and arguments (unless --process).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<String>,
}

/// runc's `update` flags. Byte counts take a k, m, g or t suffix (powers of
/// 1024); -1 lifts a limit.
#[derive(Debug, clap::Args)]
struct UpdateArgs {
    /// Read the new limits from FILE ('-' for standard input), runtime-spec
    /// linux.resources JSON; no other limit flags with it.
    #[arg(long, short = 'r', value_name = "FILE")]
    resources: Option<PathBuf>,
    /// Memory limit.
    #[arg(long, value_name = "BYTES", allow_hyphen_values = true)]
    memory: Option<String>,
    /// Memory plus swap limit.
    #[arg(long, value_name = "BYTES", allow_hyphen_values = true)]
    memory_swap: Option<String>,
    /// Memory soft limit.
    #[arg(long, value_name = "BYTES", allow_hyphen_values = true)]
    memory_reservation: Option<String>,
    /// CPU time allowed per period, microseconds (-1 for none).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    cpu_quota: Option<i64>,
    /// CPU period, microseconds.
    #[arg(long, value_name = "N")]
    cpu_period: Option<u64>,
    /// CPU shares, a relative weight.
    #[arg(long, alias = "cpu-shares", value_name = "N")]
    cpu_share: Option<u64>,
    /// Most tasks the container may hold (-1 for none).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pids_limit: Option<i64>,
    /// CPUs the container may use (refused: not applied by ferrovisor).
    #[arg(long, value_name = "LIST")]
    cpuset_cpus: Option<String>,
    /// Memory nodes the container may use (refused: not applied by ferrovisor).
    #[arg(long, value_name = "LIST")]
    cpuset_mems: Option<String>,
    /// Block I/O weight (refused: not applied by ferrovisor).
    #[arg(long, value_name = "N")]
    blkio_weight: Option<u16>,
    /// Open HTTP and TLS connections naming DOMAIN (or DOMAIN:PORT/tcp)
    /// from now on (`--network sandbox`); repeatable.
    #[arg(long = "allow-host", value_name = "DOMAIN[:PORT/tcp]")]
    allow_host: Vec<String>,
    /// Refuse new connections naming DOMAIN (or `*.DOMAIN`) from now on,
    /// whatever rule allowed them; repeatable.
    #[arg(long = "deny-host", value_name = "DOMAIN")]
    deny_host: Vec<String>,
    /// The control socket of a `do` sandbox (`do --control-socket`), in
    /// place of a container id: only the egress flags apply.
    #[arg(long = "control-socket", value_name = "PATH", conflicts_with = "id")]
    control_socket: Option<PathBuf>,
    /// Container id.
    #[arg(required_unless_present = "control_socket")]
    id: Option<String>,
}

/// A `do` sandbox's tasks unless `--pids` says otherwise: plenty for a
/// build, and far from the host's 32,768 pids (each guest thread is about
/// three host threads).
const DEFAULT_DO_PIDS: i64 = 4096;

/// runc's byte counts: a number with an optional k, m, g or t suffix
/// (powers of 1024, an optional trailing b), or -1 for no limit.
fn parse_bytes(flag: &str, s: &str) -> Result<i64, container::Error> {
    runsc_shim::cgroup::parse_bytes(s).ok_or_else(|| {
        container::Error::Usage(format!(
            "--{flag} {s:?}: give bytes like 268435456 or 256m, or -1 for no limit"
        ))
    })
}

/// The limits `update` was given: the --resources document, or the flags
/// as one (so both are checked, and refused by field name, alike).
fn update_limits(a: &UpdateArgs) -> Result<runsc_shim::cgroup::Limits, container::Error> {
    use serde_json::{json, Map, Value};
    let mut memory = Map::new();
    for (flag, key, v) in [
        ("memory", "limit", &a.memory),
        ("memory-swap", "swap", &a.memory_swap),
        ("memory-reservation", "reservation", &a.memory_reservation),
    ] {
        if let Some(v) = v {
            memory.insert(key.into(), json!(parse_bytes(flag, v)?));
        }
    }
    let mut cpu = Map::new();
    let cpu_flags = [
        ("quota", a.cpu_quota.map(|v| json!(v))),
        ("period", a.cpu_period.map(|v| json!(v))),
        ("shares", a.cpu_share.map(|v| json!(v))),
        ("cpus", a.cpuset_cpus.as_ref().map(|v| json!(v))),
        ("mems", a.cpuset_mems.as_ref().map(|v| json!(v))),
    ];
    for (key, v) in cpu_flags {
        if let Some(v) = v {
            cpu.insert(key.into(), v);
        }
    }
    let mut doc = Map::new();
    if !memory.is_empty() {
        doc.insert("memory".into(), Value::Object(memory));
    }
    if !cpu.is_empty() {
        doc.insert("cpu".into(), Value::Object(cpu));
    }
    if let Some(n) = a.pids_limit {
        doc.insert("pids".into(), json!({ "limit": n }));
    }
    if let Some(w) = a.blkio_weight {
        doc.insert("blockIO".into(), json!({ "weight": w }));
    }
    let text = match &a.resources {
        Some(_) if !doc.is_empty() => {
            return Err(container::Error::Usage(
                "update: give either --resources or limit flags, not both".into(),
            ))
        }
        Some(path) if path.as_os_str() == "-" => {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf).map_err(|e| {
                container::Error::Usage(format!("--resources -: reading standard input: {e}"))
            })?;
            buf
        }
        Some(path) => std::fs::read(path)
            .map_err(|e| container::Error::Usage(format!("--resources {}: {e}", path.display())))?,
        None => serde_json::to_vec(&Value::Object(doc))
            .map_err(|e| container::Error::Usage(format!("update: {e}")))?,
    };
    container::update_resources(&text)
}

#[derive(Debug, clap::Args)]
struct PsArgs {
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value = "table")]
    format: OutputFormat,
    /// Container id.
    id: String,
    /// ps(1) options of the table format: -ef (the default), -e, -f or -A.
    /// The table lists the guest's processes; --format json gives the
    /// sandbox's host PIDs (the Sentry, its stubs and gofers), which
    /// engines hand to host tools.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    ps_args: Vec<String>,
}

#[derive(Debug, clap::Args)]
struct ListArgs {
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value = "table")]
    format: OutputFormat,
    /// Print only the ids.
    #[arg(long, short = 'q')]
    quiet: bool,
}

#[derive(Debug, clap::Args)]
struct SpecArgs {
    /// Bundle directory to write config.json into.
    #[arg(long, short = 'b', value_name = "DIR", default_value = ".")]
    bundle: PathBuf,
    /// Accepted for runc compatibility (the template already uses the caller's ids).
    #[arg(long)]
    rootless: bool,
}

#[derive(Debug, clap::Args)]
struct EventsArgs {
    /// Seconds between records (e.g. 5 or 5s).
    #[arg(long, value_name = "SECONDS", default_value = "5s")]
    interval: String,
    /// Print one record and exit.
    #[arg(long)]
    stats: bool,
    /// Container id.
    id: String,
}

#[derive(Debug, clap::Args)]
struct GoferArgs {
    /// Directory to serve.
    #[arg(long, value_name = "DIR")]
    root: PathBuf,
    /// Inherited socket descriptor.
    #[arg(long, value_name = "FD")]
    fd: i32,
    /// Refuse every modification.
    #[arg(long)]
    ro: bool,
    /// Serve only this regular file of the directory.
    #[arg(long, value_name = "NAME")]
    file: Option<OsString>,
}

#[derive(Debug, clap::Args)]
struct BootArgs {
    /// Bundle directory.
    #[arg(long, value_name = "DIR")]
    bundle: PathBuf,
    /// Descriptor on which to report readiness.
    #[arg(long, value_name = "FD")]
    ready_fd: i32,
    /// Go on from the image in DIR (`restore`).
    #[arg(long, value_name = "DIR")]
    restore: Option<PathBuf>,
    /// Descriptors 3 .. 3+N are the first process's (`create --preserve-fds`).
    #[arg(long, value_name = "N", default_value_t = 0)]
    preserve_fds: u32,
    /// Container id.
    id: String,
}

/// `pause` iterations each side of `--platform seccomp-spin` polls before
/// it sleeps (a few µs; see the `roundtrip` example of platform-ptrace).
const SPIN: u32 = 2000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum PlatformKind {
    /// every system call stops the guest under PTRACE_SYSEMU
    Ptrace,
    /// system calls trap to a handler in the stub (seccomp SECCOMP_RET_TRAP)
    /// that hands them to the Sentry through shared memory; no ptrace stop.
    /// Each guest thread measures its hand-offs and spins on a free core
    /// while that is faster than yielding on its Sentry thread's
    #[value(alias = "systrap")]
    Seccomp,
    /// seccomp with every guest thread kept on its Sentry thread's CPU,
    /// yielding to it (what `seccomp` falls back to, never changed)
    SeccompYield,
    /// seccomp with the Sentry and each guest thread free to run on
    /// different CPUs, both spinning briefly before they sleep: faster
    /// system calls for a guest that makes many, for a second busy core
    SeccompSpin,
    /// guest code in ring 3 of a KVM virtual machine whose page tables the
    /// Sentry writes: no stub processes (needs /dev/kvm)
    Kvm,
}

/// `--network`, of `do` and of the OCI runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum NetworkKind {
    /// loopback only: nothing leaves the sandbox
    None,
    /// loopback plus a link out, for what the allow rules allow
    Sandbox,
    /// the host's network, shared (OCI mode: the container's network
    /// namespace): TCP and UDP sockets become host sockets owned by the
    /// Sentry, with no egress policy (explicitly weaker)
    Host,
}

impl NetworkKind {
    fn mode(self) -> network::Mode {
        match self {
            NetworkKind::None => network::Mode::None,
            NetworkKind::Sandbox => network::Mode::Sandbox,
            NetworkKind::Host => network::Mode::Host,
        }
    }
}

/// The line `--network host` prints on standard error before the guest
/// starts, so that nobody mistakes it for a sandboxed network.
const HOST_NETWORK_WARNING: &str = "ferrovisor: warning: --network host: the sandbox shares the host's network (no egress policy; the guest can reach and serve anything the host can)";

/// `--allow-http`, `--secret` and `--egress-log`: `do`'s, and the OCI
/// runtime's for its containers.
#[derive(Debug, clap::Args)]
struct EgressFlags {
    /// Allow HOST over HTTP(S) for these methods only (and under these
    /// path prefixes, when given); other requests get a 403 from the
    /// sandbox. HTTPS to HOST is then ended in the sandbox. Repeatable.
    #[arg(long = "allow-http", value_name = "HOST:METHOD,...[:/PATH,...]")]
    allow_http: Vec<String>,
    /// Give the guest NAME as a placeholder; the Sentry puts the value
    /// (read from FILE or, by the sandbox's host process, from its
    /// variable VAR) in its place in HTTP(S) request headers to HOST only
    /// (bodies too with `:body` at the end). Repeatable.
    #[arg(long, value_name = "NAME=@FILE:HOST,... | NAME=env:VAR:HOST,...")]
    secret: Vec<String>,
    /// Append one JSON line per attempt to leave the sandbox to FILE.
    #[arg(long = "egress-log", value_name = "FILE")]
    egress_log: Option<PathBuf>,
}

impl EgressFlags {
    fn extras(&self) -> network::Extras {
        network::Extras {
            allow_http: self.allow_http.clone(),
            secrets: self.secret.clone(),
            egress_log: self.egress_log.clone(),
        }
    }
}

/// The network the flags give, checked: like the allow rules, the egress
/// flags mean `sandbox` unless `--network` says otherwise.
fn network_of(
    mode: Option<NetworkKind>,
    allow_cidr: Vec<String>,
    allow_host: Vec<String>,
    extras: network::Extras,
) -> Result<Network, network::Error> {
    let mode = mode
        .map(NetworkKind::mode)
        .or_else(|| extras.given().then_some(network::Mode::Sandbox));
    Network::new(mode, allow_cidr, allow_host, Spelling::Flags)?.with_extras(extras)
}

/// The network of a `do` sandbox from its flags: the netstack's
/// configuration, whether TCP/UDP sockets are host sockets instead, and
/// what the guest's environment gets.
fn network_config(
    args: &DoArgs,
) -> anyhow::Result<(netstack::StackConfig, bool, network::GuestEnv)> {
    let net = network_of(
        args.network,
        args.allow_cidr.clone(),
        args.allow_host.clone(),
        args.egress.extras(),
    )?;
    // The host's own addresses stay closed unless a rule names them.
    let host_addrs = match net.egress() {
        Some(_) => container::host_addresses()
            .context("cannot list the host's addresses for the egress policy")?,
        None => Vec::new(),
    };
    let mut config = net.stack_config(host_addrs, true);
    let env = match net.egress() {
        Some(rules) => rules
            .extras
            .apply(&mut config, &args.root)
            // (as text: the message names its cause already, which `{:#}`
            // would print again)
            .map_err(anyhow::Error::msg)?,
        None => network::GuestEnv::default(),
    };
    Ok((config, net.is_host(), env))
}

#[derive(Debug, clap::Args)]
struct DoArgs {
    /// Host directory to use as the (read-only) root file system.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// How guest code runs.
    #[arg(long, value_enum, default_value = "seccomp")]
    platform: PlatformKind,
    /// Write the Sentry's debug log (including unsupported system calls) to FILE.
    #[arg(long, value_name = "FILE")]
    debug_log: Option<PathBuf>,
    /// Let the guest write anywhere: changes go to an in-memory layer over
    /// the read-only root and vanish with the sandbox.
    #[arg(long)]
    overlay: bool,
    /// Host name the guest sees.
    #[arg(long, default_value = "ferrovisor")]
    hostname: String,
    /// The guest's network: `none` (loopback only; the default without
    /// allow rules), `sandbox` (a link out for what --allow-cidr and
    /// --allow-host allow; the default with them) or `host` (the host's
    /// network, shared, with no egress policy: explicitly weaker).
    #[arg(long, value_enum, value_name = "MODE")]
    network: Option<NetworkKind>,
    /// Let the guest connect to CIDR (`10.0.0.0/8`, `192.0.2.7:443`,
    /// `[2001:db8::1]:443`); repeatable.
    #[arg(long = "allow-cidr", value_name = "CIDR[:PORT]")]
    allow_cidr: Vec<String>,
    /// Let the guest resolve DOMAIN (or any name under `*.DOMAIN`) through
    /// the sandbox's DNS and open HTTP and TLS connections that name it
    /// (SNI, Host) to what it resolved to; `DOMAIN:PORT/tcp` opens any
    /// protocol on that port. Repeatable.
    #[arg(long = "allow-host", value_name = "DOMAIN[:PORT/tcp]")]
    allow_host: Vec<String>,
    #[command(flatten)]
    egress: EgressFlags,
    /// Serve a control socket at PATH (mode 0600) while the sandbox runs:
    /// `ferrovisor update --control-socket PATH --allow-host ...` changes
    /// its egress rules.
    #[arg(long = "control-socket", value_name = "PATH")]
    control_socket: Option<PathBuf>,
    /// Mount host directory or file HOST at GUEST in the sandbox; the
    /// guest's changes there reach the host unless `:ro`. Repeatable.
    #[arg(long, short = 'v', value_name = "HOST:GUEST[:ro]")]
    volume: Vec<String>,
    /// Mount a tmpfs of the sandbox's own at PATH (over the standard one
    /// at /tmp, /run or /dev/shm too). OPTIONS: `size=` (bytes, or with a
    /// k, m or g suffix; default half the memory, as Linux) and `mode=`
    /// (octal, default 1777), comma-separated. Repeatable.
    #[arg(long, value_name = "PATH[:OPTIONS]")]
    tmpfs: Vec<String>,
    /// Most guest tasks (threads and processes) at once; past it `fork`
    /// and `clone` fail with EAGAIN. -1 for no limit of the sandbox's own.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_DO_PIDS, allow_hyphen_values = true)]
    pids: i64,
    /// When the sandbox ends, print to stderr how the platform handed
    /// system calls to the Sentry (events per hand-off mode, switches).
    #[arg(long)]
    stats: bool,
    /// On a terminal, pass the host's standard descriptors to the command
    /// as they are, instead of giving it a terminal of the sandbox's own.
    #[arg(long = "no-tty")]
    no_tty: bool,
    /// Set NAME=VALUE in the command's environment; repeatable.
    #[arg(long, short = 'e', value_name = "NAME=VALUE")]
    env: Vec<String>,
    /// Give the sandbox the host's NVIDIA GPUs through nvproxy: `all`, or
    /// indices (`0,1`). Needs a supported driver (docs/gpu.md).
    #[arg(long, value_name = "all|N,...")]
    gpus: Option<String>,
    /// With --gpus: what the sandbox may do with them (compute, utility,
    /// graphics, video, all).
    #[arg(
        long = "nvproxy-capabilities",
        value_name = "CAPS",
        default_value = "compute,utility",
        requires = "gpus"
    )]
    nvproxy_capabilities: String,
    /// With --gpus: write each forwarded and each refused NVIDIA command
    /// to FILE, one per line.
    #[arg(long = "nvproxy-log", value_name = "FILE", requires = "gpus")]
    nvproxy_log: Option<PathBuf>,
    /// With --gpus: take the driver version as VERSION instead of reading
    /// /proc/driver/nvidia/version.
    #[arg(
        long = "nvproxy-driver-version",
        value_name = "VERSION",
        requires = "gpus"
    )]
    nvproxy_driver_version: Option<String>,
    /// Internal (tests): the host directory holding the NVIDIA devices.
    #[arg(
        long = "nvproxy-dev-dir",
        value_name = "DIR",
        default_value = "/dev",
        hide = true
    )]
    nvproxy_dev_dir: PathBuf,
    /// Start from an environment of PATH and HOME only, not the caller's.
    #[arg(long = "clean-env")]
    clean_env: bool,
    /// End the sandbox (its processes killed) after DURATION (90s, 15m, 8h).
    #[arg(long, value_name = "DURATION", value_parser = runsc_shim::control::parse_duration)]
    timeout: Option<std::time::Duration>,
    /// With --control-socket: end the sandbox once no exec has run for
    /// DURATION.
    #[arg(long = "idle-timeout", value_name = "DURATION", requires = "control_socket", value_parser = runsc_shim::control::parse_duration)]
    idle_timeout: Option<std::time::Duration>,
    /// Internal (`sandbox create`): join these cgroup directories first.
    #[arg(long = "cgroup", value_name = "DIR", hide = true)]
    cgroup: Vec<PathBuf>,
    /// Most memory the guest may fill (bytes, or with a k, m or g suffix);
    /// past it the process holding the most is killed, as by Linux's
    /// memory cgroup. The guest is told of it (/proc/meminfo).
    #[arg(long, value_name = "SIZE", conflicts_with = "memory_limit")]
    memory: Option<String>,
    /// Most CPU time the sandbox may use, in CPUs (0.5: half of one, 2:
    /// two), held per 100 ms period as a cgroup's `cpu.max` is: once a
    /// period's share is spent, guest code waits for the next.
    #[arg(long, value_name = "CPUS", conflicts_with = "cpu_quota")]
    cpus: Option<f64>,
    /// Internal (`sandbox create`): the memory limit the guest is told of.
    #[arg(long = "memory-limit", value_name = "BYTES", hide = true)]
    memory_limit: Option<u64>,
    /// Internal (`sandbox create`): the CPU quota per 100 ms the guest is told of.
    #[arg(long = "cpu-quota", value_name = "MICROSECONDS", hide = true)]
    cpu_quota: Option<u64>,
    /// Run no command: the sandbox's first process is ferrovisor's own
    /// init, and programs come in through --control-socket (how
    /// `ferrovisor sandbox create` starts one).
    #[arg(long, requires = "control_socket", conflicts_with = "command")]
    init: bool,
    /// Let the guest save the sandbox into DIR: a write to
    /// /proc/ferrovisor/checkpoint saves it as the write returns (see
    /// docs/checkpoint.md).
    #[arg(long, value_name = "DIR")]
    save: Option<PathBuf>,
    /// Go on from the sandbox saved in DIR instead of starting a command,
    /// with this caller's standard descriptors; give the root and volumes
    /// it was saved with (and --init, for a sandbox that had it).
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    restore: Option<PathBuf>,
    /// The command (looked up in the guest's PATH) and its arguments.
    #[arg(
        required_unless_present_any = ["init", "restore"],
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

/// The program `exec` runs: from `--process` (an OCI `process` object) or
/// from the command line; what ferrovisor cannot honour is refused. The
/// command line's program gets `base` (the container's own process
/// privileges) with `--cap` and `--no-new-privs` over them, as runc's does.
fn exec_request(
    a: &ExecArgs,
    base: impl FnOnce() -> Result<runsc_shim::control::Privileges, container::Error>,
) -> Result<
    (
        runsc_shim::control::ExecRequest,
        Option<container::ExecTerminal>,
    ),
    container::Error,
> {
    let mut tty = a.tty;
    let mut size = None;
    if a.preserve_fds > runsc_shim::control::MAX_PRESERVED_FDS {
        return Err(container::Error::Usage(format!(
            "exec --preserve-fds {}: at most {} (what one message to the sandbox carries)",
            a.preserve_fds,
            runsc_shim::control::MAX_PRESERVED_FDS
        )));
    }
    let (mut uid, mut gid) = (0u32, 0u32);
    let mut req = if let Some(path) = &a.process {
        let text = std::fs::read(path)
            .map_err(|e| container::Error::Usage(format!("--process {}: {e}", path.display())))?;
        let bad = |e: &dyn std::fmt::Display| {
            container::Error::Usage(format!("--process {}: {e}", path.display()))
        };
        let value: serde_json::Value = serde_json::from_slice(&text).map_err(|e| bad(&e))?;
        let field = |e: runsc_shim::oci::Error| match e {
            runsc_shim::oci::Error::Field { field, reason } => {
                bad(&format_args!("{field}: {reason}"))
            }
            other => bad(&other),
        };
        runsc_shim::oci::check_process_names(&value, "").map_err(field)?;
        let p: oci_spec::runtime::Process = serde_json::from_value(value).map_err(|e| bad(&e))?;
        let privileges = runsc_shim::oci::privileges(&p, "").map_err(field)?;
        if p.terminal() == Some(true) {
            tty = true;
            size = p
                .console_size()
                .map(|b| (b.height() as u16, b.width() as u16));
        }
        uid = p.user().uid();
        gid = p.user().gid();
        runsc_shim::control::ExecRequest {
            args: p.args().clone().unwrap_or_default(),
            env: p.env().clone().unwrap_or_default(),
            cwd: p.cwd().to_string_lossy().into_owned(),
            uid,
            gid,
            privileges,
            inherit_env: false,
            preserve_fds: a.preserve_fds,
            user: None,
            tty: false,
            size: None,
        }
    } else {
        let mut privileges = base()?;
        if !a.cap.is_empty() {
            let caps = privileges.capabilities.get_or_insert_with(Default::default);
            for name in &a.cap {
                let bit = runsc_shim::oci::capability_bit(name).ok_or_else(|| {
                    container::Error::Usage(format!(
                        "--cap {name:?} is not a capability (give a name like CAP_CHOWN)"
                    ))
                })?;
                caps.bounding |= bit;
                caps.effective |= bit;
                caps.permitted |= bit;
                // (as runc: ambient only where inheritable ones are given,
                // without which it would not hold)
                if caps.inheritable != 0 {
                    caps.ambient |= bit;
                }
            }
        }
        if a.no_new_privs {
            privileges.no_new_privileges = true;
        }
        runsc_shim::control::ExecRequest {
            args: a.command.clone(),
            env: vec![runsc_shim::control::DEFAULT_PATH.into()],
            cwd: "/".into(),
            uid,
            gid,
            privileges,
            inherit_env: false,
            preserve_fds: a.preserve_fds,
            user: None,
            tty: false,
            size: None,
        }
    };
    if req.args.is_empty() {
        return Err(container::Error::Usage(
            "exec: give the command to run, or --process FILE".into(),
        ));
    }
    if let Some(cwd) = &a.cwd {
        req.cwd = cwd.to_string_lossy().into_owned();
    }
    req.env.extend(a.env.iter().cloned());
    if let Some(u) = &a.user {
        let (us, gs) = u.split_once(':').unwrap_or((u, "0"));
        match (us.parse(), gs.parse()) {
            (Ok(u), Ok(g)) => (req.uid, req.gid) = (u, g),
            _ => {
                return Err(container::Error::Usage(format!(
                    "--user {u:?}: give UID[:GID] as numbers"
                )))
            }
        }
    }
    // (runc's `--additional-gids` add to the process's own)
    let groups = &mut req.privileges.groups;
    groups.extend(&a.additional_gids);
    groups.sort_unstable();
    groups.dedup();
    let terminal = match (tty, &a.console_socket) {
        (true, socket) => Some(container::ExecTerminal {
            console_socket: socket.clone(),
            size,
        }),
        (false, Some(_)) => {
            return Err(container::Error::Usage(
                "exec: --console-socket is for --tty (or process.terminal)".into(),
            ))
        }
        (false, None) => None,
    };
    Ok((req, terminal))
}

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("ferrovisor: {msg}");
    ExitCode::from(code)
}

fn init_logging(path: &std::path::Path) -> anyhow::Result<()> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("--debug-log {}", path.display()))?;
    tracing_subscriber::fmt()
        .with_writer(std::sync::Mutex::new(file))
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .init();
    Ok(())
}

fn run_do(args: DoArgs) -> ExitCode {
    if let Some(log) = &args.debug_log {
        if let Err(e) = init_logging(log) {
            return fail(2, format_args!("{e:#}"));
        }
    }
    // Opened while this process may: the Sentry later runs unprivileged.
    let kvm = match args.platform {
        PlatformKind::Kvm => match platform_kvm::Device::open() {
            Ok(d) => Some(d),
            Err(e) => return fail(125, e),
        },
        _ => None,
    };
    let (network, host_network, guest_env) = match network_config(&args) {
        Ok(n) => n,
        Err(e) => return fail(2, format_args!("{e:#}")),
    };
    let memory = match args.memory.as_deref().map(runsc_shim::cgroup::parse_bytes) {
        None => None,
        Some(Some(n)) if n > 0 => Some(n as u64),
        Some(_) => {
            return fail(
                2,
                format_args!("--memory: give bytes like 268435456 or 256m"),
            )
        }
    };
    let cpus = match args.cpus {
        None => None,
        Some(c) if (0.01..=1024.0).contains(&c) => Some((c * 100_000.0) as u64),
        Some(c) => {
            return fail(
                2,
                format_args!("--cpus {c}: give a number of CPUs like 0.5 or 2"),
            )
        }
    };
    let max_tasks = match args.pids {
        -1 => None,
        n if n > 0 => Some(n as usize),
        n => {
            return fail(
                2,
                format_args!("--pids {n}: give a positive number of tasks, or -1 for no limit"),
            )
        }
    };
    if host_network {
        eprintln!("{HOST_NETWORK_WARNING}");
    }
    // First, before any process of the sandbox's exists: they all follow.
    for dir in &args.cgroup {
        if let Err(e) = std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string()) {
            return fail(
                125,
                format_args!("joining the cgroup {}: {e}", dir.display()),
            );
        }
    }
    // ^C at the terminal, or `kill` of this process, reaches the guest's
    // first process (before any thread starts, so all inherit the mask).
    if let Err(e) = sentry::hostsig::block_forwarded() {
        return fail(125, format_args!("blocking signals: {e}"));
    }
    let root = match std::fs::File::open(&args.root) {
        Ok(f) => f,
        Err(e) => {
            return fail(
                2,
                format_args!(
                    "--root {}: {e} (give an existing directory to use as the sandbox's root)",
                    args.root.display()
                ),
            );
        }
    };
    match root.metadata() {
        Ok(m) if m.is_dir() => {}
        _ => {
            return fail(
                2,
                format_args!("--root {}: not a directory", args.root.display()),
            )
        }
    }
    // The working directory carries over when it exists inside the root.
    let cwd = std::env::current_dir()
        .ok()
        .and_then(|c| {
            if args.root == std::path::Path::new("/") {
                Some(c)
            } else {
                None
            }
        })
        .map(|c| c.as_os_str().as_bytes().to_vec())
        .unwrap_or_else(|| b"/".to_vec());
    drop(root);
    let mut mounts = Vec::new();
    for spec in &args.volume {
        let (host, guest, ro) = match runsc_shim::gofer_proc::parse_volume(spec) {
            Ok(v) => v,
            Err(e) => return fail(2, e),
        };
        match runsc_shim::gofer_proc::volume_mount(&host, &guest, ro) {
            Ok(m) => mounts.push(m),
            Err(e) => return fail(2, format_args!("--volume {spec}: {e}")),
        }
    }
    for spec in &args.tmpfs {
        match runsc_shim::oci::parse_tmpfs(spec) {
            Ok((dest, mode, size)) => mounts.push(sentry::Mount {
                dest: dest.into_bytes(),
                source: sentry::MountSource::Tmpfs { mode, size },
            }),
            Err(e) => return fail(2, e),
        }
    }
    // What the guest sees of the host's network, read while this process
    // may still ask the host (the Sentry will not be able to).
    let host_interfaces = if host_network {
        match runsc_shim::host_net::snapshot() {
            Ok(t) => Some(t),
            Err(e) => {
                return fail(
                    125,
                    format_args!("--network host: listing the host's interfaces: {e}"),
                )
            }
        }
    } else {
        None
    };
    // Bound while this process may still make host paths; served by the
    // Sentry once the sandbox runs.
    let control = match &args.control_socket {
        Some(path) => match runsc_shim::control::bind(path).and_then(|l| {
            std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .map(|()| l)
        }) {
            Ok(l) => Some(l),
            Err(e) => return fail(2, format_args!("--control-socket {}: {e}", path.display())),
        },
        None => None,
    };
    // The image file, opened or read while this process may still open
    // host paths.
    // (the image restored from first: a save into the same directory
    // then gets a new file, since the restored memory shares this one's)
    let restore = match &args.restore {
        Some(dir) => match container::read_image(dir) {
            Ok(image) => Some(image),
            Err(e) => return fail(2, format_args!("--restore {e}")),
        },
        None => None,
    };
    let save = match &args.save {
        Some(dir) => match container::open_image_for_save(dir) {
            Ok(f) => Some(f),
            Err(e) => return fail(2, format_args!("--save {}: {e}", dir.display())),
        },
        None => None,
    };
    let client = match runsc_shim::gofer_proc::spawn(&args.root) {
        Ok(c) => c,
        Err(e) => return fail(125, e),
    };
    let gpu = match &args.gpus {
        None => None,
        Some(which) => match runsc_shim::gpu::config(
            which,
            &args.nvproxy_capabilities,
            args.nvproxy_driver_version.as_deref(),
            &args.nvproxy_dev_dir,
            args.nvproxy_log.as_deref(),
        ) {
            Ok(g) => Some(g),
            Err(e) => return fail(125, e),
        },
    };
    // At a terminal the command gets one of the sandbox's (job control,
    // raw keys, SIGWINCH), relayed to this one in raw mode.
    let terminal =
        !args.no_tty && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let config = sentry::SandboxConfig {
        root: client,
        _marker: std::marker::PhantomData,
        root_writes: if args.overlay {
            sentry::RootWrites::Memory
        } else {
            sentry::RootWrites::ReadOnly
        },
        tmpfs_tmp: true,
        argv: args
            .command
            .into_iter()
            .map(OsStringExt::into_vec)
            .collect(),
        envp: {
            let mut env = if args.clean_env {
                vec![
                    runsc_shim::control::DEFAULT_PATH.as_bytes().to_vec(),
                    b"HOME=/root".to_vec(),
                ]
            } else {
                container::host_env()
            };
            for e in &args.env {
                let name = e.split('=').next().unwrap_or_default();
                env.retain(|o| o.split(|&b| b == b'=').next() != Some(name.as_bytes()));
                env.push(e.clone().into_bytes());
            }
            guest_env.edit(&mut env);
            env
        },
        cwd,
        hostname: args.hostname,
        network,
        host_network,
        interfaces: host_interfaces,
        builtin_init: args.init,
        on_settled: None,
        seccomp: None,
        on_start: {
            let timeouts = runsc_shim::control::Timeouts {
                timeout: args.timeout,
                idle: args.idle_timeout,
            };
            Some(sentry::StartHook(Box::new(move |kernel| {
                runsc_shim::control::watch_timeouts(kernel.clone(), timeouts);
                if let Some(listener) = control {
                    if let Err(e) = runsc_shim::control::serve(listener, kernel) {
                        tracing::warn!("no control socket: {e}");
                    }
                }
            })))
        },
        mounts,
        ids: None,
        // (a root guest has every capability, as before)
        privileges: sentry::Privileges::default(),
        memory_limit: memory.or(args.memory_limit),
        memory_watch: if memory.is_some() {
            sentry::MemoryWatch::Say
        } else {
            sentry::MemoryWatch::Off
        },
        // The guest's first process is the sandbox's init, which would
        // drop a ^C it has no handler for; `do` stands for the command at
        // the user's terminal, so such a signal ends it as it would natively.
        host_signals: sentry::hostsig::HostSignals::Terminate,
        terminal,
        max_tasks,
        // Without --cpus (or a cgroup's quota, from `sandbox create`),
        // `cpu.max` says `max 100000`.
        cpu_max: sentry::CpuMax {
            quota: cpus.or(args.cpu_quota),
            ..sentry::CpuMax::default()
        },
        cpu_watch: cpus.is_some(),
        masked_paths: Vec::new(),
        readonly_paths: Vec::new(),
        sysctls: Vec::new(),
        save,
        restore,
        preserved_fds: Vec::new(),
        mempolicy: Default::default(),
        gpu,
    };
    // Last, with the gofers started: the Sentry's own process in new
    // namespaces, as an unprivileged user.
    let tty = if terminal {
        match runsc_shim::confine::Tty::make_raw() {
            Ok(t) => Some(t),
            Err(e) => return fail(125, format_args!("putting the terminal in raw mode: {e}")),
        }
    } else {
        None
    };
    let confinement = runsc_shim::confine::Confinement {
        host_sockets: config.host_network || matches!(config.network.mode, netstack::Mode::Egress),
        host_network: config.host_network,
        terminal: tty,
    };
    if let Err(e) = runsc_shim::confine::split(confinement) {
        if let Some(t) = &tty {
            t.restore();
        }
        return fail(125, e);
    }
    // In a network namespace of its own the Sentry holds nothing there:
    // its stubs may share it.
    let stub_net_ns = confinement.host_sockets;
    let platform = args.platform;
    let result = sentry::run(config, |memfd| {
        if let Some(device) = kvm {
            return platform_kvm::KvmPlatform::new(device, memfd)
                .map(|p| Box::new(p) as Box<dyn platform::Platform>);
        }
        let options = match platform {
            PlatformKind::Ptrace => platform_ptrace::PtraceOptions::default(),
            PlatformKind::Seccomp => platform_ptrace::PtraceOptions {
                mode: platform_ptrace::Mode::SeccompTrap,
                ..Default::default()
            },
            PlatformKind::SeccompYield => platform_ptrace::PtraceOptions {
                mode: platform_ptrace::Mode::SeccompTrap,
                adaptive: false,
                ..Default::default()
            },
            PlatformKind::SeccompSpin => platform_ptrace::PtraceOptions {
                mode: platform_ptrace::Mode::SeccompTrap,
                pin_cpu: false,
                spin: SPIN,
                yields: 0,
                ..Default::default()
            },
            PlatformKind::Kvm => unreachable!("made above"),
        };
        platform_ptrace::PtracePlatform::with_options(
            memfd,
            platform_ptrace::PtraceOptions {
                stub_net_ns,
                ..options
            },
        )
        .map(|p| Box::new(p) as Box<dyn platform::Platform>)
    });
    let h = platform_ptrace::handoff_stats();
    tracing::info!(?h, "hand-offs");
    if args.stats && platform == PlatformKind::Kvm {
        let k = platform_kvm::exit_stats();
        eprintln!(
            "ferrovisor: kvm exits: {} system calls, {} faults, {} kicks, {} answered inside (one exit and one KVM_RUN each)",
            k.syscalls, k.faults, k.kicks, k.inner
        );
    } else if args.stats && platform != PlatformKind::Seccomp {
        eprintln!("ferrovisor: hand-offs: fixed on this platform (only `seccomp` chooses)");
    } else if args.stats {
        eprintln!(
            "ferrovisor: hand-offs: {} yielding, {} spinning; {} switches to spin, {} back; the Sentry slept for {}",
            h.yield_events, h.spin_events, h.to_spin, h.to_yield, h.sentry_sleeps
        );
    }
    match result {
        Ok(status) => ExitCode::from(status.shell_code() as u8),
        Err(e) => {
            let code = e.exit_code() as u8;
            fail(code, e)
        }
    }
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// `unix:PATH` (mode 0600; default `unix:<state root>/api.sock`) or
    /// `tcp:127.0.0.1:PORT` (with --token-file).
    #[arg(long, value_name = "ADDRESS")]
    listen: Option<String>,
    /// Require `Authorization: Bearer TOKEN`, TOKEN being FILE's first line.
    #[arg(long = "token-file", value_name = "FILE")]
    token_file: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct McpArgs {
    /// The sandbox's name (default mcp-PID).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    #[command(flatten)]
    options: runsc_shim::sandbox::CreateOptions,
}

fn run_serve(root: &std::path::Path, a: ServeArgs) -> ExitCode {
    use runsc_shim::sandbox::api;
    let listen = a
        .listen
        .unwrap_or_else(|| format!("unix:{}", root.join("api.sock").display()));
    let listen = match api::Listen::parse(&listen) {
        Ok(l) => l,
        Err(e) => return fail(2, e),
    };
    let token = match &a.token_file {
        None => None,
        Some(f) => match std::fs::read_to_string(f) {
            Ok(t) if !t.trim().is_empty() => {
                Some(t.lines().next().unwrap_or_default().trim().to_string())
            }
            Ok(_) => return fail(2, format_args!("--token-file {}: empty", f.display())),
            Err(e) => return fail(2, format_args!("--token-file {}: {e}", f.display())),
        },
    };
    if let Err(e) = std::fs::create_dir_all(root) {
        return fail(2, format_args!("{}: {e}", root.display()));
    }
    match api::serve(api::Server::new(sandbox_store(root), token), &listen) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(1, e),
    }
}

/// The sandboxes of state root `root`, started by this very binary.
fn sandbox_store(root: &std::path::Path) -> runsc_shim::sandbox::Store {
    let exe = std::env::current_exe().unwrap_or_else(|_| "ferrovisor".into());
    runsc_shim::sandbox::Store::new(root, exe)
}

/// The command line as clap reads it: containerd's runc client spells one
/// of runc's flags with a single dash (`restore -no-subreaper`).
fn runc_argv() -> impl Iterator<Item = std::ffi::OsString> {
    std::env::args_os().map(|a| {
        if a == "-no-subreaper" {
            "--no-subreaper".into()
        } else {
            a
        }
    })
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse_from(runc_argv()) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            let text = e.to_string();
            // The first paragraph, on one line: clap puts the names of
            // missing arguments on the lines after the first.
            let first = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ");
            let first = first.trim_start_matches("error: ");
            let first = if first.is_empty() {
                "invalid arguments"
            } else {
                first
            };
            return fail(2, format_args!("{first} (see 'ferrovisor --help')"));
        }
    };
    let format = match cli.log_format {
        LogFormatArg::Text => LogFormat::Text,
        LogFormatArg::Json => LogFormat::Json,
    };
    if matches!(cli.command, Command::Do(_))
        && (cli.network.is_some()
            || !cli.allow_cidr.is_empty()
            || !cli.allow_host.is_empty()
            || cli.egress.extras().given())
    {
        return fail(
            2,
            "--network and the egress flags before 'do' are the OCI runtime's: give them after 'do' (ferrovisor do --network ...)",
        );
    }
    let network = match network_of(
        cli.network,
        cli.allow_cidr,
        cli.allow_host,
        cli.egress.extras(),
    ) {
        Ok(n) => n,
        Err(e) => return fail(2, e),
    };
    let rt = Runtime {
        state: StateDir::new(&cli.root),
        exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("ferrovisor")),
        log: cli.log.clone(),
        log_format: format,
        debug: cli.debug,
        network,
        overlay: cli.overlay,
        platform: cli.platform,
        nvproxy: container::NvproxyFlags {
            on: cli.nvproxy,
            capabilities: cli.nvproxy_capabilities.clone(),
            driver_version: cli.nvproxy_driver_version.clone(),
            dev_dir: cli.nvproxy_dev_dir.clone(),
        },
    };
    match cli.command {
        Command::Do(args) => run_do(args),
        Command::Sandbox(cmd) => runsc_shim::sandbox::cli::run(&sandbox_store(&cli.root), cmd),
        Command::Serve(a) => run_serve(&cli.root, a),
        Command::Mcp(a) => {
            let name = a
                .name
                .unwrap_or_else(|| format!("mcp-{}", std::process::id()));
            match runsc_shim::sandbox::mcp::serve_stdio(sandbox_store(&cli.root), name, &a.options)
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(1, e),
            }
        }
        Command::Syscalls(args) => {
            let text = if args.host_filters {
                sentry::host_filters_markdown(
                    platform_kvm::HOST_IOCTLS,
                    platform_kvm::fd_window(20_000).ok(),
                )
            } else if args.markdown {
                sentry::syscall_table_markdown()
            } else {
                sentry::syscall_table()
            };
            // A reader that stops early (`| head`) is no error.
            let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
            ExitCode::SUCCESS
        }
        Command::Nvproxy(NvproxyCommand::ListSupportedDrivers) => {
            let mut out = String::new();
            for v in nvproxy::supported() {
                out.push_str(&format!("{v}\n"));
            }
            let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes());
            ExitCode::SUCCESS
        }
        Command::Nvproxy(NvproxyCommand::CheckHost) => {
            let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok();
            match nvproxy::host_abi(text.as_deref()) {
                Ok((v, abi)) => {
                    println!(
                        "NVIDIA driver {v}: supported ({} frontend escapes, {} UVM requests, {} control commands, {} classes)",
                        abi.frontend.len(),
                        abi.uvm.len(),
                        abi.control.len(),
                        abi.alloc.len()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("ferrovisor: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::DeviceOpener(a) => match gofer::jail::inherited_socket(a.fd) {
            Ok(sock) => gofer::devices::run_opener_process(&a.dir, a.allow, sock),
            Err(e) => {
                eprintln!("ferrovisor device-opener: {e}");
                ExitCode::from(2)
            }
        },
        Command::Gofer(args) => {
            ferrovisor_lib_gofer(&args.root, args.file.as_deref(), args.fd, args.ro)
        }
        Command::Boot(args) => {
            if let Err(e) = logging::init(cli.log.as_deref(), format, cli.debug, false) {
                return fail(1, e);
            }
            let code = container::boot(
                &rt.state,
                &args.id,
                &args.bundle,
                container::Handed {
                    ready_fd: args.ready_fd,
                    preserve_fds: args.preserve_fds,
                },
                container::BootFlags {
                    network: &rt.network,
                    overlay: rt.overlay,
                    platform: rt.platform,
                    nvproxy: &rt.nvproxy,
                },
                args.restore.as_deref(),
            );
            ExitCode::from(code as u8)
        }
        command => {
            if let Err(e) = logging::init(cli.log.as_deref(), format, cli.debug, true) {
                return fail(1, e);
            }
            // What an engine asked for exactly (e.g. containerd's runc shim).
            tracing::debug!("argv: {:?}", std::env::args_os().collect::<Vec<_>>());
            match runtime_command(&rt, command) {
                Ok(code) => code,
                Err(e) => {
                    // Into the log file (containerd's runc shim reads the
                    // last error there), and always one line on stderr.
                    if cli.log.is_some() {
                        tracing::error!("{e}");
                    }
                    eprintln!("ferrovisor: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

fn print_json(v: &impl serde::Serialize) -> Result<(), container::Error> {
    let text = serde_json::to_string_pretty(v)
        .map_err(|e| container::Error::Usage(format!("serializing output: {e}")))?;
    println!("{text}");
    Ok(())
}

fn create_options(a: &CreateArgs) -> CreateOptions {
    CreateOptions {
        bundle: a.bundle.clone(),
        console_socket: a.console_socket.clone(),
        pid_file: a.pid_file.clone(),
        preserve_fds: a.preserve_fds,
        foreground: false,
        stdio: None,
        restore: None,
    }
}

/// Parses runc's `--interval` (a Go duration like `5s`, `500ms`, or plain
/// seconds).
fn parse_interval(s: &str) -> Result<std::time::Duration, container::Error> {
    match runsc_shim::control::parse_duration(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(container::Error::Usage(format!(
            "--interval {s:?}: give seconds like 5 or 5s, or 500ms"
        ))),
    }
}

fn runtime_command(rt: &Runtime, command: Command) -> Result<ExitCode, container::Error> {
    use container::Error;
    match command {
        Command::Do(_)
        | Command::Sandbox(_)
        | Command::Serve(_)
        | Command::Mcp(_)
        | Command::Boot(_)
        | Command::Gofer(_)
        | Command::Nvproxy(_)
        | Command::DeviceOpener(_)
        | Command::Syscalls(_) => {
            unreachable!("handled by main")
        }
        Command::Create(a) => {
            rt.create(&a.id, &create_options(&a))?;
        }
        Command::Start(a) => rt.start(&a.id)?,
        Command::Run(a) => {
            let code = rt.run(&a.create.id, &create_options(&a.create), a.detach)?;
            return Ok(ExitCode::from(code as u8));
        }
        Command::State(a) => print_json(&rt.state(&a.id)?)?,
        Command::Kill(a) => {
            let sig = container::parse_signal(&a.signal)?;
            match rt.kill(&a.id, sig) {
                // `--all` signals what is left of the container, so one that
                // has stopped is no error (runc-kill(8))
                Err(Error::WrongStatus {
                    status: runsc_shim::state::Status::Stopped,
                    ..
                }) if a.all => {}
                r => r?,
            }
        }
        Command::Delete(a) => rt.delete(&a.id, a.force)?,
        Command::Exec(a) => {
            let base = || {
                let bundle = rt.state(&a.id)?.bundle;
                let process = runsc_shim::oci::load(&bundle)
                    .map_err(|e| Error::Usage(format!("exec: the container's {e}")))?
                    .spec
                    .process()
                    .clone();
                match process {
                    Some(p) => runsc_shim::oci::privileges(&p, "process.")
                        .map_err(|e| Error::Usage(format!("exec: the container's {e}"))),
                    None => Ok(Default::default()),
                }
            };
            let (req, terminal) = exec_request(&a, base)?;
            let code = rt.exec(
                &a.id,
                &req,
                terminal.as_ref(),
                a.detach,
                a.pid_file.as_deref(),
            )?;
            return Ok(ExitCode::from(code as u8));
        }
        Command::Ps(a) => {
            if a.format == OutputFormat::Json && !a.ps_args.is_empty() {
                return Err(Error::Usage(
                    "ps: ps(1) options go with the table format, not --format json".into(),
                ));
            }
            match a.format {
                OutputFormat::Json => print_json(&rt.ps(&a.id)?)?,
                OutputFormat::Table => {
                    check_ps_args(&a.ps_args)?;
                    let procs = rt.guest_processes(&a.id)?;
                    print!("{}", container::ps_table(&procs, &rt.state(&a.id)?.rootfs));
                }
            }
        }
        Command::List(a) => {
            let all = rt.list()?;
            if a.quiet {
                for s in &all {
                    println!("{}", s.id);
                }
            } else {
                match a.format {
                    OutputFormat::Json => print_json(&all)?,
                    OutputFormat::Table => {
                        println!(
                            "{:<20} {:<8} {:<10} {:<40} CREATED",
                            "ID", "PID", "STATUS", "BUNDLE"
                        );
                        for s in &all {
                            println!(
                                "{:<20} {:<8} {:<10} {:<40} {}",
                                s.id,
                                s.pid,
                                s.status,
                                s.bundle.display(),
                                s.created
                            );
                        }
                    }
                }
            }
        }
        Command::Spec(a) => {
            Runtime::spec(&a.bundle)?;
        }
        Command::Events(a) => {
            let interval = parse_interval(&a.interval)?;
            let mut out = std::io::stdout().lock();
            rt.events(&a.id, interval, a.stats, &mut out)?;
        }
        Command::Wait(a) => {
            let code = rt.wait(&a.id)?;
            print_json(&serde_json::json!({ "id": a.id, "exitStatus": code }))?;
        }
        Command::Features => print_json(&container::features(rt.overlay))?,
        Command::Update(a) => {
            let egress = runsc_shim::control::EgressUpdate {
                allow: a.allow_host.clone(),
                deny: a.deny_host.clone(),
            };
            network::check_host_update(&egress.allow, &egress.deny)
                .map_err(|e| container::Error::Usage(e.to_string()))?;
            let limits = update_limits(&a)?;
            match (&a.id, &a.control_socket) {
                (Some(id), _) => {
                    rt.update(id, &limits)?;
                    if egress != Default::default() {
                        rt.update_egress(id, &egress)?;
                    }
                }
                (None, Some(socket)) => {
                    if limits.any() {
                        return Err(container::Error::Usage(
                            "--control-socket: only --allow-host and --deny-host apply to a `do` sandbox"
                                .into(),
                        ));
                    }
                    if egress == Default::default() {
                        return Err(container::Error::Usage(
                            "--control-socket: give --allow-host or --deny-host".into(),
                        ));
                    }
                    runsc_shim::control::update_egress(socket, &egress).map_err(|why| {
                        container::Error::Boot(format!("{}: {why}", socket.display()))
                    })?;
                }
                (None, None) => return Err(container::Error::Usage("give a container id".into())),
            }
        }
        Command::Checkpoint(a) => {
            if let Some(flag) = a.criu.refused() {
                return Err(Error::NotSupported(format!("checkpoint {flag}")));
            }
            rt.checkpoint(&a.id, &a.image_path, a.leave_running)?;
        }
        Command::Fork(a) => rt.fork(&a.id, &a.new_id)?,
        Command::Restore(a) => {
            if let Some(flag) = a.criu.refused() {
                return Err(Error::NotSupported(format!("restore {flag}")));
            }
            let opts = CreateOptions {
                restore: Some(a.image_path.clone()),
                ..create_options(&a.create)
            };
            let code = rt.run(&a.create.id, &opts, a.detach)?;
            return Ok(ExitCode::from(code as u8));
        }
        Command::Pause(a) => rt.pause(&a.id)?,
        Command::Resume(a) => rt.resume(&a.id)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The `ps -ef` options `ps`'s table takes (its columns are those).
fn check_ps_args(args: &[String]) -> Result<(), container::Error> {
    let ef = |a: &String| {
        a.len() > 1 && a.starts_with('-') && a[1..].chars().all(|c| matches!(c, 'e' | 'f' | 'A'))
    };
    match args.iter().find(|a| !ef(a)) {
        None => Ok(()),
        Some(a) => Err(container::Error::Usage(format!(
            "ps: {a}: the guest's processes are listed in ps -ef's columns; for others run \
             ps inside the container (ferrovisor exec ID ps {})",
            args.join(" ")
        ))),
    }
}

fn ferrovisor_lib_gofer(
    root: &std::path::Path,
    file: Option<&std::ffi::OsStr>,
    fd: i32,
    ro: bool,
) -> ExitCode {
    // The gofer's own failures go to stderr: it has no log file.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .init();
    runsc_shim::gofer_proc::run(root, file, fd, ro)
}
