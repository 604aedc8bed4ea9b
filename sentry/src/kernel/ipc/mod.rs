//! Inter-process communication kept in the Sentry: System V shared memory,
//! semaphores and message queues, and POSIX message queues.

pub mod mqueue;
pub mod msg;
pub mod sem;
pub mod shm;

/// The sandbox's IPC namespace's System V limits: what its
/// /proc/sys/kernel files (`shmmax`, `shmall`, `shmmni`, `msgmax`,
/// `msgmnb`, `msgmni`, `sem`) say and `shmget`, `semget`, `semop`,
/// `msgget`, `msgsnd` and `msgctl` enforce. A container's root may change
/// them (ipc/ipc_sysctl.c: the namespace's own root owns its files).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SysvLimits {
    /// largest segment (bytes)
    pub shmmax: u64,
    /// pages all segments may hold
    pub shmall: u64,
    /// most segments
    pub shmmni: i32,
    /// largest message (bytes)
    pub msgmax: i32,
    /// bytes a new queue may hold
    pub msgmnb: i32,
    /// most queues
    pub msgmni: i32,
    /// SEMMSL (semaphores per set), SEMMNS (in all), SEMOPM (operations
    /// per `semop`), SEMMNI (most sets)
    pub sem: [i32; 4],
}

impl Default for SysvLimits {
    /// Linux's defaults (include/uapi/linux/{shm,msg,sem}.h).
    fn default() -> Self {
        SysvLimits {
            shmmax: abi::ipc::SHMMAX,
            shmall: abi::ipc::SHMALL,
            shmmni: abi::ipc::SHMMNI as i32,
            msgmax: abi::ipc::MSGMAX as i32,
            msgmnb: abi::ipc::MSGMNB as i32,
            msgmni: abi::ipc::MSGMNI as i32,
            sem: [
                abi::ipc::SEMMSL as i32,
                abi::ipc::SEMMNS as i32,
                abi::ipc::SEMOPM as i32,
                abi::ipc::SEMMNI as i32,
            ],
        }
    }
}

/// Linux's `IPCMNI`: the most System V IPC identifiers of a kind, and so
/// the most `shmmni`, `msgmni` and SEMMNI may say.
pub const IPCMNI: i32 = 32768;

/// `ipc_addid()`'s check: another object of a kind of which `in_use`
/// exist fits under `limit` (bounded by [`IPCMNI`]).
pub fn room_for_one(in_use: usize, limit: i32) -> bool {
    (in_use as i64) < i64::from(limit.min(IPCMNI))
}
