//! The KVM platform: guest code runs in ring 3 of a KVM virtual machine
//! whose page tables, descriptor tables and entry points the Sentry owns.
//! Only guest code runs in the VM; the Sentry stays a host process.
//!
//! * Guest-physical memory is the memory file (from 0) plus two regions of
//!   the platform's own: [`layout`] (descriptor tables, entry stubs, a
//!   ring-0 stack per vCPU) and the page-table frames ([`paging`]).
//! * Each guest address space is a 4-level page-table tree the Sentry
//!   writes ([`paging::KvmAddressSpace`]); the platform's pages sit in the
//!   upper half, supervisor-only, in every tree.
//! * Each Sentry task thread owns a vCPU ([`vcpu::KvmContext`]). Every
//!   vector and `syscall` lands in a ring-0 stub of two instructions, an
//!   `out` that exits to the Sentry at once; the registers come and go
//!   through `KVM_CAP_SYNC_REGS`, so a system call costs one exit and one
//!   `KVM_RUN`.
//! * On PVM hosts (no VMX), `syscall` from ring 3 jumps to `LSTAR` without
//!   leaving ring 3: the fetch of the supervisor-only stub page faults, and
//!   the page fault's stub exits instead. Both paths are decoded.
//!
//! Host calls outside `kvm-ioctls` are in `sys`; the few other `unsafe`
//! blocks are `kvm-ioctls`' own unsafe calls (memory slots, descriptors
//! taken over, `KVM_SET_XSAVE`).

mod layout;
mod paging;
mod sys;
mod vcpu;

use std::os::fd::BorrowedFd;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use kvm_bindings::{kvm_userspace_memory_region, CpuId, KVM_MAX_CPUID_ENTRIES};
use kvm_ioctls::{Cap, Kvm, VmFd};
use platform::{AddressSpace, Context, Error, Platform, Result};

pub use paging::KvmAddressSpace;
pub use vcpu::{exit_stats, ExitStats, KvmContext};

/// Why this host cannot run `--platform kvm`, in one line a person can act on.
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    /// no `/dev/kvm`
    #[error("/dev/kvm does not exist: load the kvm module (kvm_intel, kvm_amd or kvm_pvm) or pick another --platform")]
    Missing,
    /// `/dev/kvm` exists but cannot be opened
    #[error(
        "cannot open /dev/kvm ({0}): run as root or join the kvm group, or pick another --platform"
    )]
    Denied(std::io::Error),
    /// the KVM found lacks what the platform needs
    #[error("/dev/kvm lacks {0}, which --platform kvm needs; pick another --platform")]
    Lacks(&'static str),
}

/// `/dev/kvm`, opened and checked while the process may still open it
/// (before the Sentry gives up its privileges and installs its filter).
#[derive(Debug)]
pub struct Device(Kvm);

impl Device {
    /// Opens and checks `/dev/kvm`.
    pub fn open() -> std::result::Result<Device, Unusable> {
        open().map(Device)
    }
}

fn open() -> std::result::Result<Kvm, Unusable> {
    let kvm = match Kvm::new() {
        Ok(k) => k,
        Err(e) if e.errno() == libc::ENOENT || e.errno() == libc::ENODEV => {
            return Err(Unusable::Missing)
        }
        Err(e) => {
            return Err(Unusable::Denied(std::io::Error::from_raw_os_error(
                e.errno(),
            )))
        }
    };
    if kvm.get_api_version() != 12 {
        return Err(Unusable::Lacks("API version 12"));
    }
    for (cap, name) in [
        (Cap::SyncRegs, "KVM_CAP_SYNC_REGS"),
        (Cap::UserMemory, "KVM_CAP_USER_MEMORY"),
        (Cap::ExtCpuid, "KVM_CAP_EXT_CPUID"),
    ] {
        if !kvm.check_extension(cap) {
            return Err(Unusable::Lacks(name));
        }
    }
    Ok(kvm)
}

