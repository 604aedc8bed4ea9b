//! The file systems and special files behind the VFS: tmpfs, proc and its
//! sysctls, devpts, pipes, the event descriptors (eventfd, timerfd,
//! signalfd, epoll).

pub mod devpts;
pub mod events;
pub mod mqueue;
pub mod nsfs;
pub mod pidfd;
pub mod pipe;
pub mod proc;
pub mod seccomp_notify;
pub mod sysctl;
pub mod tmpfs;
