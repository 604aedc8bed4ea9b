//! Inter-process communication kept in the Sentry: System V shared memory,
//! semaphores and message queues, and POSIX message queues.

pub mod mqueue;
pub mod msg;
pub mod sem;
pub mod shm;
