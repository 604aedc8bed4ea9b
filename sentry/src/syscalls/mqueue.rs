//! POSIX message queue calls (`mq_open`, `mq_unlink`, `mq_timedsend`,
//! `mq_timedreceive`, `mq_notify`, `mq_getsetattr`); the queues themselves
//! are in [`crate::kernel::ipc::mqueue`].

use std::sync::Arc;

use abi::{Errno, OpenFlags, Timespec};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::kernel::ipc::mqueue::{self, Create, MsgQueue, Notify};
use crate::kernel::task::Task;
use crate::socket::netlink::NetlinkSocket;
use crate::vfs::file::FileDescription;

use super::args::{Args, SyscallArgs};
use super::path_arg;
use crate::sync::Locked;

/// `struct mq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct MqAttr {
    flags: i64,
    maxmsg: i64,
    msgsize: i64,
    curmsgs: i64,
    reserved: [i64; 4],
}
const _: () = assert!(std::mem::size_of::<MqAttr>() == 64);

/// The head of `struct sigevent`: `sigev_value`, `sigev_signo`,
/// `sigev_notify` (the rest is the thread notification's, which the
/// kernel never reads).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
struct SigEventHead {
    value: u64,
    signo: i32,
    notify: i32,
}
const _: () = assert!(std::mem::size_of::<SigEventHead>() == 16);

/// What creating a queue for `task` asks: its effective ids (the owner),
/// its real uid (charged), `mode` less its umask, its `RLIMIT_MSGQUEUE`,
/// whether it holds `CAP_SYS_RESOURCE` (past the queue limits).
pub(super) fn create_args(task: &Task, mode: u32, attr: Option<(i64, i64)>) -> Create {
    Create {
        mode: mode & 0o7777 & !task.fs_ctx().umask,
        ids: task.ids,
        real_uid: task.creds.uid[0],
        attr,
        privileged: task.capable(crate::kernel::auth::cap::SYS_RESOURCE),
        rlimit: task.proc_.state().rlimits[mqueue::RLIMIT_MSGQUEUE].cur,
    }
}

/// The queue behind descriptor `fd` (`EBADF` for any other kind) and its
/// description.
fn queue_of(task: &Task, fd: i32) -> Result<(Arc<FileDescription>, Arc<MsgQueue>), Errno> {
    let file = task.fds().file(fd.into())?;
    let q = file
        .downcast::<crate::fsimpl::mqueue::MqueueFile>()
        .ok_or(Errno::EBADF)?
        .0
        .clone();
    Ok((file, q))
}

fn nonblock(file: &FileDescription) -> bool {
    file.nonblocking()
}

/// `(may receive, may send)` by the description's access mode (mode 3,
/// which `mq_open` accepts when it creates, allows neither, as Linux).
fn access(file: &FileDescription) -> (bool, bool) {
    match file.flags() & abi::O_ACCMODE {
        0 => (true, false),
        1 => (false, true),
        2 => (true, true),
        _ => (false, false),
    }
}

/// The deadline of an optional absolute `CLOCK_REALTIME` timeout, checked
/// before anything else as the kernel does.
fn deadline(task: &Task, addr: u64) -> Result<Option<std::time::Instant>, Errno> {
    if addr == 0 {
        return Ok(None);
    }
    let ts: Timespec = task.mm().read_obj(addr)?;
    mqueue::realtime_deadline(&ts).map(Some)
}