/// Memory slots of the VM: the platform's two, then the memory file's in
/// [`MEMORY_CHUNK`]s, each registered when a guest mapping first reaches
/// it (KVM keeps per-page bookkeeping for every registered byte: a slot
/// over the whole reservation would cost gigabytes and most of a second).
const SLOT_SYSTEM: u32 = 1;
const SLOT_TABLES: u32 = 2;
const SLOT_MEMORY_FIRST: u32 = 3;
const MEMORY_CHUNK: u64 = 1 << 30;

/// What every address space and vCPU of the platform shares.
#[derive(Debug)]
pub(crate) struct Shared {
    vm: VmFd,
    cpuid: CpuId,
    /// the platform's view of the memory file (from guest-physical 0, in
    /// slots of [`MEMORY_CHUNK`])
    memory: sys::Region,
    /// descriptor tables, stubs, stacks (slot 1, at `system_gpa`)
    system: sys::Region,
    /// page-table frames
    system_gpa: u64,
    pub(crate) tables: paging::Pool,
    /// vCPUs of ended guest threads, for the next ones
    idle: std::sync::Mutex<Vec<vcpu::Idle>>,
    /// which chunks of the memory file have their slot
    chunks: std::sync::Mutex<Vec<bool>>,
    next_vcpu: AtomicU32,
    max_vcpus: u32,
    /// the Sentry's process id, for kicks
    pid: i32,
    /// the descriptor numbers of the VM (the last) and its vCPUs (from the
    /// first): start and length, a power of two, aligned
    pub(crate) window: (u64, u64),
    /// bytes of the XSAVE area the Sentry's signal frames get
    xsave_len: usize,
    /// the guest's XCR0 (the host's)
    xcr0: u64,
    /// whether guest programs may use `wrfsbase` and friends (as the
    /// host's Linux lets them)
    fsgsbase: bool,
}

impl Shared {
    fn register(&self, slot: u32, gpa: u64, region: &sys::Region) -> Result<()> {
        self.register_part(slot, gpa, region, 0, region.len() as u64)
    }

    /// Makes `[off, off + len)` of `region` guest-physical memory at `gpa`.
    fn register_part(
        &self,
        slot: u32,
        gpa: u64,
        region: &sys::Region,
        off: u64,
        len: u64,
    ) -> Result<()> {
        let r = kvm_userspace_memory_region {
            slot,
            flags: 0,
            guest_phys_addr: gpa,
            memory_size: len,
            userspace_addr: region.host_address() + off,
        };
        // SAFETY: the region stays mapped as long as the VM (both live in
        // `Shared`, the VM dropped first).
        unsafe { self.vm.set_user_memory_region(r) }.map_err(|e| Error::Host {
            op: "KVM_SET_USER_MEMORY_REGION",
            source: std::io::Error::from_raw_os_error(e.errno()),
        })
    }

    /// Gives the memory file's pages in `[off, off + len)` their slots.
    pub(crate) fn ensure_memory(&self, off: u64, len: u64) -> Result<()> {
        let size = self.memory.len() as u64;
        let mut chunks = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
        let first = off / MEMORY_CHUNK;
        let last = (off + len).saturating_sub(1) / MEMORY_CHUNK;
        for c in first..=last {
            let i = c as usize;
            if chunks.get(i).copied().unwrap_or(false) {
                continue;
            }
            let start = c * MEMORY_CHUNK;
            let n = MEMORY_CHUNK.min(size - start);
            self.register_part(SLOT_MEMORY_FIRST + c as u32, start, &self.memory, start, n)?;
            if chunks.len() <= i {
                chunks.resize(i + 1, false);
            }
            chunks[i] = true;
        }
        Ok(())
    }

    /// Removes and re-adds slot `slot`, which makes KVM drop every shadow
    /// page built from page-table frames in it (before they are reused).
    pub(crate) fn reload_slot(&self, slot: u32, gpa: u64, region: &sys::Region) -> Result<()> {
        let r = kvm_userspace_memory_region {
            slot,
            flags: 0,
            guest_phys_addr: gpa,
            memory_size: 0,
            userspace_addr: region.host_address(),
        };
        // SAFETY: deleting a slot we made.
        unsafe { self.vm.set_user_memory_region(r) }.map_err(|e| Error::Host {
            op: "KVM_SET_USER_MEMORY_REGION (delete)",
            source: std::io::Error::from_raw_os_error(e.errno()),
        })?;
        self.register(slot, gpa, region)
    }
}

