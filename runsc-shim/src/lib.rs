//! ferrovisor's OCI runtime as a library: bundles (`oci`), the state
//! directory (`state`), the sandbox's host cgroup (`cgroup`), the container
//! lifecycle (`container`), the guest's network and its egress rules
//! (`network`), what `--network host` shows the guest of the host's
//! interfaces (`host_net`), the log format (`logging`) and long-lived
//! sandboxes for agents (`sandbox`). The `ferrovisor` binary is a thin
//! command-line shell over it, in runc's command-line contract.

pub mod cgroup;
pub mod confine;
pub mod container;
pub mod control;
pub mod gofer_proc;
pub mod gpu;
pub mod hooks;
pub mod host_net;
pub mod logging;
pub mod network;
pub mod oci;
pub mod sandbox;
pub mod seccomp;
#[cfg(feature = "containerd-shim")]
pub mod shim_v2;
pub mod state;
mod sys;

pub use container::{CreateOptions, Error, OciState, Runtime};
