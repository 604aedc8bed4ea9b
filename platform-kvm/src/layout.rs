//! Where things are: guest-physical regions, the platform's pages in the
//! upper half of every address space, and their contents (GDT, TSS, IDT,
//! the ring-0 stubs).

use platform::Result;

use crate::sys::Region;

/// Highest user address plus one (Linux's `TASK_SIZE` on x86-64).
pub(crate) const MAX_USER_ADDRESS: u64 = 0x7fff_ffff_f000;

/// Where the platform's region appears in every address space
/// (supervisor-only, PML4 slot 511).
pub(crate) const KBASE: u64 = 0xffff_ff80_0000_0000;
/// Size of the platform's region (mapped with 2 MiB pages).
pub(crate) const SYSTEM_SIZE: u64 = 16 << 20;

/// Offsets in the region.
pub(crate) const IDT: u64 = 0;
pub(crate) const STUBS: u64 = 0x1000;
pub(crate) const PDPT: u64 = 0x2000;
pub(crate) const PD: u64 = 0x3000;
const VCPUS: u64 = 0x10000;
/// Per vCPU: a page with its GDT and TSS, then a page of ring-0 stack.
const VCPU_STRIDE: u64 = 0x2000;
pub(crate) const MAX_VCPUS: u32 = ((SYSTEM_SIZE - VCPUS) / VCPU_STRIDE) as u32;

/// Where `syscall` goes (`LSTAR`), and the ports the stubs write.
pub(crate) const SYSCALL_STUB: u64 = STUBS + 0x800;
const OTHER_STUB: u64 = STUBS + 0x810;
pub(crate) const PORT_SYSCALL: u16 = 0x80;
pub(crate) const PORT_OTHER: u16 = 0x81;
/// `int $0x80` from ring 3 (the 32-bit system call ABI).
pub(crate) const PORT_INT80: u16 = 0x82;
const INT80_STUB: u64 = STUBS + 0x820;

/// Selectors, as Linux's.
pub(crate) const KERNEL_CS: u16 = 0x10;
pub(crate) const USER_DS: u16 = 0x2b;
pub(crate) const USER_CS: u16 = 0x33;
pub(crate) const TSS_SELECTOR: u16 = 0x40;

/// Page-table entry bits.
pub(crate) const PTE_P: u64 = 1;
pub(crate) const PTE_W: u64 = 2;
pub(crate) const PTE_U: u64 = 4;
pub(crate) const PTE_A: u64 = 0x20;
pub(crate) const PTE_D: u64 = 0x40;
const PTE_PS: u64 = 0x80;
pub(crate) const PTE_NX: u64 = 1 << 63;

/// Guest-physical homes of the platform's region and of the page-table
/// pool, after a memory file of `size` bytes at 0 (1 GiB aligned).
pub(crate) fn physical(size: u64) -> (u64, u64) {
    const G: u64 = 1 << 30;
    let system = size.next_multiple_of(G);
    (system, system + G)
}

/// The per-vCPU page of vCPU `id` (offset in the region).
pub(crate) fn vcpu_page(id: u32) -> u64 {
    VCPUS + u64::from(id) * VCPU_STRIDE
}

/// Its TSS, and the top of its ring-0 stack.
pub(crate) fn tss(id: u32) -> u64 {
    vcpu_page(id) + 0x100
}
pub(crate) fn stack_top(id: u32) -> u64 {
    vcpu_page(id) + VCPU_STRIDE
}

/// Does a vector push an error code?
pub(crate) fn has_error_code(vector: u8) -> bool {
    matches!(vector, 8 | 10..=14 | 17 | 21 | 29 | 30)
}

fn gate(handler: u64, dpl: u64) -> [u64; 2] {
    let low = (handler & 0xffff)
        | (u64::from(KERNEL_CS) << 16)
        | ((0x8e | (dpl << 5)) << 40)
        | (((handler >> 16) & 0xffff) << 48);
    [low, handler >> 32]
}

fn put_words(r: &Region, off: u64, words: &[u64]) {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    r.write(off, &bytes);
}

/// The platform's region, filled, for guest-physical `gpa`.
pub(crate) fn build(gpa: u64) -> Result<Region> {
    let r = Region::anonymous(SYSTEM_SIZE as usize)?;
    // Upper-half tables: PDPT[0] -> PD -> 2 MiB pages of the region.
    put_words(&r, PDPT, &[(gpa + PD) | PTE_P | PTE_W | PTE_A]);
    let pd: Vec<u64> = (0..SYSTEM_SIZE >> 21)
        .map(|i| (gpa + (i << 21)) | PTE_P | PTE_W | PTE_A | PTE_D | PTE_PS)
        .collect();
    put_words(&r, PD, &pd);
    // Stubs: `out %al, $port; ud2`.
    for v in 0..32u8 {
        r.write(STUBS + u64::from(v) * 16, &[0xe6, v, 0x0f, 0x0b]);
    }
    r.write(SYSCALL_STUB, &[0xe6, PORT_SYSCALL as u8, 0x0f, 0x0b]);
    r.write(OTHER_STUB, &[0xe6, PORT_OTHER as u8, 0x0f, 0x0b]);
    r.write(INT80_STUB, &[0xe6, PORT_INT80 as u8, 0x0f, 0x0b]);
    // IDT: the 32 exceptions to their stubs (#BP and #OF reachable from
    // ring 3, as on Linux), the rest to one stub.
    let mut idt = Vec::with_capacity(512);
    for v in 0..256u64 {
        let (handler, dpl) = match v {
            3 | 4 => (KBASE + STUBS + v * 16, 3),
            0x80 => (KBASE + INT80_STUB, 3),
            0..32 => (KBASE + STUBS + v * 16, 0),
            _ => (KBASE + OTHER_STUB, 0),
        };
        idt.extend(gate(handler, dpl));
    }
    put_words(&r, IDT, &idt);
    for id in 0..MAX_VCPUS {
        let page = vcpu_page(id);
        let tss_va = KBASE + tss(id);
        let tss_low =
            0x67 | ((tss_va & 0xff_ffff) << 16) | (0x89 << 40) | (((tss_va >> 24) & 0xff) << 56);
        put_words(
            &r,
            page,
            &[
                0,
                0,
                0x00af_9b00_0000_ffff, // 0x10 kernel code
                0x00cf_9300_0000_ffff, // 0x18 kernel data
                0x00cf_fb00_0000_ffff, // 0x23 user 32-bit code
                0x00cf_f300_0000_ffff, // 0x2b user data
                0x00af_fb00_0000_ffff, // 0x33 user code
                0,
                tss_low,
                tss_va >> 32,
            ],
        );
        // TSS: RSP0, and no I/O bitmap (port I/O from ring 3 faults).
        r.write(tss(id) + 4, &(KBASE + stack_top(id)).to_le_bytes());
        r.write(tss(id) + 102, &104u16.to_le_bytes());
    }
    Ok(r)
}

/// The GDT of vCPU `id` (guest-virtual base and limit).
pub(crate) fn gdt(id: u32) -> (u64, u16) {
    (KBASE + vcpu_page(id), 10 * 8 - 1)
}