/// The KVM platform; see the crate docs.
#[derive(Debug)]
pub struct KvmPlatform {
    shared: Arc<Shared>,
}

impl KvmPlatform {
    /// A platform on `device` whose guests' memory is `memory_file` (its
    /// whole current size, which the Sentry reserves at once).
    pub fn new(device: Device, memory_file: BorrowedFd<'_>) -> Result<Self> {
        let kvm = device.0;
        let vm = kvm.create_vm().map_err(|e| Error::Host {
            op: "KVM_CREATE_VM",
            source: std::io::Error::from_raw_os_error(e.errno()),
        })?;
        // The VM's and the vCPUs' descriptors live in a window of numbers
        // of their own, the only ones the Sentry's filter lets KVM's
        // requests reach.
        let window = fd_window(sys::raise_nofile()?)?;
        let vm = {
            use std::os::fd::AsRawFd;
            // SAFETY: the VM's descriptor, open while `vm` lives.
            let old = unsafe { BorrowedFd::borrow_raw(vm.as_raw_fd()) };
            let fd = sys::dup_to(old, (window.0 + window.1 - 1) as i32)?;
            drop(vm);
            // SAFETY: `fd` is the VM's descriptor, ours alone now.
            unsafe { kvm.create_vmfd_from_rawfd(fd) }.map_err(|e| Error::Host {
                op: "KVM VM descriptor",
                source: std::io::Error::from_raw_os_error(e.errno()),
            })?
        };
        let supported = kvm
            .get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
            .map_err(|e| Error::Host {
                op: "KVM_GET_SUPPORTED_CPUID",
                source: std::io::Error::from_raw_os_error(e.errno()),
            })?;
        let cpuid = guest_cpuid(&supported, sys::is_pvm())?;
        let fsgsbase = sys::cpuid(7, 0)[1] & 1 != 0
            && supported
                .as_slice()
                .iter()
                .any(|e| e.function == 7 && e.index == 0 && e.ebx & 1 != 0)
            && sys::hwcap2() & 2 != 0;
        let phys_bits = supported
            .as_slice()
            .iter()
            .find(|e| e.function == 0x8000_0008)
            .map_or(36, |e| e.eax & 0xff);
        let size = sys::file_size(memory_file)?;
        let (system_gpa, tables_gpa) = layout::physical(size);
        if tables_gpa + paging::POOL_SIZE > 1u64 << phys_bits {
            return Err(Error::Host {
                op: "laying out guest-physical memory",
                source: std::io::Error::other(format!(
                    "the memory file ({size} bytes) and the platform's pages do not fit in {phys_bits} physical address bits"
                )),
            });
        }
        let memory = sys::Region::file(memory_file, size as usize)?;
        let system = layout::build(system_gpa)?;
        let tables = paging::Pool::new(tables_gpa)?;
        let xcr0 = guest_xcr0(&supported);
        let xsave_len = xsave_size(xcr0);
        sys::install_kick_handler()?;
        let max_vcpus = (kvm.get_max_vcpus() as u32)
            .min(layout::MAX_VCPUS)
            .min(window.1 as u32 - 1);
        let shared = Arc::new(Shared {
            vm,
            cpuid,
            memory,
            system,
            system_gpa,
            tables,
            idle: std::sync::Mutex::new(Vec::new()),
            chunks: std::sync::Mutex::new(Vec::new()),
            next_vcpu: AtomicU32::new(0),
            max_vcpus,
            pid: sys::getpid(),
            window,
            xsave_len,
            xcr0,
            fsgsbase,
        });
        shared.register(SLOT_SYSTEM, system_gpa, &shared.system)?;
        shared.register(SLOT_TABLES, tables_gpa, shared.tables.region())?;
        Ok(KvmPlatform { shared })
    }
}

