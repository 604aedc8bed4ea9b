//! Host calls the platform makes outside `kvm-ioctls`: memory regions, the
//! kick signal, `cpuid`/`xgetbv`. All of the crate's `unsafe` is here.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::AtomicU64;

use platform::{Error, Result};

/// The signal that makes a vCPU's `KVM_RUN` return (`SIGRTMAX - 2`, which
/// neither glibc nor the Sentry uses); blocked outside `KVM_RUN`.
pub(crate) const KICK_SIGNAL: i32 = 62;

/// A host mapping the platform owns: memory of its own, or its view of the
/// memory file.
#[derive(Debug)]
pub(crate) struct Region {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping lives as long as the value; every access goes
// through bounds-checked methods, and guest memory is shared with running
// vCPUs by nature.
unsafe impl Send for Region {}
// SAFETY: as above; the page-table words are atomics.
unsafe impl Sync for Region {}

impl Region {
    /// Private zeroed memory of `len` bytes, committed as touched.
    pub(crate) fn anonymous(len: usize) -> Result<Region> {
        // SAFETY: a fresh mapping at a kernel-chosen address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::last_os("mmap of the KVM platform's memory"));
        }
        Ok(Region {
            base: p.cast(),
            len,
        })
    }

    /// `len` bytes of `file` from 0, shared.
    pub(crate) fn file(file: BorrowedFd<'_>, len: usize) -> Result<Region> {
        // SAFETY: mapping a descriptor we were lent, at a kernel-chosen
        // address; the file is sparse, hence MAP_NORESERVE.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_NORESERVE,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::last_os("mmap of the memory file for KVM"));
        }
        Ok(Region {
            base: p.cast(),
            len,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn host_address(&self) -> u64 {
        self.base as u64
    }

    /// The 64-bit word at byte `off` (8-aligned, inside).
    pub(crate) fn word(&self, off: u64) -> &AtomicU64 {
        assert!(
            off.is_multiple_of(8) && off + 8 <= self.len as u64,
            "word {off:#x} outside"
        );
        // SAFETY: aligned, inside the mapping, which outlives `&self`;
        // every access to these words is atomic.
        unsafe { AtomicU64::from_ptr(self.base.add(off as usize).cast()) }
    }

    /// Copies `bytes` in at `off`.
    pub(crate) fn write(&self, off: u64, bytes: &[u8]) {
        assert!(off as usize + bytes.len() <= self.len, "write outside");
        // SAFETY: inside the mapping (checked); nothing else holds a Rust
        // reference to these bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(off as usize), bytes.len())
        };
    }

    /// The byte at `off`, if inside.
    pub(crate) fn byte(&self, off: u64) -> Option<u8> {
        if off >= self.len as u64 {
            return None;
        }
        // SAFETY: inside the mapping (checked); a racy byte read of guest
        // memory is what a kernel does.
        Some(unsafe { self.base.add(off as usize).read_volatile() })
    }

    /// Reads the 64-bit word at `off` (8-aligned, inside).
    pub(crate) fn read_u64(&self, off: u64) -> u64 {
        self.word(off).load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Drops the host's page-table entries of `[off, off + len)`: KVM then
    /// forgets every guest mapping of those pages (its MMU notifier) and
    /// builds them again from the guest page tables. For private memory
    /// the bytes become zero; for the shared file they stay.
    pub(crate) fn forget(&self, off: u64, len: u64) {
        if len == 0 || off + len > self.len as u64 {
            return;
        }
        // SAFETY: inside our own mapping; no Rust reference covers it.
        let r = unsafe {
            libc::madvise(
                self.base.add(off as usize).cast(),
                len as usize,
                libc::MADV_DONTNEED,
            )
        };
        if r != 0 {
            tracing::warn!(
                "madvise of KVM memory failed: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: our own mapping, no longer referenced.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// Raises this process's descriptor limit to its hard limit, which it
/// returns.
pub(crate) fn raise_nofile() -> Result<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(Error::last_os("getrlimit(RLIMIT_NOFILE)"));
    }
    r.rlim_cur = r.rlim_max;
    // SAFETY: a valid limit we read.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        return Err(Error::last_os("setrlimit(RLIMIT_NOFILE)"));
    }
    Ok(r.rlim_max)
}

/// Moves descriptor `fd` (which the caller owns) to number `to`, which must
/// be free; returns `to`.
pub(crate) fn move_fd(fd: i32, to: i32) -> Result<i32> {
    // SAFETY: the caller owns `fd` for the call.
    let new = dup_to(unsafe { BorrowedFd::borrow_raw(fd) }, to);
    // SAFETY: the caller gave up `fd`.
    unsafe { libc::close(fd) };
    new
}

/// A copy of `fd` at number `to`, which must be free.
pub(crate) fn dup_to(fd: BorrowedFd<'_>, to: i32) -> Result<i32> {
    // SAFETY: fcntl on a descriptor the caller holds.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, to) };
    if new < 0 {
        return Err(Error::last_os("fcntl(F_DUPFD_CLOEXEC) of a KVM descriptor"));
    }
    if new != to {
        // SAFETY: ours, just made.
        unsafe { libc::close(new) };
        return Err(Error::Misuse(
            "the KVM platform's descriptor number is taken",
        ));
    }
    Ok(new)
}

/// `KVM_CREATE_VCPU` on `vm`: the new vCPU's descriptor.
pub(crate) fn create_vcpu(vm: BorrowedFd<'_>, id: u32) -> Result<i32> {
    // SAFETY: an ioctl with an integer argument on the VM's descriptor.
    let fd = unsafe {
        libc::ioctl(
            vm.as_raw_fd(),
            crate::ioctls::CREATE_VCPU as _,
            libc::c_ulong::from(id),
        )
    };
    if fd < 0 {
        return Err(Error::last_os("KVM_CREATE_VCPU"));
    }
    Ok(fd)
}

/// The size of a file (the memory file's reservation).
pub(crate) fn file_size(file: BorrowedFd<'_>) -> Result<u64> {
    // SAFETY: fstat into a zeroed struct we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor and out-pointer.
    if unsafe { libc::fstat(file.as_raw_fd(), &mut st) } != 0 {
        return Err(Error::last_os("fstat of the memory file"));
    }
    Ok(st.st_size as u64)
}

/// The calling thread's id.
/// Whether the host's KVM is PVM's (paravirtual, no VMX or SVM): its
/// module is loaded.
pub(crate) fn is_pvm() -> bool {
    std::path::Path::new("/sys/module/kvm_pvm").exists()
}

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
pub(crate) fn thread_cpu() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

pub(crate) fn gettid() -> i32 {
    // SAFETY: no arguments.
    unsafe { libc::gettid() }
}

/// This process's id (asked while the Sentry's filter still allows it).
pub(crate) fn getpid() -> i32 {
    // SAFETY: no arguments.
    unsafe { libc::getpid() }
}

/// Sends the kick to thread `tid` of process `pid`.
pub(crate) fn kick(pid: i32, tid: i32) {
    // SAFETY: plain signal send; a gone thread gives ESRCH, ignored.
    unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, KICK_SIGNAL) };
}

extern "C" fn on_kick(_: i32) {}

/// Installs the (empty) kick handler once: the kick must not be ignored,
/// or it would not end `KVM_RUN`.
pub(crate) fn install_kick_handler() -> Result<()> {
    // SAFETY: a zeroed sigaction with a valid handler and empty mask.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_kick as *const () as usize;
        libc::sigemptyset(&mut act.sa_mask);
        if libc::sigaction(KICK_SIGNAL, &act, std::ptr::null_mut()) != 0 {
            return Err(Error::last_os("sigaction for the KVM kick"));
        }
    }
    Ok(())
}

