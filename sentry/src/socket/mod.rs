//! Sockets. Unix domain sockets live entirely in the Sentry; Internet
//! sockets run on the sandbox's netstack, or with `--network host` are
//! host sockets the Sentry owns.

pub mod host_inet;
pub(crate) mod host_sys;
pub mod inet;
pub mod netlink;
pub mod unix;