/// Descriptor numbers `[start, start + len)` for the VM and its vCPUs
/// under a hard `RLIMIT_NOFILE` of `limit`: 1,024 aligned numbers, the
/// highest that fit below 65,536 (the kernel sizes a process's descriptor
/// table by its highest number).
pub fn fd_window(limit: u64) -> Result<(u64, u64)> {
    const LEN: u64 = 1024;
    let limit = limit.min(1 << 16);
    if limit < 2 * LEN {
        return Err(Error::Host {
            op: "RLIMIT_NOFILE",
            source: std::io::Error::other(format!(
                "the hard limit is {limit}; the KVM platform needs 2048 descriptors"
            )),
        });
    }
    Ok(((limit - LEN) / LEN * LEN, LEN))
}

/// The guest's XCR0: the host's, as far as KVM supports it, without the
/// components a VMM must ask the host kernel for (AMX's tiles, which also
/// would not fit `KVM_GET_XSAVE`'s 4 KiB).
fn guest_xcr0(supported: &CpuId) -> u64 {
    const AMX: u64 = (1 << 17) | (1 << 18);
    let kvm = supported
        .as_slice()
        .iter()
        .find(|e| e.function == 0xd && e.index == 0)
        .map_or(0, |e| u64::from(e.eax) | (u64::from(e.edx) << 32));
    sys::xcr0() & kvm & !AMX
}

/// Bytes of the standard-format XSAVE area for `xcr0` (the legacy area
/// alone without XSAVE).
fn xsave_size(xcr0: u64) -> usize {
    if xcr0 == 0 {
        return 512;
    }
    let mut end = 512 + 64;
    for i in 2..63 {
        if xcr0 & (1 << i) != 0 {
            let [size, offset, ..] = sys::cpuid(0xd, i);
            end = end.max((offset + size) as usize);
        }
    }
    end.min(4096)
}

/// What the guest's `cpuid` says: the host's answer for every leaf KVM
/// knows (as the other platforms, whose guests ask the CPU itself), but
/// KVM's for its own leaves and for the features a hypervisor must enable
/// for a guest to use them (`rdtscp`/`rdpid`, protection keys, `umwait`,
/// 5-level paging). Under PVM (`pvm`), whose guests' user code runs in the
/// host CPU's own user mode, `rdtscp` and `rdpid` work as on the host
/// (reading the host's `TSC_AUX`, as guests of the other platforms do)
/// whatever KVM's list says, so the host's bits stand for them.
fn guest_cpuid(supported: &CpuId, pvm: bool) -> Result<CpuId> {
    let (rdtscp, rdpid) = if pvm { (0, 0) } else { (1 << 27, 1 << 22) };
    let consent: &[(u32, u32, usize, u32)] = &[
        // (leaf, subleaf, register, bits)
        (0x8000_0001, 0, 3, rdtscp),
        (7, 0, 2, rdpid | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 16)),
    ];
    let host_max = sys::cpuid(0, 0)[0];
    let host_ext_max = sys::cpuid(0x8000_0000, 0)[0];
    let mut entries = supported.as_slice().to_vec();
    for e in &mut entries {
        let known = if e.function >= 0x8000_0000 {
            e.function <= host_ext_max
        } else {
            e.function < 0x4000_0000 && e.function <= host_max
        };
        if !known {
            continue;
        }
        let mut regs = sys::cpuid(e.function, e.index);
        let kvm = [e.eax, e.ebx, e.ecx, e.edx];
        for &(leaf, sub, reg, bits) in consent {
            if e.function == leaf && e.index == sub {
                regs[reg] = (regs[reg] & !bits) | (kvm[reg] & bits);
            }
        }
        [e.eax, e.ebx, e.ecx, e.edx] = regs;
    }
    CpuId::from_entries(&entries).map_err(|_| Error::Misuse("CPUID entries"))
}

/// The `ioctl` requests the platform makes once the Sentry's filter is in
/// place (the filter allows these on any descriptor: seccomp cannot tell
/// KVM's descriptors from others, so each request is one only KVM takes).
pub const HOST_IOCTLS: &[u64] = ioctls::ALL;

