//! `add_key(2)`, `request_key(2)` and `keyctl(2)`: arguments in and out of
//! guest memory; the keys themselves are `kernel::keys`'.

use abi::keys::keyctl::*;
use abi::Errno;

use super::args::{Args, SyscallArgs};
use super::string_arg;
use crate::kernel::keys::{Asker, Create, Found, KeyType};
use crate::kernel::task::Task;
use crate::sync::Locked;

/// Longest type name and description (`key_get_type_from_user`,
/// `KEY_MAX_DESC_SIZE`).
const TYPE_MAX: usize = 32;
const DESC_MAX: usize = 4096;
/// Longest payload `add_key` and `KEYCTL_UPDATE` copy in.
const PAYLOAD_MAX: u64 = (1 << 20) - 1;

fn asker(task: &Task) -> Asker {
    Asker {
        uid: task.creds.uid[3],
        gid: task.creds.gid[3],
        groups: task.creds.groups.clone(),
        thread: task.keyrings.thread,
        process: *task.keyrings.process.locked(),
        session: task.keyrings.session,
    }
}

/// The key `id` names for the caller, and who the caller is.
fn resolve(task: &mut Task, id: u64, create: Create) -> Result<(Found, Asker), Errno> {
    let mut a = asker(task);
    let kernel = task.kernel.clone();
    let f = kernel
        .keys
        .resolve(id as i32, create, &mut a, &mut task.keyrings)?;
    Ok((f, a))
}

/// A type name: `EPERM` for the kernel's own (a leading dot).
fn type_arg(task: &Task, addr: u64) -> Result<Vec<u8>, Errno> {
    let t = string_arg(task, addr, TYPE_MAX)?;
    if t.first() == Some(&b'.') {
        return Err(Errno::EPERM);
    }
    Ok(t)
}

fn payload(task: &Task, addr: u64, len: u64) -> Result<Vec<u8>, Errno> {
    if len > PAYLOAD_MAX {
        return Err(Errno::EINVAL);
    }
    let mut p = vec![0u8; len as usize];
    if len > 0 {
        task.mm().copy_in(addr, &mut p)?;
    }
    Ok(p)
}

/// Copies what fits of `data` to `buf` (`buflen` bytes); the whole length
/// is the call's result, as Linux's.
fn give(task: &Task, buf: u64, buflen: u64, data: &[u8]) -> Result<u64, Errno> {
    let n = data.len().min(buflen as usize);
    if buf != 0 && n > 0 {
        task.mm().copy_out(buf, &data[..n])?;
    }
    Ok(data.len() as u64)
}

pub fn sys_add_key(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let ty = type_arg(task, a.ptr(0))?;
    let desc = if a.ptr(1) != 0 {
        string_arg(task, a.ptr(1), DESC_MAX)?
    } else {
        Vec::new()
    };
    if ty == b"keyring" && desc.first() == Some(&b'.') {
        return Err(Errno::EPERM);
    }
    let data = payload(task, a.ptr(2), a.u64(3))?;
    let (ring, who) = resolve(task, a.u64(4), Create::Yes)?;
    let ty = KeyType::by_name(&ty).ok_or(Errno::ENODEV)?;
    task.kernel
        .keys
        .add_key(ty, &desc, data, ring, &who)
        .map(|id| id as u64)
}

pub fn sys_request_key(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let ty = type_arg(task, a.ptr(0))?;
    let desc = string_arg(task, a.ptr(1), DESC_MAX)?;
    if desc.is_empty() {
        return Err(Errno::EINVAL);
    }
    if a.ptr(2) != 0 {
        string_arg(task, a.ptr(2), DESC_MAX)?;
    }
    let ty = KeyType::by_name(&ty).ok_or(Errno::ENOKEY)?;
    let (dest, who) = match a.u64(3) {
        0 => (None, asker(task)),
        d => {
            let (f, who) = resolve(task, d, Create::Yes)?;
            (Some(f), who)
        }
    };
    task.kernel
        .keys
        .request(ty, &desc, dest, &who)
        .map(|id| id as u64)
}

