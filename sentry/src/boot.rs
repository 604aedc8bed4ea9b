//! Starting a sandbox: the memory file, the file system tree and its
//! mounts, the network, the kernel, the Sentry's own seccomp filter, and
//! the first process. The one place that names concrete file systems and
//! socket families together.

use std::fmt;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

use platform::Platform;

use crate::kernel::task::ExitStatus;
use crate::kernel::{
    run_process, start_process, CpuMax, Error, Kernel, Privileges, ProcTable, ProcessSpec, Stdio,
    UtsNames,
};
use crate::mm::memfile::MemoryFile;
use crate::vfs::FileSystem;
pub use crate::vfs::RootWrites;

/// What to run and how.
#[derive(Debug)]
pub struct SandboxConfig<'a> {
    /// the gofer serving the host directory that becomes the guest's
    /// read-only root
    pub root: gofer::client::Client,
    /// ties the config to the caller's borrows (none today)
    pub _marker: std::marker::PhantomData<&'a ()>,
    /// what the guest's writes to the root do
    pub root_writes: RootWrites,
    /// `/tmp` and `/run` are tmpfs of the sandbox's own (`do`), or the
    /// root's own directories (OCI: what `config.json` mounts, and nothing
    /// else, is mounted, as under runc)
    pub tmpfs_tmp: bool,
    /// the command and its arguments (`argv[0]` is looked up in PATH when
    /// it has no `/`); unused with `builtin_init`
    pub argv: Vec<Vec<u8>>,
    /// the first process is the Sentry's own init
    /// ([`crate::loader::init`]), which only reaps orphans: a sandbox
    /// that lives for the programs `exec` brings in
    pub builtin_init: bool,
    /// environment
    pub envp: Vec<Vec<u8>>,
    /// initial working directory (guest path); `/` when it does not resolve
    pub cwd: Vec<u8>,
    /// guest host name
    pub hostname: String,
    /// the network: loopback only, or with a link out and its egress policy
    pub network: netstack::StackConfig,
    /// `--network host`: the guest's `AF_INET`/`AF_INET6` TCP and UDP
    /// sockets become host sockets in the Sentry's network namespace, with
    /// no egress policy (explicitly weaker; `network` must then be
    /// loopback-only, and serves nothing)
    pub host_network: bool,
    /// What the guest sees of its network (interfaces, addresses, routes)
    /// when the runtime knows it, read before the Sentry was confined (its
    /// filter lets it ask the host nothing of the kind): with
    /// `host_network`, a snapshot of the host's network (`None`: loopback
    /// only); with the netstack's `Egress` mode in OCI mode, the
    /// container's own interface, whose addresses `network.link` gives the
    /// netstack (`None`: the `eth0` of the default link, as `do` has).
    pub interfaces: Option<crate::socket::netlink::NetTable>,
    /// called once the sandbox exists, before its first process runs (the
    /// OCI runtime serves `exec` from it)
    pub on_start: Option<StartHook>,
    /// called once the first process has started: the first time its main
    /// thread blocks (a program that handles signals has installed its
    /// handlers by then), or when it ends (the OCI runtime's `start`
    /// returns then, so that a signal sent right after it is not dropped
    /// for want of a handler not yet installed)
    pub on_settled: Option<SettleHook>,
    /// a seccomp program every process started from outside (the first,
    /// and each `exec`) runs under, as an OCI `linux.seccomp` asks
    pub seccomp: Option<Vec<abi::bpf::SockFilter>>,
    /// file systems mounted over paths of the root, in order
    pub mounts: Vec<Mount>,
    /// uid and gid of the first process; the Sentry's own when `None`
    pub ids: Option<(u32, u32)>,
    /// the first process's capabilities, `no_new_privs` and resource limits
    pub privileges: Privileges,
    /// the sandbox's memory limit (an OCI `linux.resources.memory.limit`):
    /// what `/proc/meminfo` and `sysinfo` report when smaller than the
    /// host's memory, and what default tmpfs sizes are half of
    pub memory_limit: Option<u64>,
    /// whether the Sentry holds `memory_limit` itself (no host cgroup
    /// does): past it, the guest process holding the most is killed
    pub memory_watch: MemoryWatch,
    /// what host signals forwarded to the guest's first process mean
    pub host_signals: crate::kernel::hostsig::HostSignals,
    /// the Sentry's descriptors 0 and 1 are a terminal in raw mode: the
    /// first process gets a pty of the sandbox's as its controlling
    /// terminal, relayed to them ([`crate::fsimpl::devpts::Console`])
    pub terminal: bool,
    /// most tasks (threads and processes, zombies included) the guest may
    /// hold at once: the container's `pids.limit`, counted in the Sentry
    /// so that the guest sees runc's limit, not the sandbox's host tasks
    pub max_tasks: Option<usize>,
    /// the sandbox's CPU bandwidth limit (an OCI
    /// `linux.resources.cpu.quota`/`period`): what the guest's
    /// `/sys/fs/cgroup/cpu.max` says
    pub cpu_max: CpuMax,
    /// whether the Sentry holds `cpu_max` itself (no host cgroup does):
    /// once a period's quota is spent, guest code waits for the next
    pub cpu_watch: bool,
    /// guest paths masked (OCI `linux.maskedPaths`): a directory shows
    /// empty and read-only, anything else as the null device; a path that
    /// does not exist is skipped
    pub masked_paths: Vec<Vec<u8>>,
    /// guest paths made read-only (OCI `linux.readonlyPaths`); a path that
    /// does not exist is skipped
    pub readonly_paths: Vec<Vec<u8>>,
    /// namespaced sysctls (OCI `linux.sysctl`), each one of those
    /// [`crate::fsimpl::sysctl`] emulates
    pub sysctls: Vec<(String, String)>,
    /// where a save the guest asks for goes (`do --save`); `None`: the
    /// guest cannot save the sandbox
    pub save: Option<std::fs::File>,
    /// a sandbox image to go on from instead of starting `argv` (`do
    /// --restore`)
    pub restore: Option<crate::Image>,
    /// host descriptors that become the first process's 3, 4, ... (runc's
    /// `--preserve-fds`)
    pub preserved_fds: Vec<std::os::fd::OwnedFd>,
    /// the first process's NUMA policy (OCI `linux.memoryPolicy`)
    pub mempolicy: crate::NumaPolicy,
    /// an NVIDIA GPU through nvproxy (`do --gpus`); `None`: no
    /// `/dev/nvidia*`, and no NVIDIA ioctl in the host filter
    pub gpu: Option<GpuConfig>,
}

