//! The Linux x86-64 ABI as data: system call numbers, errno values, flags and
//! the `#[repr(C)]` structures the Sentry exchanges with guests.
#![forbid(unsafe_code)]

pub mod bpf;
mod consts;
mod errno;
pub mod ipc;
pub mod landlock;
pub mod netlink;
pub mod socket;
mod syscalls;
mod types;

pub use consts::*;
pub use errno::Errno;
pub use syscalls::{nr, syscall_name, MAX_SYSCALL, SYSCALLS};
pub use types::*;