/// `mq_open(name, oflag, mode, attr)`; `name` comes without glibc's
/// leading `/`.
pub fn sys_mq_open(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (oflag, mode, uattr) = (a.u32(1), a.u32(2), a.ptr(3));
    let name = path_arg(task, a.ptr(0))?;
    let attr: Option<MqAttr> = if uattr != 0 {
        Some(task.mm().read_obj(uattr)?)
    } else {
        None
    };
    // Linux takes the descriptor slot before it looks the name up.
    if task.fds().open_fds().len() as u64 >= task.nofile() {
        return Err(Errno::EMFILE);
    }
    let creat = oflag & OpenFlags::CREAT.bits() != 0;
    let excl = oflag & OpenFlags::EXCL.bits() != 0;
    let acc = oflag & abi::O_ACCMODE;
    let create = creat.then(|| create_args(task, mode, attr.map(|a| (a.maxmsg, a.msgsize))));
    let (q, created) = task.kernel.mqueue.open(&name, create, excl)?;
    if !created {
        if acc == abi::O_ACCMODE {
            return Err(Errno::EINVAL);
        }
        let want = [4, 2, 6][acc as usize];
        if !q.permits(&task.creds, want) {
            return Err(Errno::EACCES);
        }
    }
    let status = acc | (oflag & OpenFlags::NONBLOCK.bits());
    let file =
        FileDescription::of_impl(Arc::new(crate::fsimpl::mqueue::MqueueFile(q)), None, status);
    // Message queue descriptors are always close-on-exec on Linux (POSIX:
    // `exec` closes them).
    task.install_fd(file, true)
}

/// `mq_unlink(name)`.
pub fn sys_mq_unlink(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let name = path_arg(task, a.ptr(0))?;
    task.kernel.mqueue.unlink(
        &name,
        task.ids.0,
        task.capable(crate::kernel::auth::cap::FOWNER),
    )?;
    Ok(0)
}

/// `mq_timedsend(mqd, msg, len, prio, abs_timeout)`.
pub fn sys_mq_timedsend(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (mqd, msg, len, prio) = (a.fd(0), a.ptr(1), a.u64(2), a.u64(3));
    let deadline = deadline(task, a.ptr(4))?;
    if prio >= mqueue::MQ_PRIO_MAX {
        return Err(Errno::EINVAL);
    }
    let (file, q) = queue_of(task, mqd)?;
    if !access(&file).1 {
        return Err(Errno::EBADF);
    }
    if len > q.msgsize as u64 {
        return Err(Errno::EMSGSIZE);
    }
    let mut data = vec![0u8; len as usize];
    task.mm().copy_in(msg, &mut data)?;
    let due = q.send(
        task.blocker(),
        &data,
        prio as u32,
        nonblock(&file),
        deadline,
    )?;
    if let Some(n) = due {
        mqueue::deliver(&task.kernel, n, (task.pid(), task.ids.0));
    }
    Ok(0)
}

/// `mq_timedreceive(mqd, buf, len, prio_out, abs_timeout)`.
pub fn sys_mq_timedreceive(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (mqd, buf, len, prio_out) = (a.fd(0), a.ptr(1), a.u64(2), a.ptr(3));
    let deadline = deadline(task, a.ptr(4))?;
    let (file, q) = queue_of(task, mqd)?;
    if !access(&file).0 {
        return Err(Errno::EBADF);
    }
    if len < q.msgsize as u64 {
        return Err(Errno::EMSGSIZE);
    }
    let (data, prio) = q.receive(task.blocker(), nonblock(&file), deadline)?;
    // The message is gone from the queue even when the copy-out faults.
    if prio_out != 0 {
        task.mm().write_obj(prio_out, &prio)?;
    }
    task.mm().copy_out(buf, &data)?;
    Ok(data.len() as u64)
}

