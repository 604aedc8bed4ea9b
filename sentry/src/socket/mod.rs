//! Sockets. Unix domain sockets live entirely in the Sentry; Internet
//! sockets come with the netstack.

pub mod unix;
