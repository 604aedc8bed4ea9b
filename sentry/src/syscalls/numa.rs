//! NUMA memory policy: `set_mempolicy(2)`, `get_mempolicy(2)`, `mbind(2)`,
//! `migrate_pages(2)`, `move_pages(2)`, as Linux answers them on a machine
//! with one memory node, node 0. Policies are kept (per thread, per VMA) and
//! read back; every page is on node 0 already, so nothing ever moves.

use std::sync::{Arc, Mutex};

use abi::Errno;

use super::args::{Args, SyscallArgs};
use crate::kernel::auth::cap;
use crate::kernel::task::Task;
use crate::mm::{page_up, MemPolicy, MemoryManager};
use crate::sync::Locked;
use crate::PAGE_SIZE;

const MPOL_DEFAULT: i32 = 0;
const MPOL_PREFERRED: i32 = 1;
const MPOL_BIND: i32 = 2;
const MPOL_INTERLEAVE: i32 = 3;
const MPOL_LOCAL: i32 = 4;
const MPOL_PREFERRED_MANY: i32 = 5;
const MPOL_WEIGHTED_INTERLEAVE: i32 = 6;
const MPOL_MAX: i32 = 7;

const MPOL_F_STATIC_NODES: i32 = 1 << 15;
const MPOL_F_RELATIVE_NODES: i32 = 1 << 14;
const MPOL_F_NUMA_BALANCING: i32 = 1 << 13;
const MPOL_MODE_FLAGS: i32 = MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES | MPOL_F_NUMA_BALANCING;

/// `get_mempolicy(2)` flags.
const MPOL_F_NODE: u64 = 1;
const MPOL_F_ADDR: u64 = 2;
const MPOL_F_MEMS_ALLOWED: u64 = 4;

/// `mbind(2)` and `move_pages(2)` flags.
const MPOL_MF_STRICT: u32 = 1;
const MPOL_MF_MOVE: u32 = 2;
const MPOL_MF_MOVE_ALL: u32 = 4;

/// The host kernel's `MAX_NUMNODES` (`CONFIG_NODES_SHIFT=10`): node bits
/// from here on are `EINVAL`.
const MAX_NUMNODES: u64 = 1024;
/// Words of a node mask up to `MAX_NUMNODES`.
const MASK_WORDS: u64 = MAX_NUMNODES / 64;

/// A node mask read from the guest: its first word and whether any later
/// word has a bit set (no node but 0 exists, so nothing else matters).
#[derive(Clone, Copy, Debug, Default)]
struct Nodes {
    first: u64,
    rest: bool,
}

impl Nodes {
    fn is_empty(self) -> bool {
        self.first == 0 && !self.rest
    }

    fn has_node0(self) -> bool {
        self.first & 1 != 0
    }

    /// Whether it names a node other than 0.
    fn has_others(self) -> bool {
        self.first & !1 != 0 || self.rest
    }
}

/// Linux's `get_nodes()`: `maxnode - 1` bits of the mask at `nmask`;
/// bits at or past `MAX_NUMNODES` must be clear, and more than a page of
/// bits is `EINVAL`.
fn get_nodes(task: &Task, nmask: u64, maxnode: u64) -> Result<Nodes, Errno> {
    let mut bits = maxnode.wrapping_sub(1);
    if bits == 0 || nmask == 0 {
        return Ok(Nodes::default());
    }
    if bits > PAGE_SIZE * 8 {
        return Err(Errno::EINVAL);
    }
    let mm = task.mm();
    let word = |i: u64| {
        let at = nmask.checked_add(i * 8).ok_or(Errno::EFAULT)?;
        mm.read_obj::<u64>(at)
    };
    // The words past the nodes there can be, from the last one down
    // (whole words, as Linux reads them).
    while bits > MAX_NUMNODES {
        let n = bits.min(64);
        let mut t = word((bits - 1) / 64)?;
        if bits - n >= MAX_NUMNODES {
            bits -= n;
        } else {
            bits = MAX_NUMNODES;
            t &= !((1u64 << (MAX_NUMNODES % 64)) - 1);
        }
        if t != 0 {
            return Err(Errno::EINVAL);
        }
    }
    let words = bits.div_ceil(64).min(MASK_WORDS);
    let mut nodes = Nodes::default();
    for i in 0..words {
        let mut w = word(i)?;
        if i == words - 1 && !bits.is_multiple_of(64) {
            w &= (1u64 << (bits % 64)) - 1;
        }
        if i == 0 {
            nodes.first = w;
        } else {
            nodes.rest |= w != 0;
        }
    }
    Ok(nodes)
}

