//! The gofer: host file access for the Sentry over a Unix socket.
//!
//! [`proto`] defines the messages, [`server`] answers them inside the gofer
//! process (which [`jail`] confines), and [`client`] is what the Sentry calls.
//! Descriptors of opened files travel with the replies (`SCM_RIGHTS`), so
//! reads and writes go straight from the Sentry to the host file.

pub mod client;
pub mod devices;
pub mod jail;
pub mod proto;
pub mod seccomp;
pub mod server;
mod sys;

pub use client::Client;
pub use proto::{Handle, Stat};
pub use server::{serve, ServeError, ServerOptions};
