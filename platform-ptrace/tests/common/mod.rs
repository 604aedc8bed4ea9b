//! Shared fixtures: a memory file the test can see into, and hand-assembled
//! guest code.
#![allow(dead_code)]

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use platform::{AddressSpace, Prot, Regs};
use std::cell::Cell;

use platform_ptrace::{Mode, PtraceOptions, PtracePlatform};

thread_local! {
    static MODE: Cell<Mode> = const { Cell::new(Mode::Sysemu) };
}

/// Runs test `f` with platforms made (on this thread) in `mode`.
pub fn in_mode(mode: Mode, f: fn()) {
    MODE.with(|m| m.set(mode));
    f();
}

/// The mode platforms are made in on this thread.
pub fn mode() -> Mode {
    MODE.with(Cell::get)
}

/// Stub threads a host thread that switches into an address space has
/// there: its traced one, plus, in seccomp-trap mode, the runner.
pub fn per_switcher() -> usize {
    match mode() {
        Mode::Sysemu => 1,
        Mode::SeccompTrap => 2,
    }
}

/// For each named test, a twin in module `seccomp_trap` that runs it with
/// the platform in seccomp-trap mode.
#[macro_export]
macro_rules! seccomp_trap_too {
    ($($name:ident),* $(,)?) => {
        mod seccomp_trap {
            $(
                #[test]
                fn $name() {
                    super::common::in_mode(platform_ptrace::Mode::SeccompTrap, super::$name)
                }
            )*
        }
    };
}

/// Size of the test memory file.
pub const FILE_LEN: usize = 1 << 20;
/// Guest address of the code page (file offset 0).
pub const CODE: u64 = 0x10000;
/// Guest address of the data page (file offset `DATA_OFF`).
pub const DATA: u64 = 0x20000;
pub const DATA_OFF: u64 = 0x1000;

/// A memfd plus the test's own shared mapping of it.
pub struct MemFile {
    pub fd: OwnedFd,
    base: *mut u8,
}

impl MemFile {
    pub fn new() -> Self {
        // SAFETY: a valid NUL-terminated name and flags.
        let fd = unsafe { libc::memfd_create(c"guest-mem".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
        // SAFETY: fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: plain integer arguments.
        let ret = unsafe { libc::ftruncate(fd.as_raw_fd(), FILE_LEN as i64) };
        assert_eq!(ret, 0);
        // SAFETY: a new shared mapping of the whole file; no existing memory
        // is affected.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                FILE_LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        MemFile {
            fd,
            base: base.cast(),
        }
    }

    pub fn write(&self, off: u64, bytes: &[u8]) {
        assert!(off as usize + bytes.len() <= FILE_LEN);
        for (i, b) in bytes.iter().enumerate() {
            // SAFETY: in bounds of our mapping; volatile because the guest
            // (another process) shares the memory.
            unsafe { self.base.add(off as usize + i).write_volatile(*b) };
        }
    }

    pub fn read_u64(&self, off: u64) -> u64 {
        assert!(off as usize + 8 <= FILE_LEN);
        // SAFETY: in bounds and 8-byte aligned by the callers; volatile as
        // above.
        unsafe { self.base.add(off as usize).cast::<u64>().read_volatile() }
    }

    pub fn write_u64(&self, off: u64, v: u64) {
        self.write(off, &v.to_le_bytes());
    }

    /// A platform in this thread's [`mode`].
    pub fn platform(&self) -> PtracePlatform {
        self.platform_with(PtraceOptions::default())
    }

    /// A platform with `options`, in this thread's [`mode`] unless they
    /// ask for seccomp-trap mode themselves.
    pub fn platform_with(&self, options: PtraceOptions) -> PtracePlatform {
        let options = PtraceOptions {
            mode: if options.mode == Mode::SeccompTrap {
                Mode::SeccompTrap
            } else {
                mode()
            },
            ..options
        };
        PtracePlatform::with_options(self.fd.as_fd(), options).expect("platform")
    }
}

impl Drop for MemFile {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`.
        unsafe { libc::munmap(self.base.cast(), FILE_LEN) };
    }
}

/// Maps the code page (R-X) and the data page (RW).
pub fn map_code_and_data(as_: &dyn AddressSpace) {
    let rx = Prot {
        read: true,
        write: false,
        exec: true,
    };
    as_.map(CODE, 0x1000, rx, 0).expect("map code");
    as_.map(DATA, 0x1000, Prot::RW, DATA_OFF).expect("map data");
}

/// Registers to start at the code page with rsp in the data page.
pub fn start_regs() -> Regs {
    Regs::initial(CODE, DATA + 0x800)
}

// Hand-assembled x86-64.
pub const SYSCALL: [u8; 2] = [0x0f, 0x05];
pub fn mov_eax(v: u32) -> Vec<u8> {
    let mut b = vec![0xb8];
    b.extend_from_slice(&v.to_le_bytes());
    b
}
pub fn mov_edi(v: u32) -> Vec<u8> {
    let mut b = vec![0xbf];
    b.extend_from_slice(&v.to_le_bytes());
    b
}
/// mov %rax,%rdi
pub const MOV_RAX_RDI: [u8; 3] = [0x48, 0x89, 0xc7];
/// mov %rax,(%rbx)
pub const STORE_RAX_AT_RBX: [u8; 3] = [0x48, 0x89, 0x03];
/// mov %fs:0,%rax
pub const LOAD_FS0_RAX: [u8; 9] = [0x64, 0x48, 0x8b, 0x04, 0x25, 0, 0, 0, 0];
pub const UD2: [u8; 2] = [0x0f, 0x0b];
pub const INT3: [u8; 1] = [0xcc];
/// `1: cmpq $0,(%rbx); je 1b`
pub const SPIN_WHILE_ZERO_AT_RBX: [u8; 6] = [0x48, 0x83, 0x3b, 0x00, 0x74, 0xfa];

/// `mov $60,%eax; syscall` (exit, emulated by the test).
pub fn exit_call() -> Vec<u8> {
    let mut b = mov_eax(60);
    b.extend_from_slice(&SYSCALL);
    b
}

pub fn code(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// `inc qword ptr [rbx]`
pub const INC_AT_RBX: [u8; 3] = [0x48, 0xff, 0x03];
/// `movabs $v, %rax`
pub fn movabs_rax(v: u64) -> Vec<u8> {
    let mut b = vec![0x48, 0xb8];
    b.extend_from_slice(&v.to_le_bytes());
    b
}
/// `movq %rax, %xmm0`
pub const MOVQ_RAX_XMM0: [u8; 5] = [0x66, 0x48, 0x0f, 0x6e, 0xc0];
/// `movq %xmm0, %rax`
pub const MOVQ_XMM0_RAX: [u8; 5] = [0x66, 0x48, 0x0f, 0x7e, 0xc0];
/// `mov (%rbx), %rax`
pub const LOAD_RBX_RAX: [u8; 3] = [0x48, 0x8b, 0x03];

/// Threads of process `pid`.
pub fn task_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("task dir")
        .count()
}