/// Linux's `sanitize_mpol_flags()`: the mode and its mode flags.
fn split_mode(mode: i32) -> Result<(i32, i32), Errno> {
    let flags = mode & MPOL_MODE_FLAGS;
    let mode = mode & !MPOL_MODE_FLAGS;
    if mode as u32 >= MPOL_MAX as u32
        || flags & MPOL_F_STATIC_NODES != 0 && flags & MPOL_F_RELATIVE_NODES != 0
    {
        return Err(Errno::EINVAL);
    }
    if flags & MPOL_F_NUMA_BALANCING != 0 && mode != MPOL_BIND && mode != MPOL_PREFERRED_MANY {
        return Err(Errno::EINVAL);
    }
    Ok((mode, flags))
}

/// Linux's `mpol_new()` and `mpol_set_nodemask()` on one node: the policy
/// (`None` for the default), `EINVAL` when it names no usable node.
fn new_policy(mode: i32, flags: i32, nodes: Nodes) -> Result<Option<MemPolicy>, Errno> {
    let user_mask = flags & (MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES) != 0;
    let mode = match mode {
        MPOL_DEFAULT if nodes.is_empty() => return Ok(None),
        MPOL_DEFAULT => return Err(Errno::EINVAL),
        // An empty preferred set means local allocation.
        MPOL_PREFERRED if nodes.is_empty() && user_mask => return Err(Errno::EINVAL),
        MPOL_PREFERRED if nodes.is_empty() => MPOL_LOCAL,
        MPOL_LOCAL if !nodes.is_empty() || user_mask => return Err(Errno::EINVAL),
        MPOL_LOCAL => MPOL_LOCAL,
        _ if nodes.is_empty() => return Err(Errno::EINVAL),
        m => m,
    };
    if mode == MPOL_LOCAL {
        return Ok(Some(MemPolicy {
            mode: mode | flags,
            nodes: 0,
        }));
    }
    // Relative nodes fold onto the allowed ones (node 0 alone); others
    // are intersected with them.
    if !flags & MPOL_F_RELATIVE_NODES != 0 && !nodes.has_node0() {
        return Err(Errno::EINVAL);
    }
    // With STATIC or RELATIVE the caller's own mask is what
    // get_mempolicy reports; otherwise the nodes in use.
    Ok(Some(MemPolicy {
        mode: mode | flags,
        nodes: if user_mask { nodes.first } else { 1 },
    }))
}

/// Why [`NumaPolicy::new`] refuses a policy: what `set_mempolicy(2)`
/// answers `EINVAL` for here.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NumaPolicyError {
    /// STATIC_NODES with RELATIVE_NODES, or NUMA_BALANCING without BIND
    /// or PREFERRED_MANY
    #[error("the mode and flags do not go together (STATIC_NODES with RELATIVE_NODES, or NUMA_BALANCING but with BIND or PREFERRED_MANY)")]
    Flags,
    /// a node past `MAX_NUMNODES`
    #[error("node {0} is past the last node there can be")]
    NoSuchNode(usize),
    /// a mode that needs nodes, given none
    #[error("this mode needs nodes")]
    NeedsNodes,
    /// DEFAULT or LOCAL, given nodes
    #[error("this mode takes no nodes")]
    TakesNoNodes,
    /// nodes, none of them node 0
    #[error("the sandbox has one memory node, node 0")]
    OneNode,
}

/// A NUMA policy the sandbox's first thread starts with (OCI
/// `linux.memoryPolicy`), as its own `set_mempolicy(2)` would set it.
#[derive(Clone, Copy, Debug, Default)]
pub struct NumaPolicy(Option<MemPolicy>);