pub fn sys_keyctl(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let kernel = task.kernel.clone();
    let keys = &kernel.keys;
    match a.u64(0) {
        KEYCTL_GET_KEYRING_ID => {
            let create = if a.u64(2) != 0 {
                Create::Yes
            } else {
                Create::No
            };
            resolve(task, a.u64(1), create).map(|(f, _)| f.id as u64)
        }
        KEYCTL_JOIN_SESSION_KEYRING => {
            let name = match a.ptr(1) {
                0 => None,
                p => Some(string_arg(task, p, DESC_MAX)?),
            };
            let mut who = asker(task);
            keys.join_session(name.as_deref(), &mut who, &mut task.keyrings)
                .map(|id| id as u64)
        }
        KEYCTL_UPDATE => {
            let data = payload(task, a.ptr(2), a.u64(3))?;
            let (f, who) = resolve(task, a.u64(1), Create::No)?;
            keys.update(f, data, &who).map(|()| 0)
        }
        KEYCTL_REVOKE => {
            let (f, who) = resolve(task, a.u64(1), Create::No)?;
            keys.revoke(f, &who).map(|()| 0)
        }
        KEYCTL_SETPERM => {
            let (f, who) = resolve(task, a.u64(1), Create::Yes)?;
            keys.set_perm(f, a.u32(2), &who).map(|()| 0)
        }
        KEYCTL_DESCRIBE => {
            let (f, who) = resolve(task, a.u64(1), Create::Yes)?;
            let mut d = keys.describe(f, &who)?;
            d.push(0);
            give(task, a.ptr(2), a.u64(3), &d)
        }
        KEYCTL_CLEAR => {
            let (f, who) = resolve(task, a.u64(1), Create::Yes)?;
            keys.clear(f, &who).map(|()| 0)
        }
        KEYCTL_LINK => {
            let (key, _) = resolve(task, a.u64(1), Create::No)?;
            let (ring, who) = resolve(task, a.u64(2), Create::Yes)?;
            keys.link(key, ring, &who).map(|()| 0)
        }
        KEYCTL_UNLINK => {
            let (ring, _) = resolve(task, a.u64(2), Create::No)?;
            let (key, who) = resolve(task, a.u64(1), Create::No)?;
            keys.unlink(key, ring, &who).map(|()| 0)
        }
        KEYCTL_SEARCH => {
            let ty = type_arg(task, a.ptr(2))?;
            let desc = string_arg(task, a.ptr(3), DESC_MAX)?;
            let (ring, _) = resolve(task, a.u64(1), Create::No)?;
            let (dest, who) = match a.u64(4) {
                0 => (None, asker(task)),
                d => {
                    let (f, who) = resolve(task, d, Create::Yes)?;
                    (Some(f), who)
                }
            };
            let ty = KeyType::by_name(&ty).ok_or(Errno::ENOKEY)?;
            keys.search(ring, ty, &desc, dest, &who).map(|id| id as u64)
        }
        KEYCTL_READ => {
            let (f, who) = resolve(task, a.u64(1), Create::No)?;
            let data = keys.read(f, &who)?;
            give(task, a.ptr(2), a.u64(3), &data)
        }
        // No security module labels keys: an empty label.
        KEYCTL_GET_SECURITY => {
            let (f, who) = resolve(task, a.u64(1), Create::Yes)?;
            keys.describe(f, &who)?;
            give(task, a.ptr(2), a.u64(3), b"\0")
        }
        KEYCTL_INVALIDATE => {
            let (f, who) = resolve(task, a.u64(1), Create::No)?;
            keys.invalidate(f, &who).map(|()| 0)
        }
        _ => Err(Errno::EOPNOTSUPP),
    }
}
