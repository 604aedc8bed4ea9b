//! System V IPC calls: shared memory (`shmget`, `shmat`, `shmdt`,
//! `shmctl`), semaphores (`semget`, `semop`, `semtimedop`, `semctl`) and
//! message queues (`msgget`, `msgsnd`, `msgrcv`, `msgctl`). The objects
//! are in [`crate::kernel::ipc`]; these handlers only decode arguments.

use abi::Errno;

use super::args::{Args, SyscallArgs};
use crate::kernel::ipc::{msg, sem, shm};
use crate::kernel::task::Task;

pub fn sys_shmget(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    shm::shmget(task, a.i32(0), a.u64(1), a.u64(2)).map(|id| id as u64)
}

pub fn sys_shmat(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    shm::shmat(task, a.i32(0), a.ptr(1), a.u64(2))
}

pub fn sys_shmdt(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    shm::shmdt(task, a.ptr(0)).map(|()| 0)
}

pub fn sys_shmctl(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    shm::shmctl(task, a.i32(0), a.u64(1), a.ptr(2))
}

pub fn sys_semget(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    sem::semget(task, a.i32(0), a.i32(1), a.u64(2)).map(|id| id as u64)
}

pub fn sys_semop(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    sem::semtimedop(task, a.i32(0), a.ptr(1), a.u64(2), 0).map(|()| 0)
}

pub fn sys_semtimedop(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    sem::semtimedop(task, a.i32(0), a.ptr(1), a.u64(2), a.ptr(3)).map(|()| 0)
}

pub fn sys_semctl(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    sem::semctl(task, a.i32(0), a.i32(1), a.u64(2), a.u64(3))
}

pub fn sys_msgget(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    msg::msgget(task, a.i32(0), a.u64(1)).map(|id| id as u64)
}

pub fn sys_msgsnd(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    msg::msgsnd(task, a.i32(0), a.ptr(1), a.u64(2), a.u64(3)).map(|()| 0)
}

pub fn sys_msgrcv(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    msg::msgrcv(task, a.i32(0), a.ptr(1), a.i64(2), a.i64(3), a.u64(4))
}

pub fn sys_msgctl(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    msg::msgctl(task, a.i32(0), a.u64(1), a.ptr(2))
}
