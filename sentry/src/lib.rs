//! The Sentry: ferrovisor's user-space kernel. It answers every system call
//! of the guest itself, keeps the guest's memory in its own memory file, and
//! resolves every path inside the sandbox's root.
//!
//! Folders are layers, and imports go one way (docs/architecture.md):
//! `syscalls` → {`socket`, `fsimpl`} → `kernel` → {`vfs`, `loader`} → `mm` →
//! `host`; `vfs` uses only `kernel::auth` and `kernel::wait` of the kernel.
//! The layers are the crate's own; what the runtime uses is re-exported
//! here.

mod boot;
mod fsimpl;
mod host;
mod kernel;
mod loader;
mod mm;
mod socket;
mod sync;
mod syscalls;
mod vfs;

/// Asks the host now for the caller's ids and supplementary groups, which
/// the guest is shown: the process may give up its own before the Sentry
/// starts (the `runsc-shim` crate's `confine`).
pub fn remember_caller_ids() {
    host::ids();
    host::groups();
}

pub use boot::{
    exec_terminal, run, GpuConfig, MemoryWatch, Mount, MountSource, RootWrites, SandboxConfig,
    SettleHook, StartHook,
};
pub use fsimpl::devpts::Console;
pub use fsimpl::sysctl;
pub use host::filter::drop_capabilities;
pub use kernel::auth::CapSets;
pub use kernel::dirwatch::{Change, DirWatch};
pub use kernel::hostsig;
pub use kernel::task::ExitStatus;
pub use kernel::task::{si, user_info};
pub use kernel::{guest_user, GuestUser, Kernel};
pub use kernel::{spawn_process, CpuMax, Error, Privileges, ProcessSpec, ProcessSummary, Stdio};
pub use socket::inet::LoopbackConn;
pub use syscalls::checkpoint::payload as check_image;
pub use syscalls::checkpoint::Image;
pub use syscalls::numa::NumaPolicy;
pub use vfs::NvDevice;

/// The guest's network view (its devices, addresses and routes), which
/// the runtime builds from the host's.
pub mod net {
    pub use crate::kernel::netdev::{IfAddr, Interface, NetTable, Route};
    pub use crate::socket::netlink::attrs_of;
}

/// Every x86-64 system call as the Sentry answers it, one line each
/// (number, name, support, note): what `ferrovisor syscalls` prints.
pub fn syscall_table() -> String {
    syscalls::compat::text()
}

/// `docs/compatibility.md`, made from the same table (`ferrovisor syscalls
/// --markdown`); a test keeps the committed file in step.
pub fn syscall_table_markdown() -> String {
    syscalls::compat::markdown()
}

/// docs/filters.md: the host system calls the Sentry and the gofer may
/// make, from their seccomp filters; `kvm_ioctls` are the KVM platform's
/// requests (`platform::Platform::host_ioctls`).
pub fn host_filters_markdown(kvm_ioctls: &'static [u64], kvm_fds: Option<(u64, u64)>) -> String {
    host::filters_markdown(kvm_ioctls, kvm_fds)
}

/// Guest page size.
pub const PAGE_SIZE: u64 = platform::PAGE_SIZE;
