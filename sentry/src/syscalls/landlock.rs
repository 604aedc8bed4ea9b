//! `landlock_create_ruleset`, `landlock_add_rule`, `landlock_restrict_self`
//! (landlock(7)); the checks themselves are in [`crate::kernel::landlock`]
//! and at each file operation. Also the LSM calls (Linux 6.8) that name
//! the security modules the Sentry implements: capabilities and Landlock.

use std::sync::Arc;

use abi::landlock::{
    NetPortAttr, PathBeneathAttr, RulesetAttr, LANDLOCK_CREATE_RULESET_ERRATA,
    LANDLOCK_CREATE_RULESET_VERSION, LANDLOCK_RESTRICT_SELF_FLAGS,
    LANDLOCK_RESTRICT_SELF_LOG_SUBDOMAINS_OFF, LANDLOCK_RULE_NET_PORT, LANDLOCK_RULE_PATH_BENEATH,
};
use abi::{Errno, OpenFlags};
use zerocopy::FromBytes;

use super::args::{Args, SyscallArgs};
use crate::kernel::auth::cap;
use crate::kernel::landlock::{Domain, Ruleset, ABI, ALL_FS, ALL_NET, ALL_SCOPES};
use crate::kernel::task::Task;
use crate::vfs::file::FileDescription;

/// Bytes of `struct landlock_ruleset_attr` that ABI 6 knows (file and
/// network rights, scopes), and the least a caller may pass (the first).
const KNOWN_ATTR: usize = 24;
const MIN_ATTR: usize = 8;
/// Largest attribute struct read (Linux's limit: a page).
const MAX_ATTR: usize = 4096;

/// `landlock_create_ruleset(attr, size, flags)`: a ruleset descriptor
/// (close-on-exec), or the ABI version with `LANDLOCK_CREATE_RULESET_VERSION`.
pub fn sys_landlock_create_ruleset(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (addr, size, flags) = (a.ptr(0), a.usize(1), a.u32(2));
    if flags != 0 {
        if addr != 0 || size != 0 {
            return Err(Errno::EINVAL);
        }
        return match flags {
            LANDLOCK_CREATE_RULESET_VERSION => Ok(ABI),
            // The errata fixed here: none is claimed.
            LANDLOCK_CREATE_RULESET_ERRATA => Ok(0),
            _ => Err(Errno::EINVAL),
        };
    }
    // copy_min_struct_from_user(): at least the first field, at most a
    // page, and zeros past what this ABI knows.
    if size < MIN_ATTR {
        return Err(Errno::EINVAL);
    }
    if size > MAX_ATTR {
        return Err(Errno::E2BIG);
    }
    let mut raw = vec![0u8; size];
    task.mm().copy_in(addr, &mut raw)?;
    if raw
        .get(KNOWN_ATTR..)
        .is_some_and(|tail| tail.iter().any(|&b| b != 0))
    {
        return Err(Errno::E2BIG);
    }
    raw.resize(size_of::<RulesetAttr>().max(size), 0);
    let (attr, _) = RulesetAttr::read_from_prefix(&raw).map_err(|_| Errno::EINVAL)?;
    if attr.handled_access_fs & !ALL_FS != 0
        || attr.handled_access_net & !ALL_NET != 0
        || attr.scoped & !ALL_SCOPES != 0
    {
        return Err(Errno::EINVAL);
    }
    if attr.handled_access_fs == 0 && attr.handled_access_net == 0 && attr.scoped == 0 {
        // Nothing handled: a ruleset that could restrict nothing.
        return Err(Errno::ENOMSG);
    }
    let file = FileDescription::of_impl(
        Arc::new(Ruleset::new(
            attr.handled_access_fs,
            attr.handled_access_net,
            attr.scoped,
        )),
        None,
        OpenFlags::RDWR.bits(),
    );
    task.install_fd(file, true)
}

/// `LSM_ID_CAPABILITY` and `LSM_ID_LANDLOCK`: the security modules the
/// Sentry itself is (uapi/linux/lsm.h).
const LSM_IDS: [u64; 2] = [100, 110];

/// `lsm_list_modules(ids, size, flags)`: the modules' ids; `E2BIG`, with
/// the size needed, when `*size` bytes do not hold them.
pub fn sys_lsm_list_modules(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (ids, size_at, flags) = (a.ptr(0), a.ptr(1), a.u32(2));
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    let have: u32 = task.mm().read_obj(size_at)?;
    let need = (LSM_IDS.len() * 8) as u32;
    task.mm().write_obj(size_at, &need)?;
    if have < need {
        return Err(Errno::E2BIG);
    }
    for (i, id) in LSM_IDS.iter().enumerate() {
        task.mm().write_obj(ids + 8 * i as u64, id)?;
    }
    Ok(LSM_IDS.len() as u64)
}