/// Blocks the kick in the calling thread (it stays pending until the next
/// `KVM_RUN`, which the signal mask below lets it end).
pub(crate) fn block_kick() -> Result<()> {
    // SAFETY: a sigset we own, passed to pthread_sigmask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, KICK_SIGNAL);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err(Error::Misuse("pthread_sigmask failed"));
        }
    }
    Ok(())
}

/// Takes every pending kick of the calling thread (they queue).
pub(crate) fn drain_kicks() {
    // SAFETY: sigtimedwait with a zero timeout on a set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, KICK_SIGNAL);
        let zero = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        while libc::sigtimedwait(&set, std::ptr::null_mut(), &zero) == KICK_SIGNAL {}
    }
}

/// `KVM_SET_SIGNAL_MASK`: while the vCPU runs, every signal but the kick
/// stays blocked (the Sentry's own signals wait for its other threads).
pub(crate) fn set_run_signal_mask(vcpu: BorrowedFd<'_>) -> Result<()> {
    // kvm_signal_mask: a u32 length, then the set right after it (no
    // padding); bit n-1 stands for signal n.
    let mut mask = [0u8; 12];
    mask[..4].copy_from_slice(&8u32.to_ne_bytes());
    mask[4..].copy_from_slice(&(!(1u64 << (KICK_SIGNAL - 1))).to_ne_bytes());
    // SAFETY: the buffer is a kvm_signal_mask with 8 bytes of set; the
    // descriptor is a vCPU's.
    let r = unsafe {
        libc::ioctl(
            vcpu.as_raw_fd(),
            crate::ioctls::SET_SIGNAL_MASK as _,
            mask.as_ptr(),
        )
    };
    if r != 0 {
        return Err(Error::last_os("KVM_SET_SIGNAL_MASK"));
    }
    Ok(())
}

/// `cpuid` of the host.
pub(crate) fn cpuid(leaf: u32, sub: u32) -> [u32; 4] {
    let r = std::arch::x86_64::__cpuid_count(leaf, sub);
    [r.eax, r.ebx, r.ecx, r.edx]
}

/// The host kernel's `AT_HWCAP2` (bit 1: user FSGSBASE allowed).
pub(crate) fn hwcap2() -> u64 {
    // SAFETY: getauxval has no preconditions.
    unsafe { libc::getauxval(libc::AT_HWCAP2) }
}

/// The host's XCR0 (0 without OSXSAVE).
pub(crate) fn xcr0() -> u64 {
    if cpuid(1, 0)[2] & (1 << 27) == 0 {
        return 0;
    }
    // SAFETY: OSXSAVE is set, so xgetbv is allowed.
    unsafe { std::arch::x86_64::_xgetbv(0) }
}
