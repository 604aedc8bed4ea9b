//! Floating-point / vector state of a stopped stub thread, for signal
//! frames: the XSAVE area (standard format, `NT_X86_XSTATE` regset) where
//! the host has one, else the 512-byte `FXSAVE` area.

use std::sync::OnceLock;

use platform::{Error, Result};

use crate::sys::{self, FXSAVE_LEN, NT_X86_XSTATE};

/// The layout this host's kernel gives and takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// XSAVE standard format of this many bytes (the kernel's user XSAVE
    /// size; `PTRACE_SETREGSET` wants exactly that many).
    Xsave(usize),
    /// `FXSAVE` only.
    Fxsave,
}

impl Format {
    pub(crate) fn len(self) -> usize {
        match self {
            Format::Xsave(n) => n,
            Format::Fxsave => FXSAVE_LEN,
        }
    }
}

static FORMAT: OnceLock<Format> = OnceLock::new();

/// Learns the format from the kernel, asking stopped tracee `tid` once per
/// process: the regset's size is global (the kernel's `fpu_user_cfg`).
fn format(tid: i32) -> Result<Format> {
    if let Some(f) = FORMAT.get() {
        return Ok(*f);
    }
    // CPUID 0xD.0 ECX bounds every XSAVE area the CPU can produce; the
    // kernel truncates its answer to its own (smaller or equal) size.
    let max = sys::cpuid_xsave_max_size();
    let f = if max == 0 {
        Format::Fxsave
    } else {
        let mut buf = vec![0u8; max.next_multiple_of(64).max(FXSAVE_LEN + 64)];
        match sys::get_regset(tid, NT_X86_XSTATE, &mut buf) {
            Ok(n) if n >= FXSAVE_LEN + 64 => Format::Xsave(n),
            Ok(_) => Format::Fxsave,
            Err(Error::Host { source, .. })
                if matches!(source.raw_os_error(), Some(libc::EINVAL | libc::ENODEV)) =>
            {
                Format::Fxsave
            }
            Err(e) => return Err(e),
        }
    };
    Ok(*FORMAT.get_or_init(|| f))
}

/// The FP state of stopped tracee `tid`.
pub(crate) fn get(tid: i32) -> Result<Vec<u8>> {
    match format(tid)? {
        Format::Xsave(n) => {
            let mut buf = vec![0u8; n];
            let got = sys::get_regset(tid, NT_X86_XSTATE, &mut buf)?;
            buf.truncate(got);
            Ok(buf)
        }
        Format::Fxsave => {
            let mut buf = [0u8; FXSAVE_LEN];
            sys::get_fpregs(tid, &mut buf)?;
            Ok(buf.to_vec())
        }
    }
}

/// Replaces the FP state of stopped tracee `tid` with `state`, which must be
/// in [`get`]'s layout and length. The kernel checks the content (reserved
/// MXCSR bits, XSAVE header) and answers `EINVAL`, returned as an error.
pub(crate) fn set(tid: i32, state: &[u8]) -> Result<()> {
    let format = format(tid)?;
    if state.len() != format.len() {
        return Err(Error::Host {
            op: "set fpstate (length differs from the host's FP state size)",
            source: std::io::Error::from_raw_os_error(libc::EINVAL),
        });
    }
    match format {
        Format::Xsave(_) => sys::set_regset(tid, NT_X86_XSTATE, state),
        Format::Fxsave => {
            let buf: &[u8; FXSAVE_LEN] = state.try_into().map_err(|_| Error::Host {
                op: "set fpstate",
                source: std::io::Error::from_raw_os_error(libc::EINVAL),
            })?;
            sys::set_fpregs(tid, buf)
        }
    }
}

/// Offsets in the FXSAVE legacy area (Intel SDM vol. 1, table 10-2).
const FCW: usize = 0;
const MXCSR: usize = 24;
/// `XSTATE_BV` in the XSAVE header, right after the legacy area.
const XSTATE_BV: usize = 512;
/// Power-on values: x87 control word, MXCSR (all exceptions masked).
const FCW_INIT: u16 = 0x37f;
const MXCSR_INIT: u32 = 0x1f80;

/// Puts tracee `tid`'s FP state in its initial configuration. New stub
/// threads are clones of the stub's first thread, itself a fork of a Sentry
/// thread: without this, a guest would read whatever the Sentry last had in
/// its vector registers.
pub(crate) fn reset(tid: i32) -> Result<()> {
    let format = format(tid)?;
    let mut state = vec![0u8; format.len()];
    state[FCW..FCW + 2].copy_from_slice(&FCW_INIT.to_le_bytes());
    state[MXCSR..MXCSR + 4].copy_from_slice(&MXCSR_INIT.to_le_bytes());
    if let Format::Xsave(_) = format {
        // XSTATE_BV = x87 | SSE: those two come from the buffer above (zero
        // registers, initial control words); every other component (AVX,
        // AVX-512, ...) is absent from the header, i.e. in its init state.
        state[XSTATE_BV..XSTATE_BV + 8].copy_from_slice(&0b11u64.to_le_bytes());
    }
    set(tid, &state)
}
