//! nvproxy: NVIDIA GPU pass-through by ioctl filtering. The driver's ABI as
//! data ([`abi`], [`rm`]), a table per supported driver version
//! ([`table`]), and the forwarding of one guest ioctl through proxy memory
//! ([`forward`]). The Sentry owns the device files and the host calls.
#![forbid(unsafe_code)]

pub mod abi;
pub mod forward;
pub mod rm;
pub mod table;

pub use forward::{Driver, GuestMemory, Outcome, Proxy, Record};
pub use table::{
    abi_for, host_abi, supported, supported_list, version_from_proc, Abi, Caps, Version,
};
