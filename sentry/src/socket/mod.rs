//! Sockets. Unix domain sockets live entirely in the Sentry; Internet
//! sockets run on the sandbox's netstack.

pub mod inet;
pub mod netlink;
pub mod unix;