/// What a sandbox with a GPU is given.
#[derive(Debug)]
pub struct GpuConfig {
    /// the running driver's table and the capabilities granted
    pub abi: nvproxy::Abi,
    pub caps: nvproxy::Caps,
    /// the process outside the Sentry that opens the devices
    pub opener: gofer::devices::DeviceOpener,
    /// the devices `/dev` shows
    pub devices: Vec<crate::vfs::NvDevice>,
    /// where each forwarded and refused command is written (`--nvproxy-log`)
    pub log: Option<std::fs::File>,
}

/// Whether the Sentry holds the sandbox's memory limit itself, and who
/// hears of a process it kills for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemoryWatch {
    /// no: a host cgroup holds it, or there is none
    #[default]
    Off,
    /// yes, and the log says which process it killed (a container's
    /// stderr is its program's)
    Log,
    /// yes, and a line on the Sentry's stderr says so too (`do`: the
    /// user's terminal)
    Say,
}

/// A file system mounted over a guest path.
#[derive(Debug)]
pub struct Mount {
    /// absolute guest path
    pub dest: Vec<u8>,
    /// what is mounted there
    pub source: MountSource,
}

/// What a [`Mount`] puts in the tree.
#[derive(Debug)]
pub enum MountSource {
    /// a host directory or file, served by its own gofer
    Volume {
        /// the gofer
        client: gofer::client::Client,
        /// the guest's writes get `EROFS`
        read_only: bool,
    },
    /// a tmpfs of the sandbox's own
    Tmpfs {
        /// the root directory's permissions
        mode: u32,
        /// size limit in bytes; `None`: half the sandbox's memory, as
        /// Linux sizes a tmpfs mounted without `size=`
        size: Option<u64>,
    },
}

/// See [`SandboxConfig::on_start`].
pub struct StartHook(pub Box<dyn FnOnce(std::sync::Weak<Kernel>) + Send>);

impl fmt::Debug for StartHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StartHook")
    }
}

/// See [`SandboxConfig::on_settled`].
pub struct SettleHook(pub Box<dyn FnOnce() + Send>);

impl fmt::Debug for SettleHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SettleHook")
    }
}

