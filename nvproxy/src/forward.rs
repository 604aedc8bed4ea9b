//! The forwarding of one guest ioctl: checked against the running driver's
//! table, its parameters copied into the proxy's memory (with embedded
//! pointers and descriptors translated), handed to the driver, and copied
//! back. Guest memory, the driver and the descriptor table are traits, so
//! the Sentry plugs in its own and tests plug in doubles.

use abi::Errno;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

use crate::abi::{self as nv, status, RmAlloc, RmAllocMemoryWithFd, RmAllocWithRights, RmControl};
use crate::table::{Abi, Caps, Entry, List, Params, Size};

/// The guest's address space, as the proxy reads and writes it.
pub trait GuestMemory {
    /// Reads `out.len()` bytes at `addr` (`EFAULT` outside the guest's memory).
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), Errno>;
    /// Writes `data` at `addr`.
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Errno>;
}

/// The host driver behind one open NVIDIA file.
pub trait Driver {
    /// `ioctl(fd, request, params)` on the host, `params` being proxy
    /// memory whose embedded pointers point at other proxy memory. The
    /// driver's return value, or its errno.
    fn ioctl(&self, request: u32, params: &mut [u8]) -> Result<i32, Errno>;
    /// The host descriptor standing for the guest's descriptor `guest_fd`
    /// when that is an NVIDIA file of this sandbox.
    fn host_fd(&self, guest_fd: i32) -> Option<i32>;
}

/// What happened to a request, for the recorder (`--nvproxy-log`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// handed to the driver: the names of the escape and of its command or class
    Forwarded(&'static str, Option<&'static str>),
    /// answered by the proxy: what was asked and why it was refused
    Refused(String, &'static str),
}

/// A request's result and its record.
#[derive(Debug)]
pub struct Outcome {
    pub ret: Result<u64, Errno>,
    pub record: Record,
}

fn refused(ret: Result<u64, Errno>, what: String, why: &'static str) -> Outcome {
    Outcome {
        ret,
        record: Record::Refused(what, why),
    }
}

/// What a control or an allocation made of its command: the driver's
/// answer, and the command's name or why the proxy answered instead.
type Inner = (
    Result<i32, Errno>,
    Option<Result<&'static str, (String, &'static str)>>,
);

/// The proxy of one sandbox: the running driver's table and what the
/// sandbox may do.
pub struct Proxy {
    pub abi: Abi,
    pub caps: Caps,
}

impl Proxy {
    pub fn new(abi: Abi, caps: Caps) -> Proxy {
        Proxy { abi, caps }
    }

    fn allowed(&self, e: &Entry) -> bool {
        e.caps.intersects(self.caps)
    }

    /// The entry for `key`, or the driver's answer to a request it does
    /// not know (`EINVAL`), also for one whose capability is not granted.
    fn lookup(
        &self,
        table: &std::collections::BTreeMap<u32, Entry>,
        key: u32,
        what: &str,
    ) -> Result<Entry, Outcome> {
        match table.get(&key) {
            None => Err(refused(
                Err(Errno::EINVAL),
                format!("{what} {key:#x}"),
                "not in the table",
            )),
            Some(e) if !self.allowed(e) => Err(refused(
                Err(Errno::EINVAL),
                e.name.into(),
                "its capability is not granted",
            )),
            Some(e) => Ok(*e),
        }
    }

    /// An `ioctl(2)` on `/dev/nvidiactl` or `/dev/nvidiaN`.
    pub fn frontend(
        &self,
        mem: &dyn GuestMemory,
        drv: &dyn Driver,
        request: u32,
        arg: u64,
    ) -> Outcome {
        let Some((nr, size)) = nv::split_frontend_request(request) else {
            return refused(
                Err(Errno::EINVAL),
                format!("ioctl {request:#x}"),
                "not an NVIDIA frontend request",
            );
        };
        let e = match self.lookup(&self.abi.frontend, nr, "frontend escape") {
            Ok(e) => e,
            Err(o) => return o,
        };
        if !e.size.allows(size) {
            return refused(
                Err(Errno::EINVAL),
                format!("{} with {size} bytes", e.name),
                "wrong parameter size",
            );
        }
        let mut buf = vec![0u8; size];
        if let Err(err) = mem.read(arg, &mut buf) {
            return refused(Err(err), e.name.into(), "parameters outside guest memory");
        }
        let (ret, inner) = match e.params {
            Params::Control => self.control(mem, drv, request, &mut buf),
            Params::Alloc => self.alloc(mem, drv, request, &mut buf),
            Params::AllocMemory(classes) => {
                let class = RmAllocMemoryWithFd::read_from_bytes(&buf).map_or(0, |p| p.h_class);
                if !classes.contains(&class) {
                    return refused(
                        Err(Errno::EINVAL),
                        format!("{} of class {class:#x}", e.name),
                        "only plain memory classes",
                    );
                }
                let fds = Params::Fds(crate::table::ALLOC_MEMORY_FDS);
                (
                    with_fds(drv, fds, &mut buf, |b| drv.ioctl(request, b)),
                    None,
                )
            }
            p => (with_fds(drv, p, &mut buf, |b| drv.ioctl(request, b)), None),
        };
        // The driver copies its parameters back unless the copy-in faulted.
        let ret = match ret {
            Ok(r) => mem.write(arg, &buf).map(|()| r as u64),
            Err(Errno::EFAULT) => Err(Errno::EFAULT),
            Err(err) => mem.write(arg, &buf).and(Err(err)),
        };
        match inner {
            Some(Err((what, why))) => Outcome {
                ret,
                record: Record::Refused(what, why),
            },
            Some(Ok(name)) => Outcome {
                ret,
                record: Record::Forwarded(e.name, Some(name)),
            },
            None => Outcome {
                ret,
                record: Record::Forwarded(e.name, None),
            },
        }
    }