impl NumaPolicy {
    /// `mode` (an `MPOL_*` ORed with `MPOL_F_*` flags) over `nodes`, or
    /// why `set_mempolicy(2)` would refuse it here.
    pub fn new(mode: i32, nodes: &[usize]) -> Result<NumaPolicy, NumaPolicyError> {
        let (m, flags) = split_mode(mode).map_err(|_| NumaPolicyError::Flags)?;
        let mut mask = Nodes::default();
        for &n in nodes {
            match n {
                0..64 => mask.first |= 1 << n,
                _ if (n as u64) < MAX_NUMNODES => mask.rest = true,
                _ => return Err(NumaPolicyError::NoSuchNode(n)),
            }
        }
        new_policy(m, flags, mask).map(NumaPolicy).map_err(|_| {
            if mask.is_empty() {
                NumaPolicyError::NeedsNodes
            } else if matches!(m, MPOL_DEFAULT | MPOL_LOCAL) {
                NumaPolicyError::TakesNoNodes
            } else {
                NumaPolicyError::OneNode
            }
        })
    }

    /// Gives `task` this policy.
    pub(crate) fn apply(self, task: &Task) {
        task.thread.state().mempolicy = self.0;
    }
}

pub fn sys_set_mempolicy(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (mode, flags) = split_mode(a.i32(0))?;
    let nodes = get_nodes(task, a.ptr(1), a.u64(2))?;
    let pol = new_policy(mode, flags, nodes)?;
    task.thread.state().mempolicy = pol;
    Ok(0)
}

pub fn sys_get_mempolicy(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (policy, nmask, maxnode, addr, flags) = (a.ptr(0), a.ptr(1), a.u64(2), a.ptr(3), a.u64(4));
    // nr_node_ids is 1
    if nmask != 0 && maxnode < 1 {
        return Err(Errno::EINVAL);
    }
    if flags & !(MPOL_F_NODE | MPOL_F_ADDR | MPOL_F_MEMS_ALLOWED) != 0 {
        return Err(Errno::EINVAL);
    }
    let (pval, mask) = if flags & MPOL_F_MEMS_ALLOWED != 0 {
        if flags & (MPOL_F_NODE | MPOL_F_ADDR) != 0 {
            return Err(Errno::EINVAL);
        }
        (0, 1)
    } else {
        // MPOL_F_ADDR reads the VMA's policy, never falling back to the
        // thread's: no VMA policy reads as MPOL_DEFAULT.
        let pol = if flags & MPOL_F_ADDR != 0 {
            let mm = task.mm();
            let v = mm.find_vma(addr).ok_or(Errno::EFAULT)?;
            // MPOL_F_NODE with it: the node of the page, which Linux
            // faults in for reading.
            if flags & MPOL_F_NODE != 0 && !v.prot.read {
                return Err(Errno::EFAULT);
            }
            v.mempolicy
        } else if addr != 0 {
            return Err(Errno::EINVAL);
        } else {
            task.thread.state().mempolicy
        };
        let mask = pol.map_or(0, |p| p.nodes);
        if flags & MPOL_F_NODE == 0 {
            (pol.map_or(MPOL_DEFAULT, |p| p.mode), mask)
        } else if flags & MPOL_F_ADDR != 0 {
            (0, mask)
        } else {
            // The thread's next interleave node: node 0, the only one.
            match pol.map(|p| p.mode & !MPOL_MODE_FLAGS) {
                Some(MPOL_INTERLEAVE | MPOL_WEIGHTED_INTERLEAVE) => (0, mask),
                _ => return Err(Errno::EINVAL),
            }
        }
    };
    if policy != 0 {
        task.mm().write_obj(policy, &pval)?;
    }
    if nmask != 0 {
        // copy_nodes_to_user(): as many bytes as maxnode - 1 bits round up
        // to in words, of which all but the first word (one node's worth)
        // are cleared; more than a page is EINVAL.
        let copy = maxnode
            .wrapping_sub(1)
            .checked_next_multiple_of(64)
            .map_or(u64::MAX, |b| b / 8);
        let mm = task.mm();
        if copy > 8 {
            if copy > PAGE_SIZE {
                return Err(Errno::EINVAL);
            }
            let zeros = [0u8; PAGE_SIZE as usize];
            mm.copy_out(nmask.wrapping_add(8), &zeros[..(copy - 8) as usize])?;
        }
        if copy >= 8 {
            mm.write_obj(nmask, &mask)?;
        }
    }
    Ok(0)
}

