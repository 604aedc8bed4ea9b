//! Patched system call sites (seccomp-trap mode): the table a patched
//! `mov $nr, %eax; syscall` jumps through.
//!
//! A site is a `syscall` and the 5-byte instruction before it: `mov $nr,
//! %eax` (most of glibc's wrappers), or `mov 0x8(%rsp), %r9` (glibc's
//! `syscall(2)`, the number in rax) on CPUs with BMI2. Its seven bytes
//! become `jmp *ENTRY` (`ff 24 25` + a 32-bit absolute address) where
//! `ENTRY` is an 8-byte word of the *pointer table* at [`FAST_TABLE`]
//! holding the address of the site's *entry* in the *code table* at
//! [`FAST_CODE`], which sets eax to `nr << 16` (or runs the instruction
//! again and moves rax's number there with a flag-preserving `rorx`), sets
//! rcx to the return address and jumps to the stub's fast path (see
//! `stub`). Every entry
//! lives at an address of the form `0x0006xxxx`, so byte 5 of every patch
//! is `0x06`, an invalid opcode: a jump to the old `syscall` instruction
//! faults instead of running garbage (see
//! [`platform::write_syscall_patch`]).
//!
//! Both tables are one memfd of the platform, mapped shared and read-only
//! (the code read+exec) in every stub, so a patched page is valid in any
//! address space it is copied to (`fork`). Entries are only ever added.

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Mutex, PoisonError};

use platform::{Error, Result, INVALID_OPCODE};

use crate::stub::SLOTS_BASE;
use crate::sys;

/// Where the pointer table lives in every stub that patches.
pub const FAST_TABLE: u64 = 0x60000;
/// Its length: one 8-byte pointer per site; all of it has `0x06` as the
/// third byte of its address.
pub const FAST_TABLE_LEN: u64 = 0x10000;
/// Bytes per code-table entry.
const ENTRY_LEN: u64 = 32;
/// Sites one platform can patch.
pub const MAX_SITES: u64 = FAST_TABLE_LEN / 8;
/// Length of the code table.
pub const FAST_CODE_LEN: u64 = MAX_SITES * ENTRY_LEN;
/// Where the code table lives: right below the slot region. Guest mappings
/// end here when sites are patched.
pub const FAST_CODE: u64 = SLOTS_BASE - FAST_CODE_LEN;
/// Lowest guest address when sites are patched: above the pointer table.
pub const FAST_MIN_ADDR: u64 = FAST_TABLE + FAST_TABLE_LEN;
/// Highest system call number a `mov $nr, %eax` site may carry (`nr << 16`
/// fits in eax).
const MAX_NR: u64 = 0x7fff;
/// Instructions before a `syscall` that an entry may run again as they
/// are (no rip-relative operand; reads only), the number then in rax:
/// glibc's `syscall(2)`.
const REPLAYABLE: [[u8; 5]; 1] = [[0x4c, 0x8b, 0x4c, 0x24, 0x08]];
/// `rorx $48, %rax, %rax`: the number in rax to bits 16 and up without
/// touching the flags (BMI2).
const RORX_48_RAX: [u8; 6] = [0xc4, 0xe3, 0xfb, 0xf0, 0xc0, 0x30];

/// The tables of one platform: the memfd, the Sentry's mapping of it and
/// the sites handed out.
#[derive(Debug)]
pub(crate) struct FastTable {
    fd: OwnedFd,
    base: *mut u8,
    /// Absolute address of the stub's fast entry.
    entry: u64,
    /// Whether the CPU has `rorx` (replayed sites need it).
    bmi2: bool,
    sites: Mutex<HashMap<(u64, [u8; 7]), u64>>,
}

// SAFETY: `base` is a shared mapping owned by the table for its whole life;
// writes happen under the `sites` lock, to entries no stub uses yet.
unsafe impl Send for FastTable {}
// SAFETY: as above.
unsafe impl Sync for FastTable {}