/// `lsm_get_self_attr(attr, ctx, size, flags)`: neither module keeps a
/// process attribute (no `current`, `exec` context, as SELinux or
/// AppArmor have): none to give.
pub fn sys_lsm_get_self_attr(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    const LSM_FLAG_SINGLE: u32 = 1;
    let (size_at, flags) = (a.ptr(2), a.u32(3));
    if flags & !LSM_FLAG_SINGLE != 0 {
        return Err(Errno::EINVAL);
    }
    if size_at != 0 {
        task.mm().write_obj(size_at, &0u32)?;
    }
    Err(Errno::EOPNOTSUPP)
}

/// `lsm_set_self_attr(attr, ctx, size, flags)`: a well-formed context is
/// still refused (`EINVAL`): no module takes one.
pub fn sys_lsm_set_self_attr(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    /// `struct lsm_ctx`'s header: id, flags, len, ctx_len.
    const HEADER: u64 = 32;
    let (ctx, size, flags) = (a.ptr(1), a.u64(2), a.u32(3));
    if flags != 0 || !(HEADER..=crate::PAGE_SIZE).contains(&size) {
        return Err(Errno::EINVAL);
    }
    let mut raw = vec![0u8; size as usize];
    task.mm().copy_in(ctx, &mut raw)?;
    Err(Errno::EINVAL)
}

/// Landlock's check of a TCP `bind` or `connect` (`want`: `BIND_TCP` or
/// `CONNECT_TCP`) to `port` by the caller.
pub(super) fn check_tcp(task: &Task, want: u64, port: u16) -> Result<(), Errno> {
    match &task.landlock {
        Some(d) => d.check_port(want, port),
        None => Ok(()),
    }
}

/// The ruleset behind descriptor `fd`: `EBADFD` for another kind of file.
fn ruleset_of(task: &Task, fd: i32) -> Result<Arc<Ruleset>, Errno> {
    let file = task.fds().file(i64::from(fd))?;
    file.downcast_arc::<Ruleset>().ok_or(Errno::EBADFD)
}

/// `landlock_add_rule(ruleset_fd, rule_type, rule_attr, flags)`.
pub fn sys_landlock_add_rule(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    if a.u32(3) != 0 {
        return Err(Errno::EINVAL);
    }
    let ruleset = ruleset_of(task, a.i32(0))?;
    match a.u32(1) {
        LANDLOCK_RULE_PATH_BENEATH => {}
        LANDLOCK_RULE_NET_PORT => {
            let attr: NetPortAttr = task.mm().read_obj(a.ptr(2))?;
            if attr.allowed_access == 0 {
                return Err(Errno::ENOMSG);
            }
            if attr.allowed_access & !ruleset.handled_net() != 0 {
                return Err(Errno::EINVAL);
            }
            let port = u16::try_from(attr.port).map_err(|_| Errno::EINVAL)?;
            ruleset.add_port(port, attr.allowed_access);
            return Ok(0);
        }
        _ => return Err(Errno::EINVAL),
    }
    let attr: PathBeneathAttr = task.mm().read_obj(a.ptr(2))?;
    let (rights, parent_fd) = (attr.allowed_access, attr.parent_fd);
    if rights == 0 {
        return Err(Errno::ENOMSG);
    }
    if rights & !ruleset.handled() != 0 {
        return Err(Errno::EINVAL);
    }
    let file = task.fds().file(i64::from(parent_fd))?;
    // Descriptors of no file system the guest can name (pipes, sockets,
    // anonymous files, rulesets) have no hierarchy to rule.
    let loc = file.location.clone().ok_or(Errno::EBADFD)?;
    ruleset.add_path(&loc, rights)?;
    Ok(0)
}

/// `landlock_restrict_self(ruleset_fd, flags)`: the calling thread (and
/// its future children) gets a new layer. Needs `no_new_privs` or
/// `CAP_SYS_ADMIN`, as seccomp filters do, so a set-user-ID program never
/// runs under a policy its caller chose.
pub fn sys_landlock_restrict_self(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    if !task.no_new_privs && !task.capable(cap::SYS_ADMIN) {
        return Err(Errno::EPERM);
    }
    // ABI 7's audit flags: taken, and nothing to do (the sandbox keeps no
    // audit log); with only LOG_SUBDOMAINS_OFF no ruleset is needed.
    let flags = a.u32(1);
    if flags & !LANDLOCK_RESTRICT_SELF_FLAGS != 0 {
        return Err(Errno::EINVAL);
    }
    if a.i32(0) == -1 && flags == LANDLOCK_RESTRICT_SELF_LOG_SUBDOMAINS_OFF {
        return Ok(0);
    }
    let ruleset = ruleset_of(task, a.i32(0))?;
    let domain = Arc::new(Domain::restrict(task.landlock.as_ref(), &ruleset)?);
    task.thread.state().landlock = Some(domain.clone());
    task.landlock = Some(domain);
    Ok(0)
}