    /// An `ioctl(2)` on `/dev/nvidia-uvm`.
    pub fn uvm(&self, mem: &dyn GuestMemory, drv: &dyn Driver, request: u32, arg: u64) -> Outcome {
        let e = match self.lookup(&self.abi.uvm, request, "UVM request") {
            Ok(e) => e,
            Err(o) => return o,
        };
        let Size::Exact(size) = e.size else {
            return refused(
                Err(Errno::EINVAL),
                e.name.into(),
                "not a fixed-size UVM request",
            );
        };
        let mut buf = vec![0u8; size];
        if size > 0 {
            if let Err(err) = mem.read(arg, &mut buf) {
                return refused(Err(err), e.name.into(), "parameters outside guest memory");
            }
        }
        let asked = (e.params == Params::UvmInitialize).then(|| field_u64(&buf, 0).unwrap_or(0));
        if let Some(flags) = asked {
            buf[0..8].copy_from_slice(&(flags | UVM_INIT_FLAGS_FORCED).to_ne_bytes());
        }
        let ret = with_fds(drv, e.params, &mut buf, |b| drv.ioctl(request, b));
        // The guest sees the flags it gave.
        if let Some(flags) = asked {
            buf[0..8].copy_from_slice(&flags.to_ne_bytes());
        }
        let ret = match ret {
            Ok(r) if size > 0 => mem.write(arg, &buf).map(|()| r as u64),
            r => r.map(|r| r as u64),
        };
        Outcome {
            ret,
            record: Record::Forwarded(e.name, None),
        }
    }

