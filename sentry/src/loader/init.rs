//! The sandbox's own init: a tiny static ELF that a long-lived sandbox
//! (`ferrovisor sandbox create`) runs as its first process, so that it
//! needs no program of the root's and reaps the orphans that `exec`'d
//! programs leave behind, as `docker run --init` does.
//!
//! It blocks `SIGCHLD`, then forever reaps every child that has exited
//! (`wait4(-1, NULL, WNOHANG)`) and waits for the next `SIGCHLD`
//! (`rt_sigtimedwait`). It has no handlers, so as PID 1 it ignores what
//! Linux's init ignores; the sandbox ends when the runtime kills it.

/// Where the sandbox's file system shows it.
pub const PATH: &[u8] = b"/.ferrovisor-init";

/// Where the image is loaded (the usual start of a static executable).
const BASE: u64 = 0x40_0000;

/// The code: the loop above, assembled (`as`, Intel syntax):
///
/// ```text
///   push 0x10000           ; the set {SIGCHLD} on the stack
///   mov eax, 14            ; rt_sigprocmask(SIG_BLOCK, &set, NULL, 8)
///   xor edi, edi
///   mov rsi, rsp
///   xor edx, edx
///   mov r10d, 8
///   syscall
/// reap:
///   mov eax, 61            ; wait4(-1, NULL, WNOHANG, NULL)
///   mov rdi, -1
///   xor esi, esi
///   mov edx, 1
///   xor r10d, r10d
///   syscall
///   test rax, rax
///   jg reap                ; one reaped: look for another
///   mov eax, 128           ; rt_sigtimedwait(&set, NULL, NULL, 8)
///   mov rdi, rsp
///   xor esi, esi
///   xor edx, edx
///   mov r10d, 8
///   syscall
///   jmp reap
/// ```
const CODE: [u8; 76] = [
    0x68, 0x00, 0x00, 0x01, 0x00, 0xb8, 0x0e, 0x00, 0x00, 0x00, 0x31, 0xff, 0x48, 0x89, 0xe6, 0x31,
    0xd2, 0x41, 0xba, 0x08, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xb8, 0x3d, 0x00, 0x00, 0x00, 0x48, 0xc7,
    0xc7, 0xff, 0xff, 0xff, 0xff, 0x31, 0xf6, 0xba, 0x01, 0x00, 0x00, 0x00, 0x45, 0x31, 0xd2, 0x0f,
    0x05, 0x48, 0x85, 0xc0, 0x7f, 0xe3, 0xb8, 0x80, 0x00, 0x00, 0x00, 0x48, 0x89, 0xe7, 0x31, 0xf6,
    0x31, 0xd2, 0x41, 0xba, 0x08, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xeb, 0xcd,
];

/// The ELF file: a 64-byte header, one `PT_LOAD` program header (read
/// and execute, the whole file at [`BASE`]), then the code.
pub fn image() -> Vec<u8> {
    const EHDR: u64 = 64;
    const PHDR: u64 = 56;
    let size = EHDR + PHDR + CODE.len() as u64;
    let mut f = Vec::with_capacity(size as usize);
    // e_ident: magic, 64-bit, little-endian, version 1, System V ABI
    f.extend_from_slice(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
    f.extend_from_slice(&[0; 8]);
    f.extend_from_slice(&2u16.to_le_bytes()); // e_type: ET_EXEC
    f.extend_from_slice(&62u16.to_le_bytes()); // e_machine: EM_X86_64
    f.extend_from_slice(&1u32.to_le_bytes()); // e_version
    f.extend_from_slice(&(BASE + EHDR + PHDR).to_le_bytes()); // e_entry
    f.extend_from_slice(&EHDR.to_le_bytes()); // e_phoff
    f.extend_from_slice(&0u64.to_le_bytes()); // e_shoff
    f.extend_from_slice(&0u32.to_le_bytes()); // e_flags
    f.extend_from_slice(&(EHDR as u16).to_le_bytes()); // e_ehsize
    f.extend_from_slice(&(PHDR as u16).to_le_bytes()); // e_phentsize
    f.extend_from_slice(&1u16.to_le_bytes()); // e_phnum
    f.extend_from_slice(&64u16.to_le_bytes()); // e_shentsize
    f.extend_from_slice(&0u16.to_le_bytes()); // e_shnum
    f.extend_from_slice(&0u16.to_le_bytes()); // e_shstrndx
    f.extend_from_slice(&1u32.to_le_bytes()); // p_type: PT_LOAD
    f.extend_from_slice(&5u32.to_le_bytes()); // p_flags: R + X
    f.extend_from_slice(&0u64.to_le_bytes()); // p_offset
    f.extend_from_slice(&BASE.to_le_bytes()); // p_vaddr
    f.extend_from_slice(&BASE.to_le_bytes()); // p_paddr
    f.extend_from_slice(&size.to_le_bytes()); // p_filesz
    f.extend_from_slice(&size.to_le_bytes()); // p_memsz
    f.extend_from_slice(&0x1000u64.to_le_bytes()); // p_align
    f.extend_from_slice(&CODE);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_is_a_static_elf_whose_entry_is_its_code() {
        let f = image();
        assert_eq!(&f[..4], b"\x7fELF");
        let entry = u64::from_le_bytes(f[24..32].try_into().expect("8 bytes"));
        let code_at = (entry - BASE) as usize;
        assert_eq!(&f[code_at..], &CODE);
        // the loop's last jump lands on `reap:` (mov eax, 61)
        assert_eq!(&f[code_at + 0x19..code_at + 0x1a], &[0xb8]);
        assert_eq!(f[code_at + 0x1a], 61);
    }
}