/// `mq_notify(mqd, sevp)`. `SIGEV_THREAD` is glibc's: `sigev_signo` names
/// a netlink socket and `sigev_value` points at a cookie, which is posted
/// back to that socket when a message arrives (or the registration ends
/// unused); glibc's helper thread reads it and runs the function.
pub fn sys_mq_notify(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (mqd, sevp) = (a.fd(0), a.ptr(1));
    let ev: Option<SigEventHead> = if sevp != 0 {
        Some(task.mm().read_obj(sevp)?)
    } else {
        None
    };
    let mut thread = None;
    if let Some(ev) = &ev {
        match ev.notify {
            mqueue::SIGEV_NONE => {}
            mqueue::SIGEV_SIGNAL => {
                // Signal 0 is valid: a registration that sends nothing.
                if !(0..=64).contains(&ev.signo) {
                    return Err(Errno::EINVAL);
                }
            }
            mqueue::SIGEV_THREAD => {
                // Linux reads the cookie, then looks the socket up.
                let mut cookie = [0u8; mqueue::COOKIE_LEN];
                task.mm().copy_in(ev.value, &mut cookie)?;
                let sock = task.fds().file(i64::from(ev.signo))?;
                if crate::socket::downcast::<NetlinkSocket>(&sock).is_none() {
                    return Err(if crate::socket::is_socket(&sock) {
                        Errno::EINVAL
                    } else {
                        Errno::ENOTSOCK
                    });
                }
                thread = Some(mqueue::ThreadNotify {
                    sock,
                    cookie,
                    post: post_to_netlink,
                });
            }
            _ => return Err(Errno::EINVAL),
        }
    }
    let (_, q) = queue_of(task, mqd)?;
    let pid = task.pid();
    let mut st = q.state();
    // A registration whose process is gone has lapsed (Linux drops it as
    // the process's descriptors close).
    if st.notify.as_ref().is_some_and(|n| {
        task.kernel
            .process(n.pid)
            .is_none_or(|p| p.state().exit.is_some())
    }) {
        st.notify = None;
    }
    let dropped = match ev {
        None if st.notify.as_ref().is_some_and(|n| n.pid == pid) => st.notify.take(),
        None => None,
        Some(ev) => {
            if st.notify.is_some() {
                return Err(Errno::EBUSY);
            }
            st.notify = Some(Notify {
                pid,
                kind: ev.notify,
                signo: ev.signo,
                value: ev.value,
                thread,
            });
            None
        }
    };
    drop(st);
    if let Some(n) = dropped {
        mqueue::unregister(n);
    }
    Ok(0)
}

/// `mq_getsetattr(mqd, new, old)`: only `O_NONBLOCK` can change.
pub fn sys_mq_getsetattr(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (mqd, new_attr, old_attr) = (a.fd(0), a.ptr(1), a.ptr(2));
    let new: Option<MqAttr> = if new_attr != 0 {
        let n: MqAttr = task.mm().read_obj(new_attr)?;
        if n.flags & !i64::from(OpenFlags::NONBLOCK.bits()) != 0 {
            return Err(Errno::EINVAL);
        }
        Some(n)
    } else {
        None
    };
    let (file, q) = queue_of(task, mqd)?;
    let old = MqAttr {
        flags: i64::from(file.flags() & OpenFlags::NONBLOCK.bits()),
        maxmsg: q.maxmsg,
        msgsize: q.msgsize,
        curmsgs: q.curmsgs(),
        reserved: [0; 4],
    };
    if let Some(n) = new {
        let mut f = file.flags.locked();
        *f = (*f & !OpenFlags::NONBLOCK.bits()) | n.flags as u32;
    }
    if old_attr != 0 {
        task.mm().write_obj(old_attr, &old)?;
    }
    Ok(0)
}

/// A close by `task`'s process of a descriptor of `q` ends the process's
/// notification registration, as Linux's `mqueue_flush_file`.
pub(super) fn drop_registration(task: &Task, q: &MsgQueue) {
    let mut st = q.state();
    if st.notify.as_ref().is_some_and(|n| n.pid == task.pid()) {
        let n = st.notify.take();
        drop(st);
        if let Some(n) = n {
            mqueue::unregister(n);
        }
    }
}

/// Queues `data` on the netlink socket of a `SIGEV_THREAD` registration.
fn post_to_netlink(sock: &FileDescription, data: Vec<u8>) {
    if let Some(s) = crate::socket::downcast::<NetlinkSocket>(sock) {
        s.post(data);
    }
}