    /// `NV_ESC_RM_CONTROL`: the command's own parameters come in behind
    /// `params`. An unknown command is answered as RM answers it, with
    /// `NV_ERR_NOT_SUPPORTED` in `status` and success from the ioctl.
    fn control(
        &self,
        mem: &dyn GuestMemory,
        drv: &dyn Driver,
        request: u32,
        buf: &mut [u8],
    ) -> Inner {
        let Ok(mut p) = RmControl::read_from_bytes(buf) else {
            return (Err(Errno::EINVAL), None);
        };
        let answer = |buf: &mut [u8], mut p: RmControl, st: u32, why: &'static str| {
            p.status = st;
            buf.copy_from_slice(p.as_bytes());
            (Ok(0), Some(Err((format!("control {:#010x}", p.cmd), why))))
        };
        let Some(e) = self.abi.control.get(&p.cmd).copied() else {
            return answer(buf, p, status::NOT_SUPPORTED, "not in the table");
        };
        if !self.allowed(&e) {
            return answer(
                buf,
                p,
                status::NOT_SUPPORTED,
                "its capability is not granted",
            );
        }
        let size = p.params_size as usize;
        if !e.size.allows(size) || (size != 0 && p.params == 0) {
            return answer(buf, p, status::INVALID_ARGUMENT, "wrong parameter size");
        }
        let guest_params = p.params;
        let mut inner = vec![0u8; size];
        if size != 0 && mem.read(guest_params, &mut inner).is_err() {
            return answer(
                buf,
                p,
                status::INVALID_POINTER,
                "parameters outside guest memory",
            );
        }
        let lists = match e.params {
            Params::Lists(l) => l,
            _ => &[],
        };
        let mut arrays = match copy_in_lists(mem, lists, &mut inner) {
            Ok(a) => a,
            Err(st) => return answer(buf, p, st, "a list outside guest memory or too long"),
        };
        if size != 0 {
            p.params = inner.as_mut_ptr() as u64;
        }
        buf.copy_from_slice(p.as_bytes());
        let ret = with_fds(drv, e.params, &mut inner, |_| drv.ioctl(request, buf));
        // What goes back names the guest's own pointers again.
        let mut back = RmControl::read_from_bytes(buf).unwrap_or(p);
        back.params = guest_params;
        buf.copy_from_slice(back.as_bytes());
        let out = copy_out_lists(mem, lists, &mut inner, &mut arrays).and_then(|()| {
            if size != 0 {
                mem.write(guest_params, &inner)
            } else {
                Ok(())
            }
        });
        if out.is_err() {
            return (Err(Errno::EFAULT), Some(Ok(e.name)));
        }
        (ret, Some(Ok(e.name)))
    }

    /// `NV_ESC_RM_ALLOC` (`NVOS21` or `NVOS64`): the class's parameters
    /// come in behind `pAllocParms`, an unknown class is answered with
    /// `NV_ERR_INVALID_CLASS`.
    fn alloc(
        &self,
        mem: &dyn GuestMemory,
        drv: &dyn Driver,
        request: u32,
        buf: &mut [u8],
    ) -> Inner {
        // Both shapes start alike; NVOS64 adds the rights pointer.
        let (class, params_ptr, params_size, rights_ptr) =
            if buf.len() == size_of::<RmAllocWithRights>() {
                let Ok(p) = RmAllocWithRights::read_from_bytes(buf) else {
                    return (Err(Errno::EINVAL), None);
                };
                (
                    p.h_class,
                    p.p_alloc_parms,
                    p.params_size,
                    Some(p.p_rights_requested),
                )
            } else {
                let Ok(p) = RmAlloc::read_from_bytes(buf) else {
                    return (Err(Errno::EINVAL), None);
                };
                (p.h_class, p.p_alloc_parms, p.params_size, None)
            };
        let status_at = if rights_ptr.is_some() {
            core::mem::offset_of!(RmAllocWithRights, status)
        } else {
            core::mem::offset_of!(RmAlloc, status)
        };
        let answer = |buf: &mut [u8], st: u32, why: &'static str| {
            buf[status_at..status_at + 4].copy_from_slice(&st.to_ne_bytes());
            (Ok(0), Some(Err((format!("class {class:#06x}"), why))))
        };
        let Some(e) = self.abi.alloc.get(&class).copied() else {
            return answer(buf, status::INVALID_CLASS, "not in the table");
        };
        if !self.allowed(&e) {
            return answer(
                buf,
                status::INSUFFICIENT_PERMISSIONS,
                "its capability is not granted",
            );
        }
        // Some classes take no parameters and get a null pointer.
        let size = if params_ptr == 0 {
            0
        } else {
            params_size as usize
        };
        if size != 0 && !e.size.allows(size) {
            return answer(buf, status::INVALID_ARGUMENT, "wrong parameter size");
        }
        let mut inner = vec![0u8; size];
        if size != 0 && mem.read(params_ptr, &mut inner).is_err() {
            return answer(
                buf,
                status::INVALID_POINTER,
                "parameters outside guest memory",
            );
        }
        // An event's `data` (offset 16, 64 bits) is a descriptor; its
        // class (offset 8) must be the OS event: the others carry kernel
        // callbacks.
        let mut event_data = None;
        if e.params == Params::OsEvent {
            if size != 24 || field_u32(&inner, 8) != Some(NV01_EVENT_OS_EVENT) {
                return answer(
                    buf,
                    status::INVALID_CLASS,
                    "an event other than an OS event",
                );
            }
            let guest = field_u64(&inner, 16).unwrap_or_default();
            let host = drv.host_fd(guest as u32 as i32).unwrap_or(-1);
            inner[16..24].copy_from_slice(&(host as i64 as u64).to_ne_bytes());
            event_data = Some(guest);
        }
        let mut rights = [0u8; 4];
        if let Some(r) = rights_ptr.filter(|&r| r != 0) {
            if mem.read(r, &mut rights).is_err() {
                return answer(buf, status::INVALID_POINTER, "rights outside guest memory");
            }
        }
        let patch = |buf: &mut [u8], params: u64, rights: u64| {
            if let Some(rp) = rights_ptr {
                let mut p = RmAllocWithRights::read_from_bytes(&*buf)
                    .unwrap_or_else(|_| FromZeros::new_zeroed());
                p.p_alloc_parms = params;
                p.p_rights_requested = if rp == 0 { 0 } else { rights };
                buf.copy_from_slice(p.as_bytes());
            } else {
                let mut p =
                    RmAlloc::read_from_bytes(&*buf).unwrap_or_else(|_| FromZeros::new_zeroed());
                p.p_alloc_parms = params;
                buf.copy_from_slice(p.as_bytes());
            }
        };
        let proxy_params = if size != 0 {
            inner.as_mut_ptr() as u64
        } else {
            0
        };
        patch(buf, proxy_params, rights.as_mut_ptr() as u64);
        let ret = with_fds(drv, e.params, &mut inner, |_| drv.ioctl(request, buf));
        patch(buf, params_ptr, rights_ptr.unwrap_or(0));
        if let Some(guest) = event_data {
            inner[16..24].copy_from_slice(&guest.to_ne_bytes());
        }
        if size != 0 && mem.write(params_ptr, &inner).is_err() {
            return (Err(Errno::EFAULT), Some(Ok(e.name)));
        }
        (ret, Some(Ok(e.name)))
    }
}