/// Builds a sandbox and runs `config.argv` in it to completion.
///
/// `make_platform` receives the memory file descriptor and returns the
/// platform that will run guest code (the caller picks the concrete one).
pub fn run<F>(config: SandboxConfig<'_>, make_platform: F) -> Result<ExitStatus, Error>
where
    F: FnOnce(BorrowedFd<'_>) -> platform::Result<Box<dyn Platform>>,
{
    // Counted before the platform pins threads to one CPU.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // The CPUs' /sys files, read from the host while the Sentry still may
    // (before its filter) and may still run on every CPU it was given.
    let cpu_topology = crate::host::cpu_topology::CpuTopology::from_host(cpus);
    // Before the Sentry starts any thread of its own: they all inherit it.
    let keep: &[u32] = if config.host_network {
        &[crate::host::filter::CAP_NET_BIND_SERVICE]
    } else {
        &[]
    };
    crate::host::filter::drop_capabilities(keep).map_err(Error::Capabilities)?;
    let memory = Arc::new(MemoryFile::new().map_err(Error::MemoryFile)?);
    let platform = make_platform(memory.fd())?;
    let host_memory = crate::host::total_memory();
    let total_memory = config
        .memory_limit
        .map_or(host_memory, |l| l.min(host_memory));
    let builtins = Arc::new(crate::fsimpl::Builtins::default());
    // The host requests the GPU needs, for the filter (once per sandbox).
    let mut gpu_ioctls: &'static [u64] = &[];
    if let Some(g) = config.gpu {
        let proxy = nvproxy::Proxy::new(g.abi, g.caps);
        let gpu = crate::fsimpl::nvidia::Gpu::new(proxy, g.opener, g.devices, g.log);
        let reqs: Vec<u64> = gpu.host_requests().into_iter().map(u64::from).collect();
        gpu_ioctls = Box::leak(reqs.into_boxed_slice());
        let _ = builtins.gpu.set(Arc::new(gpu));
    }
    let mut fs = FileSystem::new(
        config.root,
        memory.clone(),
        config.root_writes,
        config.tmpfs_tmp,
        total_memory,
        builtins.clone(),
    )
    .map_err(|e| Error::Root(std::io::Error::from_raw_os_error(e.0)))?;
    let sysctls = crate::fsimpl::sysctl::plan(&config.sysctls).map_err(Error::Sysctl)?;
    let mqueue = Arc::new(crate::kernel::ipc::mqueue::Registry::default());
    mqueue.set_limits(sysctls.mqueue);
    fs.set_mqueue_root(crate::vfs::Node::Inode(Arc::new(
        crate::fsimpl::mqueue::MqueueRoot(mqueue.clone()),
    )));
    let sysv_limits = sysctls.sysv;
    let (port_range, keepalive) = (sysctls.port_range, sysctls.keepalive);
    builtins.proc.set_sysctls(sysctls);
    for m in config.mounts {
        let r = match m.source {
            MountSource::Volume { client, read_only } => {
                let kind = if read_only {
                    crate::vfs::VolumeKind::ReadOnly
                } else {
                    crate::vfs::VolumeKind::ReadWrite
                };
                fs.mount_volume(&m.dest, client, kind)
            }
            MountSource::Tmpfs { mode, size } => fs.mount_tmpfs(&m.dest, mode, size),
        };
        r.map_err(|e| Error::Mount(String::from_utf8_lossy(&m.dest).into_owned(), e))?;
    }
    let host_net = if config.host_network {
        Some(crate::socket::host_inet::HostNet::new().map_err(Error::Network)?)
    } else {
        None
    };
    let kernel = Arc::new(Kernel {
        syscalls: crate::syscalls::dispatch,
        write_core: crate::syscalls::write_core,
        on_winch: Default::default(),
        sysv_shm: Arc::default(),
        sysv_sem: Arc::default(),
        sysv_msg: Arc::default(),
        sysv_limits: Mutex::new(sysv_limits),
        mqueue,
        keys: Default::default(),
        platform,
        memory: memory.clone(),
        fs,
        uts: Mutex::new(UtsNames {
            host: config.hostname.into_bytes(),
            domain: b"(none)".to_vec(),
        }),
        cpus,
        cpu_topology,
        groups: crate::host::groups(),
        total_memory: AtomicU64::new(total_memory),
        host_memory,
        memory_limit: AtomicU64::new(config.memory_limit.unwrap_or(u64::MAX)),
        cpu_max: Mutex::new(config.cpu_max),
        cpu_throttle: Default::default(),
        unsupported_seen: (0..abi::MAX_SYSCALL)
            .map(|_| AtomicBool::new(false))
            .collect(),
        procs: Mutex::new(ProcTable {
            task_limit: config.max_tasks,
            ..ProcTable::default()
        }),
        locks: Arc::new(crate::vfs::lock::LockTable::new()),
        timers: Default::default(),
        futexes: Default::default(),
        timekeeper: crate::loader::vdso_time::TimeKeeper::new(&memory)
            .map_err(|e| Error::MemoryFile(std::io::Error::from_raw_os_error(e.0)))?,
        net: netstack::Stack::new(config.network.clone()),
        sockets: Box::new(crate::socket::SocketState {
            host_net,
            ..Default::default()
        }),
        reaped_cpu: Mutex::default(),
        checkpoint: crate::kernel::Checkpointing {
            target: config.save,
            save: Some(crate::syscalls::checkpoint::at_boundary),
            ..Default::default()
        },
        container_seccomp: match &config.seccomp {
            Some(prog) => {
                let bad = |why: String| Error::Seccomp(why);
                let prog = abi::bpf::Program::check(prog).map_err(|e| bad(e.to_string()))?;
                let f = crate::kernel::seccomp::Filter::attach(prog, false, None, None)
                    .map_err(|_| bad("the program is too long".into()))?;
                Some(f)
            }
            None => None,
        },
    });
    if config.cpu_watch {
        crate::kernel::cpulimit::watch(&kernel)
            .map_err(|e| Error::Spawn(format!("the CPU limit's watcher thread: {e}")))?;
    }
    if config.memory_watch != MemoryWatch::Off && config.memory_limit.is_some() {
        let say = config.memory_watch == MemoryWatch::Say;
        crate::kernel::oom::watch(&kernel, say)
            .map_err(|e| Error::Spawn(format!("the memory limit's watcher thread: {e}")))?;
    }
    // What the guest sees of its network (netlink, interface ioctls,
    // /sys/class/net, /proc/net): the netstack's interfaces. With
    // `--network host` the guest's sockets are host sockets, and it sees
    // the host's interfaces as the runtime found them before the Sentry
    // was confined: the Sentry cannot ask the host inside its seccomp
    // filter (no netlink socket of its own), and needs nothing live. With
    // `--network sandbox` in OCI mode it sees the container's interface
    // the same way, with the addresses the netstack owns.
    crate::socket::netlink::set_table(match (&config.network.mode, config.interfaces) {
        (_, Some(host)) if config.host_network => host,
        (netstack::Mode::Egress, Some(container)) => container,
        (netstack::Mode::Egress, None) => crate::socket::netlink::NetTable::sandbox(
            netstack::EGRESS_ADDR_V4,
            netstack::EGRESS_ADDR_V6,
        ),
        (netstack::Mode::Loopback, _) => crate::socket::netlink::NetTable::loopback(),
    });
    if let Some((lo, hi)) = port_range {
        // (`plan` checked the pair)
        let _ = kernel.net.set_local_port_range(lo, hi);
    }
    kernel.net.set_keepalive_defaults(keepalive);
    if matches!(config.network.mode, netstack::Mode::Egress) {
        // Names resolve only through the Sentry's DNS server, which the
        // guest's resolv.conf names; hosts is the sandbox's own.
        netstack::dns::serve(&kernel.net, netstack::dns::host_resolver())
            .map_err(|e| Error::Network(std::io::Error::from_raw_os_error(e.0)))?;
        let hosts = format!(
            "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t{}\n",
            String::from_utf8_lossy(&kernel.uts().host)
        );
        let resolv = format!(
            "# ferrovisor: names resolve through the sandbox's DNS server, which\n# answers only what --allow-host rules allow.\nnameserver {}\n",
            netstack::dns::DNS_ADDR.ip()
        );
        for (name, text) in [(&b"hosts"[..], hosts), (&b"resolv.conf"[..], resolv)] {
            kernel
                .fs
                .provide_file(&[b"etc", name], text.as_bytes(), 0o644)
                .map_err(|e| Error::Network(std::io::Error::from_raw_os_error(e.0)))?;
        }
        if !config.network.policy.secrets().is_empty() {
            crate::host::no_core_files()
                .map_err(|e| Error::Spawn(format!("no core files with secrets held: {e}")))?;
        }
        // Hosts with secrets or HTTP rules are reached through the
        // sandbox's CA: the guest's trust store holds it.
        if let Some(tls) = &config.network.tls {
            kernel
                .fs
                .provide_file(
                    &[b"etc", b"ssl", b"certs", b"ca-certificates.crt"],
                    tls.guest_bundle(),
                    0o644,
                )
                .map_err(|e| Error::Network(std::io::Error::from_raw_os_error(e.0)))?;
            for (path, store) in tls.java_stores() {
                let parts: Vec<&[u8]> = path
                    .split('/')
                    .filter(|p| !p.is_empty())
                    .map(str::as_bytes)
                    .collect();
                kernel
                    .fs
                    .provide_file(&parts, store, 0o644)
                    .map_err(|e| Error::Network(std::io::Error::from_raw_os_error(e.0)))?;
            }
        }
    }
    {
        // Socket readiness changes wake blocked tasks, and what happened
        // to a socket with O_ASYNC signals its owners.
        let queues = crate::socket::state(&kernel).inet_queues.clone();
        let asyncs = crate::socket::state(&kernel).inet_async.clone();
        let net = Arc::downgrade(&kernel.net);
        kernel
            .net
            .set_notifier(Arc::new(move |ids: &[netstack::SocketId]| {
                queues.notify(ids);
                if let Some(net) = net.upgrade() {
                    asyncs.notify(&net, ids);
                }
            }));
    }
    builtins.proc.attach(&kernel);
    builtins.devpts.attach(&kernel);
    // Over everything mounted, with /proc and /sys able to answer.
    let skipped = kernel
        .fs
        .lock_paths(&config.masked_paths, &config.readonly_paths)
        .map_err(|e| Error::Mount("the masked and read-only paths".into(), e))?;
    for p in skipped {
        tracing::debug!(
            "masked or read-only path {} skipped: not in the sandbox",
            String::from_utf8_lossy(&p)
        );
    }
    if let Some(StartHook(hook)) = config.on_start {
        hook(Arc::downgrade(&kernel));
    }
    let host_signals = config.host_signals;
    // From here on the Sentry works on descriptors it holds: every host
    // path it needed has been opened. Its threads take the filter now;
    // those it starts later (and the stubs) inherit it.
    let egress = matches!(config.network.mode, netstack::Mode::Egress);
    // Asked of the host now: the filter leaves getuid/getgid and
    // clock_getres out.
    crate::host::ids();
    crate::host::clock_resolutions();
    crate::host::filter::install(crate::host::filter::Needs {
        host_sockets: config.host_network || egress,
        host_listen: config.host_network,
        host_resolver: egress,
        platform_clone_flags: kernel.platform.host_clone_flags(),
        platform_ioctls: kernel.platform.host_ioctls(),
        platform_ioctl_fds: kernel.platform.host_ioctl_fds(),
        no_stubs: !kernel.platform.uses_stubs(),
        gpu_ioctls,
    })
    .map_err(Error::HostFilter)?;
    let console = if config.terminal {
        Some(console(&kernel)?)
    } else {
        None
    };
    let stdio = match &console {
        Some((c, file)) => Stdio::Terminal {
            file: file.clone(),
            tty: c.pty().clone(),
        },
        None => Stdio::Inherit,
    };
    let argv = if config.builtin_init {
        let name = &crate::loader::init::PATH[1..];
        kernel
            .fs
            .provide_file(&[name], &crate::loader::init::image(), 0o555)
            .map_err(|e| Error::Root(std::io::Error::from_raw_os_error(e.0)))?;
        vec![crate::loader::init::PATH.to_vec()]
    } else {
        config.argv
    };
    if let Some((_, file)) = &console {
        let _ = kernel.checkpoint.console.set(file.clone());
    }
    let task = match config.restore {
        Some(image) => crate::syscalls::checkpoint::restore_process(
            &kernel,
            image,
            console.as_ref().map(|(c, f)| {
                let tty: Arc<dyn crate::kernel::task::Terminal> = c.pty().clone();
                (f.clone(), tty)
            }),
        )?,
        None => {
            let task = start_process(
                &kernel,
                ProcessSpec {
                    argv,
                    envp: config.envp,
                    cwd: config.cwd,
                    ids: config.ids,
                    ppid: 0,
                    stdio,
                    preserved: config.preserved_fds,
                    privileges: config.privileges,
                },
            )?;
            config.mempolicy.apply(&task);
            task
        }
    };
    if let Some((c, _)) = &console {
        c.start()
            .map_err(|e| Error::Spawn(format!("the terminal's relay threads: {e}")))?;
        let resize = c.clone();
        let _ = kernel.on_winch.set(Box::new(move || resize.resize()));
    }
    let settled = Arc::new(Mutex::new(config.on_settled));
    {
        use crate::kernel::wait::Sleeper;
        let settled = settled.clone();
        task.thread
            .waiter()
            .on_first_sleep(Box::new(move || settle(&settled)));
    }
    // Only now is there a first process to hand host signals to; those that
    // came before stay pending (blocked) until the forwarder takes them.
    crate::kernel::hostsig::start_forwarder(Arc::downgrade(&kernel), host_signals);
    // Init's other threads may still run: the sandbox ends when the whole
    // process has.
    let status = run_process(task);
    settle(&settled);
    // Init has exited: like a PID namespace's init, it takes every other
    // process with it.
    kernel.kill_all();
    if let Some((c, _)) = &console {
        c.flush();
    }
    // The processes just killed may still hold shared mappings of volume
    // files, which would be written back when their address spaces go:
    // the Sentry may end first, so what they hold goes to the host now.
    for cache in kernel.fs.page_caches.all() {
        if let Err(e) = cache.writeback(None) {
            tracing::warn!("page cache writeback at the sandbox's end failed: {e:?}");
        }
    }
    Ok(status)
}

/// Calls [`SandboxConfig::on_settled`], the first time only.
fn settle(hook: &Mutex<Option<SettleHook>>) {
    let f = crate::sync::Locked::locked(hook).take();
    if let Some(SettleHook(f)) = f {
        f();
    }
}

/// The sandbox's terminal and an open description of its slave
/// (`/dev/pts/N`, read-write), for the first process's stdio.
fn console(
    kernel: &Arc<Kernel>,
) -> Result<
    (
        Arc<crate::fsimpl::devpts::Console>,
        Arc<crate::vfs::file::FileDescription>,
    ),
    Error,
> {
    let fail = |e: abi::Errno| Error::Spawn(format!("the sandbox's terminal: {e:?}"));
    let c = crate::fsimpl::devpts::Console::new(&crate::fsimpl::builtins(&kernel.fs).devpts)
        .map_err(fail)?;
    let file = slave_file(kernel, &c).map_err(fail)?;
    Ok((c, file))
}

/// A terminal of the sandbox's own for a program `exec --tty` brings in:
/// a new pty whose master the Sentry relays to `input` and `output` (the
/// caller's terminal, in raw mode), and the program's [`Stdio`] on its
/// slave. Start the console's relays once the program is, and
/// [`Console::end`] them once it has ended.
///
/// [`Console::end`]: crate::fsimpl::devpts::Console::end
pub fn exec_terminal(
    kernel: &Arc<Kernel>,
    input: std::os::fd::OwnedFd,
    output: std::os::fd::OwnedFd,
) -> Result<(Arc<crate::fsimpl::devpts::Console>, Stdio), Error> {
    let fail = |e: abi::Errno| Error::Spawn(format!("a terminal for the program: {e:?}"));
    let c = crate::fsimpl::devpts::Console::on(
        &crate::fsimpl::builtins(&kernel.fs).devpts,
        input,
        output,
    )
    .map_err(fail)?;
    let file = slave_file(kernel, &c).map_err(fail)?;
    let tty: Arc<dyn crate::kernel::task::Terminal> = c.pty().clone();
    Ok((c, Stdio::Terminal { file, tty }))
}

/// An open description of `c`'s slave, read-write, at its /dev/pts path.
fn slave_file(
    kernel: &Arc<Kernel>,
    c: &crate::fsimpl::devpts::Console,
) -> Result<Arc<crate::vfs::file::FileDescription>, abi::Errno> {
    use crate::vfs::file::{FileDescription, FileKind};
    let slave = c.pty().open_slave()?;
    let path = format!("/dev/pts/{}", c.pty().index);
    let loc = kernel
        .fs
        .resolve(&kernel.fs.root(), path.as_bytes(), true)
        .ok();
    Ok(FileDescription::new(
        FileKind::Impl(Arc::new(slave)),
        loc,
        abi::OpenFlags::RDWR.bits(),
    ))
}