impl FastTable {
    /// Empty tables whose entries jump to the stub's fast entry at
    /// `entry` (an absolute stub address).
    pub(crate) fn new(entry: u64) -> Result<Self> {
        let len = FAST_TABLE_LEN + FAST_CODE_LEN;
        let fd = sys::memfd_of_len(c"ferrovisor-fast-sites", len)?;
        // SAFETY: a new shared mapping of the whole memfd; it replaces
        // nothing (address chosen by the kernel).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Error::last_os("mmap(fast sites)"));
        }
        Ok(FastTable {
            fd,
            base: base.cast(),
            entry,
            bmi2: std::arch::is_x86_feature_detected!("bmi2"),
            sites: Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The replacement for the site `code` ending at `ret` that just
    /// called `nr` (allocating its entry), or `None` when the code is not a
    /// site this table can take or the table is full.
    pub(crate) fn site(&self, code: [u8; 7], nr: u64, ret: u64) -> Option<[u8; 7]> {
        let mut entry = [0xccu8; ENTRY_LEN as usize];
        let mut n = if code[0] == 0xb8 {
            // mov $nr, %eax: the immediate must be the call just made (else
            // the syscall was reached by a jump, with another number).
            let imm = u32::from_le_bytes(code[1..5].try_into().expect("4 bytes"));
            if u64::from(imm) != nr || nr > MAX_NR {
                return None;
            }
            entry[0] = 0xb8;
            entry[1..5].copy_from_slice(&(imm << 16).to_le_bytes());
            5
        } else if self.bmi2 && REPLAYABLE.iter().any(|r| code[..5] == r[..]) {
            entry[..5].copy_from_slice(&code[..5]);
            entry[5..11].copy_from_slice(&RORX_48_RAX);
            11
        } else {
            return None;
        };
        // movabs $ret, %rcx; jmp rel32 (filled in by `write_entry`)
        entry[n..n + 2].copy_from_slice(&[0x48, 0xb9]);
        entry[n + 2..n + 10].copy_from_slice(&ret.to_le_bytes());
        n += 10;
        entry[n] = 0xe9;
        let mut sites = self.sites.lock().unwrap_or_else(PoisonError::into_inner);
        let index = match sites.get(&(ret, code)) {
            Some(&i) => i,
            None => {
                let i = sites.len() as u64;
                if i >= MAX_SITES {
                    return None;
                }
                self.write_entry(i, entry, n + 1)?;
                sites.insert((ret, code), i);
                i
            }
        };
        let ptr = u32::try_from(FAST_TABLE + 8 * index).ok()?;
        let p = ptr.to_le_bytes();
        let patch = [0xff, 0x24, 0x25, p[0], p[1], p[2], p[3]];
        debug_assert_eq!(patch[5], INVALID_OPCODE);
        Some(patch)
    }

    /// The code `patch` (one [`Self::site`] gave) replaced.
    pub(crate) fn original(&self, patch: [u8; 7]) -> Option<[u8; 7]> {
        if patch[..3] != [0xff, 0x24, 0x25] {
            return None;
        }
        let ptr = u64::from(u32::from_le_bytes(patch[3..7].try_into().ok()?));
        let off = ptr.checked_sub(FAST_TABLE)?;
        if off % 8 != 0 {
            return None;
        }
        let index = off / 8;
        let sites = self.sites.lock().unwrap_or_else(PoisonError::into_inner);
        sites
            .iter()
            .find(|(_, &i)| i == index)
            .map(|(&(_, code), _)| code)
    }

    /// Writes entry `i`, `code` whose last instruction is a `jmp rel32`
    /// with its displacement at `rel_at` (filled in here), then its pointer
    /// (x86 stores are seen in order, so a stub that reads the pointer
    /// finds the code).
    fn write_entry(&self, i: u64, mut code: [u8; ENTRY_LEN as usize], rel_at: usize) -> Option<()> {
        let at = FAST_CODE + i * ENTRY_LEN;
        let rel = i32::try_from(self.entry as i64 - (at as i64 + rel_at as i64 + 4)).ok()?;
        code[rel_at..rel_at + 4].copy_from_slice(&rel.to_le_bytes());
        let code_off = FAST_TABLE_LEN + i * ENTRY_LEN;
        // SAFETY: both ranges lie inside the mapping (i < MAX_SITES); no stub
        // reads them before the pointer below is written.
        unsafe {
            std::ptr::copy_nonoverlapping(
                code.as_ptr(),
                self.base.add(code_off as usize),
                code.len(),
            );
            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            std::ptr::write_volatile(self.base.add((8 * i) as usize).cast::<u64>(), at);
        }
        Some(())
    }
}

impl Drop for FastTable {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; no reference
        // into it outlives `self`.
        unsafe { libc::munmap(self.base.cast(), (FAST_TABLE_LEN + FAST_CODE_LEN) as usize) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stub::STUB_BASE;

    #[test]
    fn every_entry_address_has_an_invalid_opcode_as_byte_5_of_its_patch() {
        for i in [0, 1, MAX_SITES - 1] {
            let p = ((FAST_TABLE + 8 * i) as u32).to_le_bytes();
            assert_eq!(p[2], INVALID_OPCODE);
            assert_eq!(p[3], 0);
        }
        const { assert!(FAST_CODE + FAST_CODE_LEN <= STUB_BASE) };
    }

    #[test]
    fn a_site_gets_one_entry_that_encodes_its_number_and_return_address() {
        let t = FastTable::new(STUB_BASE + 0x300).expect("table");
        let getpid = [0xb8, 39, 0, 0, 0, 0x0f, 0x05];
        let a = t.site(getpid, 39, 0x401234).expect("site");
        assert_eq!(&a[..3], &[0xff, 0x24, 0x25]);
        assert_eq!(
            t.site(getpid, 39, 0x401234),
            Some(a),
            "same site, same entry"
        );
        let getppid = [0xb8, 110, 0, 0, 0, 0x0f, 0x05];
        let b = t.site(getppid, 110, 0x401234).expect("site");
        assert_ne!(a, b, "another call at that address is another entry");
        assert_eq!(t.site(getppid, 39, 0x401234), None, "reached by a jump");
        assert_eq!(
            t.site([0xb8, 0, 0x80, 0, 0, 0x0f, 0x05], 0x8000, 0x401234),
            None
        );
        assert_eq!(
            t.site([0x90, 0x90, 0x90, 0x90, 0x90, 0x0f, 0x05], 1, 0x401234),
            None
        );
        // The first entry's code.
        // SAFETY: reads inside the live mapping.
        let code =
            unsafe { std::slice::from_raw_parts(t.base.add(FAST_TABLE_LEN as usize), 20).to_vec() };
        assert_eq!(code[0], 0xb8);
        assert_eq!(
            u32::from_le_bytes(code[1..5].try_into().expect("bytes")),
            39 << 16
        );
        assert_eq!(
            u64::from_le_bytes(code[7..15].try_into().expect("bytes")),
            0x401234
        );
        let rel = i32::from_le_bytes(code[16..20].try_into().expect("bytes"));
        assert_eq!(
            (FAST_CODE as i64 + 20 + i64::from(rel)) as u64,
            STUB_BASE + 0x300
        );
        // SAFETY: as above.
        let ptr = unsafe { std::ptr::read(t.base.cast::<u64>()) };
        assert_eq!(ptr, FAST_CODE);
    }
}