pub fn sys_mbind(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (start, len) = (a.ptr(0), a.u64(1));
    let (mode, mode_flags) = split_mode(a.u64(2) as i32)?;
    let nodes = get_nodes(task, a.ptr(3), a.u64(4))?;
    let mut flags = a.u32(5);
    if flags & !(MPOL_MF_STRICT | MPOL_MF_MOVE | MPOL_MF_MOVE_ALL) != 0 {
        return Err(Errno::EINVAL);
    }
    if flags & MPOL_MF_MOVE_ALL != 0 && !task.capable(cap::SYS_NICE) {
        return Err(Errno::EPERM);
    }
    if !start.is_multiple_of(PAGE_SIZE) {
        return Err(Errno::EINVAL);
    }
    if mode == MPOL_DEFAULT {
        flags &= !MPOL_MF_STRICT;
    }
    // PAGE_ALIGN wraps to 0 for the last page's lengths, as Linux's does.
    let len = page_up(len).unwrap_or(0);
    let end = start.wrapping_add(len);
    if end < start {
        return Err(Errno::EINVAL);
    }
    if end == start {
        return Ok(0);
    }
    let pol = new_policy(mode, mode_flags, nodes)?;
    let mut mm = task.mm();
    // A hole is EFAULT unless the policy is the default; a range with no
    // mapping at all always is.
    if !mm.vmas().any(|v| v.start < end && v.end > start) || pol.is_some() && !mm.covers(start, end)
    {
        return Err(Errno::EFAULT);
    }
    // MPOL_MF_STRICT without moving: a page already on a node outside
    // the caller's mask is EIO, and nothing changes. Every page is on
    // node 0, which only a relative or local policy's mask can leave out.
    if flags & MPOL_MF_STRICT != 0
        && flags & (MPOL_MF_MOVE | MPOL_MF_MOVE_ALL) == 0
        && !nodes.has_node0()
        && any_present(&mm, start, end)
    {
        return Err(Errno::EIO);
    }
    mm.set_mempolicy(start, end, pol);
    Ok(0)
}

/// `set_mempolicy_home_node(start, len, home_node, flags)`: the node to
/// allocate from first for the `MPOL_BIND` and `MPOL_PREFERRED_MANY`
/// mappings of the range (others: `EOPNOTSUPP`; those without a policy are
/// passed over, and a range with none at all is `ENOENT`). With one node,
/// node 0 is the only home, and the call changes nothing else.
pub fn sys_set_mempolicy_home_node(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (start, len, home, flags) = (a.ptr(0), a.u64(1), a.u64(2), a.u64(3));
    if flags != 0 || home != 0 || !start.is_multiple_of(PAGE_SIZE) {
        return Err(Errno::EINVAL);
    }
    let end = start.wrapping_add(page_up(len).unwrap_or(0));
    if end < start {
        return Err(Errno::EINVAL);
    }
    if end == start {
        return Ok(0);
    }
    let mm = task.mm();
    let mut r = Err(Errno::ENOENT);
    for v in mm.vmas().filter(|v| v.start < end && v.end > start) {
        if let Some(p) = &v.mempolicy {
            let mode = p.mode & !MPOL_MODE_FLAGS;
            if mode != MPOL_BIND && mode != MPOL_PREFERRED_MANY {
                return Err(Errno::EOPNOTSUPP);
            }
            r = Ok(0);
        }
    }
    r
}

/// Whether a page of `[start, end)` holds memory.
fn any_present(mm: &MemoryManager, start: u64, end: u64) -> bool {
    let mut chunk = [0u8; 64];
    let mut at = start;
    while at < end {
        let Some(v) = mm.vmas().find(|v| v.end > at) else {
            return false;
        };
        at = at.max(v.start);
        if at >= end {
            return false;
        }
        let want = ((v.end.min(end) - at) / PAGE_SIZE).min(chunk.len() as u64) as usize;
        let Ok(n) = mm.residency(at, &mut chunk[..want]) else {
            return false;
        };
        if chunk[..n].iter().any(|&b| b != 0) {
            return true;
        }
        at += n.max(1) as u64 * PAGE_SIZE;
    }
    false
}