/// The ioctl requests the platform makes after the Sentry's filter is in
/// place (on the VM and vCPU descriptors).
pub(crate) mod ioctls {
    use kvm_bindings::*;
    use std::mem::size_of;

    const fn io(nr: u64) -> u64 {
        0xae00 | nr
    }
    const fn ior(nr: u64, size: usize) -> u64 {
        (2 << 30) | ((size as u64) << 16) | 0xae00 | nr
    }
    const fn iow(nr: u64, size: usize) -> u64 {
        (1 << 30) | ((size as u64) << 16) | 0xae00 | nr
    }

    pub(crate) const RUN: u64 = io(0x80);
    pub(crate) const CREATE_VCPU: u64 = io(0x41);
    pub(crate) const SET_USER_MEMORY_REGION: u64 =
        iow(0x46, size_of::<kvm_userspace_memory_region>());
    pub(crate) const GET_REGS: u64 = ior(0x81, size_of::<kvm_regs>());
    pub(crate) const SET_REGS: u64 = iow(0x82, size_of::<kvm_regs>());
    pub(crate) const GET_SREGS: u64 = ior(0x83, size_of::<kvm_sregs>());
    pub(crate) const SET_SREGS: u64 = iow(0x84, size_of::<kvm_sregs>());
    pub(crate) const SET_MSRS: u64 = iow(0x89, size_of::<kvm_msrs>());
    pub(crate) const SET_SIGNAL_MASK: u64 = iow(0x8b, 4);
    pub(crate) const SET_CPUID2: u64 = iow(0x90, size_of::<kvm_cpuid2>());
    pub(crate) const GET_XSAVE: u64 = ior(0xa4, size_of::<kvm_xsave>());
    pub(crate) const SET_XSAVE: u64 = iow(0xa5, size_of::<kvm_xsave>());
    pub(crate) const SET_XCRS: u64 = iow(0xa7, size_of::<kvm_xcrs>());

    /// All of them, for the Sentry's seccomp filter.
    pub(crate) const ALL: &[u64] = &[
        RUN,
        CREATE_VCPU,
        SET_USER_MEMORY_REGION,
        GET_REGS,
        SET_REGS,
        GET_SREGS,
        SET_SREGS,
        SET_MSRS,
        SET_SIGNAL_MASK,
        SET_CPUID2,
        GET_XSAVE,
        SET_XSAVE,
        SET_XCRS,
    ];
}

impl Platform for KvmPlatform {
    fn name(&self) -> &'static str {
        "kvm"
    }

    fn max_user_address(&self) -> u64 {
        layout::MAX_USER_ADDRESS
    }

    fn new_address_space(&self) -> Result<Arc<dyn AddressSpace>> {
        Ok(Arc::new(KvmAddressSpace::new(self.shared.clone())?))
    }

    fn new_context(&self) -> Result<Box<dyn Context>> {
        Ok(Box::new(KvmContext::new(self.shared.clone())?))
    }

    fn supports_threads(&self) -> bool {
        true
    }

    fn host_ioctls(&self) -> &'static [u64] {
        ioctls::ALL
    }

    fn host_ioctl_fds(&self) -> Option<(u64, u64)> {
        Some(self.shared.window)
    }

    fn uses_stubs(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size worked out from the components is the one the CPU gives
    /// for this host's XCR0 (where that has no AMX).
    #[test]
    fn xsave_size_is_the_cpus() {
        let xcr0 = sys::xcr0();
        if xcr0 == 0 || xcr0 & (3 << 17) != 0 {
            return;
        }
        assert_eq!(xsave_size(xcr0), sys::cpuid(0xd, 0)[1] as usize);
        assert_eq!(xsave_size(0), 512);
        assert_eq!(xsave_size(3), 576);
    }

    #[test]
    fn the_descriptor_window_is_aligned_and_below_the_limit() {
        assert_eq!(fd_window(20_000).ok(), Some((18_432, 1024)));
        assert_eq!(fd_window(4096).ok(), Some((3072, 1024)));
        assert_eq!(fd_window(1 << 20).ok(), Some((64_512, 1024)));
        assert!(fd_window(2047).is_err());
    }
}