/// `UVM_INIT_FLAGS_DISABLE_HMM | UVM_INIT_FLAGS_MULTI_PROCESS_SHARING_MODE`
/// (uvm_types.h), set on every `UVM_INITIALIZE`.
const UVM_INIT_FLAGS_FORCED: u64 = 0x1 | 0x2;

/// The class of `NV0005_ALLOC_PARAMETERS` that takes a descriptor (cl0079.h).
const NV01_EVENT_OS_EVENT: u32 = 0x79;

/// Runs `call` with the descriptor fields of `buf` that `params` names
/// turned into host descriptors, and the guest's values put back after.
/// A descriptor that is not an NVIDIA file of the sandbox becomes -1, which
/// the driver refuses as it refuses any bad descriptor.
fn with_fds(
    drv: &dyn Driver,
    params: Params,
    buf: &mut [u8],
    call: impl FnOnce(&mut [u8]) -> Result<i32, Errno>,
) -> Result<i32, Errno> {
    let Params::Fds(offsets) = params else {
        return call(buf);
    };
    let mut saved = Vec::with_capacity(offsets.len());
    for &at in offsets {
        let Some(field) = buf.get_mut(at..at + 4) else {
            return Err(Errno::EINVAL);
        };
        let guest = i32::from_ne_bytes([field[0], field[1], field[2], field[3]]);
        let host = drv.host_fd(guest).unwrap_or(-1);
        field.copy_from_slice(&host.to_ne_bytes());
        saved.push((at, guest));
    }
    let ret = call(buf);
    for (at, guest) in saved {
        buf[at..at + 4].copy_from_slice(&guest.to_ne_bytes());
    }
    ret
}

fn field_u32(buf: &[u8], at: usize) -> Option<u32> {
    buf.get(at..at + 4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

fn field_u64(buf: &[u8], at: usize) -> Option<u64> {
    let b = buf.get(at..at + 8)?;
    Some(u64::from_ne_bytes(b.try_into().ok()?))
}

/// The arrays behind a control's pointer fields, read from the guest, with
/// the pointers in `inner` turned to proxy memory. Each array is the
/// guest's pointer and its copy.
fn copy_in_lists(
    mem: &dyn GuestMemory,
    lists: &[List],
    inner: &mut [u8],
) -> Result<Vec<(u64, Vec<u8>)>, u32> {
    let mut arrays = Vec::with_capacity(lists.len());
    for l in lists {
        let count = field_u32(inner, l.count).ok_or(status::INVALID_ARGUMENT)?;
        let ptr = field_u64(inner, l.ptr).ok_or(status::INVALID_ARGUMENT)?;
        if count > l.max {
            return Err(status::INVALID_ARGUMENT);
        }
        let len = count as usize * l.elem;
        let mut a = vec![0u8; len];
        if ptr != 0 && len != 0 {
            mem.read(ptr, &mut a).map_err(|_| status::INVALID_POINTER)?;
        }
        arrays.push((ptr, a));
    }
    for (l, (ptr, a)) in lists.iter().zip(arrays.iter_mut()) {
        let proxy = if *ptr == 0 { 0 } else { a.as_mut_ptr() as u64 };
        inner[l.ptr..l.ptr + 8].copy_from_slice(&proxy.to_ne_bytes());
    }
    Ok(arrays)
}

/// Puts the guest's pointers back into `inner` and copies the arrays out.
fn copy_out_lists(
    mem: &dyn GuestMemory,
    lists: &[List],
    inner: &mut [u8],
    arrays: &mut [(u64, Vec<u8>)],
) -> Result<(), Errno> {
    for (l, (ptr, a)) in lists.iter().zip(arrays.iter()) {
        inner[l.ptr..l.ptr + 8].copy_from_slice(&ptr.to_ne_bytes());
        if *ptr != 0 && !a.is_empty() {
            mem.write(*ptr, a)?;
        }
    }
    Ok(())
}

impl std::fmt::Display for Record {
    /// One line of the `--nvproxy-log` recorder.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Record::Forwarded(esc, Some(cmd)) => write!(f, "forwarded {esc} {cmd}"),
            Record::Forwarded(esc, None) => write!(f, "forwarded {esc}"),
            Record::Refused(what, why) => write!(f, "refused {what}: {why}"),
        }
    }
}