/// The address space of `pid` (0: the caller's) for `migrate_pages` and
/// `move_pages`, under the ptrace read check; `EINVAL` once it has none.
fn target_mm(task: &Task, pid: i32) -> Result<Option<Arc<Mutex<MemoryManager>>>, Errno> {
    if pid == 0 {
        return Ok(None);
    }
    let th = task.kernel.thread(pid).ok_or(Errno::ESRCH)?;
    super::ptrace::may_access(task, &th)?;
    let mm = th.process.state().info.mm.upgrade();
    mm.map(Some).ok_or(Errno::EINVAL)
}

pub fn sys_migrate_pages(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (pid, maxnode) = (a.i32(0), a.u64(1));
    let _old = get_nodes(task, a.ptr(2), maxnode)?;
    let new = get_nodes(task, a.ptr(3), maxnode)?;
    target_mm(task, pid)?;
    // Nodes past the target's allowed ones need CAP_SYS_NICE; none of the
    // caller's allowed ones is EINVAL.
    if new.has_others() && !task.capable(cap::SYS_NICE) {
        return Err(Errno::EPERM);
    }
    if !new.has_node0() {
        return Err(Errno::EINVAL);
    }
    // Every page is on node 0 already: none is left unmoved.
    Ok(0)
}

/// `move_pages` status of the page at `addr`: its node, or `-ENOENT`
/// when no memory holds it yet, `-EFAULT` when unmapped.
fn page_status(mm: &MemoryManager, addr: u64) -> i32 {
    match mm.page_present(addr) {
        None => -Errno::EFAULT.0,
        Some(false) => -Errno::ENOENT.0,
        Some(true) => 0,
    }
}

pub fn sys_move_pages(task: &mut Task, a: &Args) -> Result<u64, Errno> {
    let (pid, count, pages, nodes, status) = (a.i32(0), a.u64(1), a.ptr(2), a.ptr(3), a.ptr(4));
    let flags = a.u32(5);
    if flags & !(MPOL_MF_MOVE | MPOL_MF_MOVE_ALL) != 0 {
        return Err(Errno::EINVAL);
    }
    if flags & MPOL_MF_MOVE_ALL != 0 && !task.capable(cap::SYS_NICE) {
        return Err(Errno::EPERM);
    }
    let other = target_mm(task, pid)?;
    // The statuses of a chunk of pages, read and written in the caller's
    // memory, looked up in the target's (16 at a time, as Linux).
    const CHUNK: u64 = 16;
    let mut done = 0u64;
    while done < count {
        let n = (count - done).min(CHUNK);
        let mut addrs = Vec::with_capacity(n as usize);
        let mut stop = None;
        {
            let mm = task.mm();
            for i in done..done + n {
                let page = match mm.read_obj::<u64>(pages.wrapping_add(i * 8)) {
                    Ok(p) => p,
                    // Without nodes, Linux reads a chunk whole first.
                    Err(e) if nodes == 0 => return Err(e),
                    Err(e) => {
                        stop = Some(e);
                        break;
                    }
                };
                if nodes != 0 {
                    match mm.read_obj::<i32>(nodes.wrapping_add(i * 4)) {
                        Ok(0) => {}
                        // Only node 0 has memory.
                        Ok(_) => stop = Some(Errno::ENODEV),
                        Err(e) => stop = Some(e),
                    }
                    if stop.is_some() {
                        break;
                    }
                }
                addrs.push(page);
            }
        }
        let statuses: Vec<i32> = match &other {
            None => {
                let mm = task.mm();
                addrs.iter().map(|&p| page_status(&mm, p)).collect()
            }
            Some(m) => {
                let mm = m.locked();
                addrs.iter().map(|&p| page_status(&mm, p)).collect()
            }
        };
        let out: Vec<u8> = statuses.iter().flat_map(|s| s.to_ne_bytes()).collect();
        task.mm().copy_out(status.wrapping_add(done * 4), &out)?;
        if let Some(e) = stop {
            return Err(e);
        }
        done += n;
    }
    Ok(0)
}
