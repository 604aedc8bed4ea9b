//! System V IPC (sysvipc(7): `shmget`, `semget`, `msgget` and their
//! `*ctl` commands, linux/ipc.h, linux/shm.h, linux/sem.h, linux/msg.h) and
//! POSIX message queues (mq_overview(7), linux/mqueue.h).

/// `IPC_PRIVATE`: always a new object.
pub const IPC_PRIVATE: i32 = 0;
/// Create the object if the key has none.
pub const IPC_CREAT: u64 = 0o1000;
/// With `IPC_CREAT`: fail if it exists.
pub const IPC_EXCL: u64 = 0o2000;
/// Do not wait (`semop`, `msgsnd`, `msgrcv`).
pub const IPC_NOWAIT: u64 = 0o4000;
/// Remove the object.
pub const IPC_RMID: u64 = 0;
/// Set its owner and mode.
pub const IPC_SET: u64 = 1;
/// Read its state.
pub const IPC_STAT: u64 = 2;
/// Read the namespace's limits.
pub const IPC_INFO: u64 = 3;
/// `IPC_64`: the only layout x86-64 has.
pub const IPC_64: u64 = 0x100;

// shmctl(2) commands.
/// lock the segment in memory
pub const SHM_LOCK: u64 = 11;
/// unlock it
pub const SHM_UNLOCK: u64 = 12;
/// `IPC_STAT` by index
pub const SHM_STAT: u64 = 13;
/// the namespace's usage
pub const SHM_INFO: u64 = 14;
/// `SHM_STAT` without the read permission check
pub const SHM_STAT_ANY: u64 = 15;
// shmat(2) flags.
/// attach read-only
pub const SHM_RDONLY: u64 = 0o10000;
/// round the address down to `SHMLBA`
pub const SHM_RND: u64 = 0o20000;
/// replace what is mapped there
pub const SHM_REMAP: u64 = 0o40000;
/// executable
pub const SHM_EXEC: u64 = 0o100000;
// `shm_perm.mode` bits.
/// removed while attached
pub const SHM_DEST: u32 = 0o1000;
/// locked
pub const SHM_LOCKED: u32 = 0o2000;
/// Linux's default largest segment.
pub const SHMMAX: u64 = u64::MAX - (1 << 24);
/// Linux's default pages of all segments.
pub const SHMALL: u64 = u64::MAX - (1 << 24);
/// Linux's default number of segments.
pub const SHMMNI: usize = 4096;

// semop(2) flags and semctl(2) commands.
/// undo the operation when the process exits
pub const SEM_UNDO: i16 = 0x1000;
/// the pid of the last operation
pub const GETPID: u64 = 11;
/// a semaphore's value
pub const GETVAL: u64 = 12;
/// every value of the set
pub const GETALL: u64 = 13;
/// how many wait for an increase
pub const GETNCNT: u64 = 14;
/// how many wait for zero
pub const GETZCNT: u64 = 15;
/// set a value
pub const SETVAL: u64 = 16;
/// set every value
pub const SETALL: u64 = 17;
/// `IPC_STAT` by index
pub const SEM_STAT: u64 = 18;
/// the namespace's usage
pub const SEM_INFO: u64 = 19;
/// `SEM_STAT` without the read permission check
pub const SEM_STAT_ANY: u64 = 20;
/// Linux's default semaphores per set.
pub const SEMMSL: usize = 32000;
/// Linux's default semaphores in all.
pub const SEMMNS: usize = 1_024_000_000;
/// Linux's default operations per `semop`.
pub const SEMOPM: usize = 500;
/// Linux's default number of sets.
pub const SEMMNI: usize = 32000;
/// The largest value of a semaphore.
pub const SEMVMX: i32 = 32767;
/// The largest undo adjustment.
pub const SEMAEM: i32 = SEMVMX;

// msgrcv(2) flags and msgctl(2) commands.
/// truncate a message too long for the buffer
pub const MSG_NOERROR: u64 = 0o10000;
/// receive the first message of another type
pub const MSG_EXCEPT: u64 = 0o20000;
/// copy the message at an index, leaving it queued
pub const MSG_COPY: u64 = 0o40000;
/// `IPC_STAT` by index
pub const MSG_STAT: u64 = 11;
/// the namespace's usage
pub const MSG_INFO: u64 = 12;
/// `MSG_STAT` without the read permission check
pub const MSG_STAT_ANY: u64 = 13;
/// Linux's default largest message.
pub const MSGMAX: usize = 8192;
/// Linux's default queue size, bytes.
pub const MSGMNB: u64 = 16384;
/// Linux's default number of queues.
pub const MSGMNI: usize = 32000;

/// Priorities of POSIX message queues are below this.
pub const MQ_PRIO_MAX: u64 = 32768;
/// Length of a `SIGEV_THREAD` notification's cookie.
pub const NOTIFY_COOKIE_LEN: usize = 32;
/// The cookie's last byte as posted: a message arrived...
pub const NOTIFY_WOKENUP: u8 = 1;
/// ...or the registration was dropped unused.
pub const NOTIFY_REMOVED: u8 = 2;
