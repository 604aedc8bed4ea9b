//! The Sentry: ferrovisor's user-space kernel. It answers every system call
//! of the guest itself, keeps the guest's memory in its own memory file, and
//! resolves every path inside the sandbox's root.

pub mod cpu_topology;
pub mod events;
pub mod fasync;
pub mod file;
pub mod fileimage;
pub mod futex;
pub mod guestio;
mod host;

/// Asks the host now for the caller's ids and supplementary groups, which
/// the guest is shown: the process may give up its own before the Sentry
/// starts (the `runsc-shim` crate's `confine`).
pub fn remember_caller_ids() {
    host::ids();
    host::groups();
}
pub mod host_filter;
pub mod hostsig;
pub mod inotify;
pub mod kernel;
pub mod loader;
pub mod locks;
pub mod memfile;
pub mod mm;
pub mod mqueue;
pub mod pagecache;
pub mod pipe;
pub mod procfs;
pub mod pty;
pub mod socket;
pub mod syscalls;
pub mod sysctl;
pub mod sysvmsg;
pub mod sysvsem;
pub mod sysvshm;
pub mod task;
pub mod timers;
pub mod tmpfs;
pub mod vdso;
pub mod vdso_time;
pub mod vfs;
pub mod volume_watch;

pub use kernel::{
    run, spawn_process, CpuMax, Error, Mount, MountSource, Privileges, ProcessSpec, SandboxConfig,
    StartHook, Stdio,
};
pub use task::{CapSets, ExitStatus};

/// Guest page size.
pub const PAGE_SIZE: u64 = platform::PAGE_SIZE;
