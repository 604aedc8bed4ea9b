//! One guest thread's vCPU: set-up, the run loop, and what each exit means.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;

use kvm_bindings::{kvm_msr_entry, kvm_regs, kvm_segment, kvm_sregs, kvm_xcrs, kvm_xsave, Msrs};
use kvm_ioctls::{SyncReg, VcpuExit, VcpuFd};
use platform::{Access, Context, Error, Event, Interrupter, Regs, Result};

use crate::layout::{
    self, KBASE, KERNEL_CS, PORT_INT80, PORT_OTHER, PORT_SYSCALL, USER_CS, USER_DS,
};
use crate::paging::KvmAddressSpace;
use crate::{sys, Shared};

const MSR_STAR: u32 = 0xc000_0081;
const MSR_LSTAR: u32 = 0xc000_0082;
const MSR_CSTAR: u32 = 0xc000_0083;
const MSR_SFMASK: u32 = 0xc000_0084;
const MSR_KERNEL_GS_BASE: u32 = 0xc000_0102;

const RFLAGS_IF: u64 = 0x200;
/// The flags a user program may hold (arithmetic, TF, DF, RF, AC, ID).
const USER_FLAGS: u64 = 0x25_0dd5;

/// What the vCPUs' exits were, for `ferrovisor do --stats`: each
/// `KVM_RUN` that returned is one exit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExitStats {
    /// system calls
    pub syscalls: u64,
    /// exceptions handed to the Sentry (faults, traps)
    pub faults: u64,
    /// returns for a kick
    pub kicks: u64,
    /// exits the platform answered itself (`int $0x80`, a kick during an
    /// exception's delivery)
    pub inner: u64,
}

thread_local! {
    /// CPU time this host thread has run guest code for.
    static GUEST_CPU: std::cell::Cell<std::time::Duration> =
        const { std::cell::Cell::new(std::time::Duration::ZERO) };
    /// This thread's CPU clock and the time when it was last read.
    static LAST_CPU: std::cell::Cell<Option<(std::time::Duration, std::time::Instant)>> =
        const { std::cell::Cell::new(None) };
}

/// A run of guest code that took `wall` as CPU time: a vCPU thread the
/// host preempts in KVM_RUN runs no guest code meanwhile. A short run
/// counts whole (reading the thread's CPU clock costs about a microsecond,
/// a third of the run); a long one (a guest computing, preemption likely)
/// as the share of time the thread had a CPU since the clock was last
/// read.
fn on_cpu(wall: std::time::Duration) -> std::time::Duration {
    const SHORT: std::time::Duration = std::time::Duration::from_micros(200);
    if wall < SHORT {
        return wall;
    }
    let (cpu, now) = (sys::thread_cpu(), std::time::Instant::now());
    let share = match LAST_CPU.with(|l| l.replace(Some((cpu, now)))) {
        Some((c0, t0)) if now > t0 => {
            (cpu.saturating_sub(c0).as_secs_f64() / (now - t0).as_secs_f64()).min(1.0)
        }
        _ => 1.0,
    };
    wall.mul_f64(share)
}

static SYSCALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static FAULTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static KICKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static INNER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn count(c: &std::sync::atomic::AtomicU64) {
    c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// The counts so far (every KVM platform of the process).
pub fn exit_stats() -> ExitStats {
    use std::sync::atomic::Ordering::Relaxed;
    ExitStats {
        syscalls: SYSCALLS.load(Relaxed),
        faults: FAULTS.load(Relaxed),
        kicks: KICKS.load(Relaxed),
        inner: INNER.load(Relaxed),
    }
}

/// An idle vCPU, kept for the next guest thread (KVM has no way to
/// destroy one short of the VM).
#[derive(Debug)]
pub(crate) struct Idle {
    id: u32,
    vcpu: VcpuFd,
    template: kvm_sregs,
}

fn host(op: &'static str, e: kvm_ioctls::Error) -> Error {
    Error::Host {
        op,
        source: std::io::Error::from_raw_os_error(e.errno()),
    }
}

fn segment(selector: u16, code: bool, dpl: u8) -> kvm_segment {
    kvm_segment {
        base: 0,
        limit: 0xffff_ffff,
        selector,
        type_: if code { 11 } else { 3 },
        present: 1,
        dpl,
        db: u8::from(!code),
        s: 1,
        l: u8::from(code),
        g: 1,
        avl: 0,
        unusable: 0,
        padding: 0,
    }
}

/// Makes vCPU `id` ready for ring-3 guest code; returns its system registers.
fn set_up(shared: &Shared, vcpu: &mut VcpuFd, id: u32) -> Result<kvm_sregs> {
    vcpu.set_cpuid2(&shared.cpuid)
        .map_err(|e| host("KVM_SET_CPUID2", e))?;
    let mut s = vcpu.get_sregs().map_err(|e| host("KVM_GET_SREGS", e))?;
    // PE MP ET NE WP AM PG; PAE OSFXSR OSXMMEXCPT (OSXSAVE); SCE LME LMA NXE.
    s.cr0 = 0x8005_0033;
    // PAE OSFXSR OSXMMEXCPT, FSGSBASE as the host's Linux offers it to
    // programs, OSXSAVE with the host's XCR0.
    s.cr4 = (1 << 5)
        | (1 << 9)
        | (1 << 10)
        | if shared.fsgsbase { 1 << 16 } else { 0 }
        | if shared.xcr0 != 0 { 1 << 18 } else { 0 };
    s.efer = 0x1 | 0x100 | 0x400 | 0x800;
    let (gdt, limit) = layout::gdt(id);
    s.gdt.base = gdt;
    s.gdt.limit = limit;
    s.idt.base = KBASE + layout::IDT;
    s.idt.limit = 256 * 16 - 1;
    s.tr = kvm_segment {
        base: KBASE + layout::tss(id),
        limit: 0x67,
        selector: layout::TSS_SELECTOR,
        type_: 11,
        present: 1,
        ..Default::default()
    };
    s.ldt = kvm_segment {
        unusable: 1,
        ..Default::default()
    };
    s.cs = segment(USER_CS, true, 3);
    s.ss = segment(USER_DS, false, 3);
    s.ds = segment(USER_DS, false, 3);
    s.es = s.ds;
    s.fs = s.ds;
    s.gs = s.ds;
    vcpu.set_sregs(&s).map_err(|e| host("KVM_SET_SREGS", e))?;
    let msrs = Msrs::from_entries(&[
        kvm_msr_entry {
            index: MSR_STAR,
            data: (0x23 << 48) | (u64::from(KERNEL_CS) << 32),
            ..Default::default()
        },
        kvm_msr_entry {
            index: MSR_LSTAR,
            data: KBASE + layout::SYSCALL_STUB,
            ..Default::default()
        },
        kvm_msr_entry {
            index: MSR_CSTAR,
            data: KBASE + layout::SYSCALL_STUB,
            ..Default::default()
        },
        kvm_msr_entry {
            // TF DF IF IOPL NT AC: as Linux masks on entry.
            index: MSR_SFMASK,
            data: 0x4_7700,
            ..Default::default()
        },
        kvm_msr_entry {
            index: MSR_KERNEL_GS_BASE,
            data: 0,
            ..Default::default()
        },
    ])
    .map_err(|_| Error::Misuse("MSR list"))?;
    let n = vcpu.set_msrs(&msrs).map_err(|e| host("KVM_SET_MSRS", e))?;
    if n != msrs.as_slice().len() {
        return Err(Error::Host {
            op: "KVM_SET_MSRS",
            source: std::io::Error::other(format!(
                "KVM took {n} of {} MSRs",
                msrs.as_slice().len()
            )),
        });
    }
    if shared.xcr0 != 0 {
        let mut x = kvm_xcrs {
            nr_xcrs: 1,
            ..Default::default()
        };
        x.xcrs[0].xcr = 0;
        x.xcrs[0].value = shared.xcr0;
        vcpu.set_xcrs(&x).map_err(|e| host("KVM_SET_XCRS", e))?;
    }
    // SAFETY: the descriptor is this vCPU's, open for the call.
    let fd = unsafe { BorrowedFd::borrow_raw(vcpu.as_raw_fd()) };
    sys::set_run_signal_mask(fd)?;
    vcpu.set_sync_valid_reg(SyncReg::Register);
    vcpu.set_sync_valid_reg(SyncReg::SystemRegister);
    vcpu.set_sync_valid_reg(SyncReg::VcpuEvents);
    Ok(s)
}

/// Kicks one vCPU's thread out of `KVM_RUN`.
#[derive(Debug)]
struct Kick {
    pid: i32,
    /// the host thread that last switched to the context (0: none yet)
    tid: std::sync::atomic::AtomicI32,
}

impl Interrupter for Kick {
    fn interrupt(&self) {
        let tid = self.tid.load(std::sync::atomic::Ordering::Acquire);
        if tid != 0 {
            sys::kick(self.pid, tid);
        }
    }
}

thread_local! {
    /// This host thread's id once it blocked the kick (0 before).
    static KICKABLE: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

/// The calling thread's id, the kick blocked in it.
fn kickable_thread() -> Result<i32> {
    let tid = KICKABLE.get();
    if tid != 0 {
        return Ok(tid);
    }
    sys::block_kick()?;
    let tid = sys::gettid();
    KICKABLE.set(tid);
    Ok(tid)
}

/// One guest thread's context: a vCPU bound to the calling host thread.
#[derive(Debug)]
pub struct KvmContext {
    shared: Arc<Shared>,
    idle: Option<Idle>,
    kick: Arc<Kick>,
    /// the address space it last ran in
    root: u64,
}

impl KvmContext {
    pub(crate) fn new(shared: Arc<Shared>) -> Result<Self> {
        let reused = shared.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let fresh = reused.is_none();
        let idle = match reused {
            Some(i) => i,
            None => {
                let id = shared
                    .next_vcpu
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if id >= shared.max_vcpus {
                    return Err(Error::Misuse("out of KVM vCPUs for guest threads"));
                }
                // SAFETY: the VM's descriptor, open as long as `shared`.
                let vm = unsafe { BorrowedFd::borrow_raw(shared.vm.as_raw_fd()) };
                let raw = sys::create_vcpu(vm, id)?;
                let fd = sys::move_fd(raw, (shared.window.0 + u64::from(id)) as i32)?;
                // SAFETY: `fd` is the new vCPU's descriptor, ours alone.
                let mut vcpu = unsafe { shared.vm.create_vcpu_from_rawfd(fd) }
                    .map_err(|e| host("KVM vCPU descriptor", e))?;
                let template = set_up(&shared, &mut vcpu, id)?;
                Idle { id, vcpu, template }
            }
        };
        let mut ctx = KvmContext {
            shared: shared.clone(),
            idle: Some(idle),
            kick: Arc::new(Kick {
                pid: shared.pid,
                tid: Default::default(),
            }),
            root: 0,
        };
        if !fresh {
            // Nothing of the thread that had it before may show.
            ctx.reset_fpstate()?;
        }
        Ok(ctx)
    }

    fn cpu(&mut self) -> Result<&mut Idle> {
        self.idle.as_mut().ok_or(Error::Misuse("vCPU gone"))
    }

    fn xsave(&mut self) -> Result<kvm_xsave> {
        self.cpu()?
            .vcpu
            .get_xsave()
            .map_err(|e| host("KVM_GET_XSAVE", e))
    }

    /// Runs the guest from `regs` until something the Sentry decides.
    fn run(&mut self, space: &KvmAddressSpace, regs: &mut Regs) -> Result<Event> {
        let root = space.root();
        let shared = self.shared.clone();
        let cpu = self.idle.as_mut().ok_or(Error::Misuse("vCPU gone"))?;
        let id = cpu.id;
        loop {
            {
                let mut s = cpu.template;
                s.fs.base = regs.fs_base;
                s.gs.base = regs.gs_base;
                s.cr3 = root;
                let sync = cpu.vcpu.sync_regs_mut();
                sync.regs = load(regs);
                sync.sregs = s;
            }
            cpu.vcpu.set_sync_dirty_reg(SyncReg::Register);
            cpu.vcpu.set_sync_dirty_reg(SyncReg::SystemRegister);
            let port = loop {
                match cpu.vcpu.run() {
                    Ok(VcpuExit::IoOut(port, _)) => break port,
                    Ok(VcpuExit::Intr) => {}
                    Ok(other) => {
                        let what = format!("{other:?}");
                        let s = cpu.vcpu.sync_regs();
                        return Err(Error::Host {
                            op: "KVM_RUN",
                            source: std::io::Error::other(format!(
                                "unexpected exit {what} at rip {:#x} (cs {:#x}, cr2 {:#x})",
                                s.regs.rip, s.sregs.cs.selector, s.sregs.cr2
                            )),
                        });
                    }
                    Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {}
                    Err(e) => return Err(host("KVM_RUN", e)),
                }
                // A kick: report it unless the vCPU is between a vector
                // and its stub's exit (ring 0), which it finishes first.
                sys::drain_kicks();
                let s = cpu.vcpu.sync_regs();
                // (an exception KVM is yet to deliver belongs to the code
                // at hand: let it reach its stub first)
                let delivering = s.events.exception.injected != 0
                    || s.events.exception.pending != 0
                    || s.events.nmi.injected != 0;
                if s.sregs.cs.selector & 3 == 3 && !delivering {
                    store(regs, &s.regs, &s.sregs);
                    if s.regs.rip == KBASE + layout::SYSCALL_STUB {
                        // (PVM) between `syscall` and its fault on the stub:
                        // the call is made.
                        count(&SYSCALLS);
                        return Ok(syscall(regs, s.regs.rcx, s.regs.r11, s.regs.rsp));
                    }
                    count(&KICKS);
                    return Ok(Event::Interrupted);
                }
                count(&INNER);
            };
            let s = cpu.vcpu.sync_regs();
            store(regs, &s.regs, &s.sregs);
            if port == PORT_SYSCALL {
                // `syscall` reached ring 0 (VMX): rcx and r11 hold the return.
                count(&SYSCALLS);
                return Ok(syscall(regs, s.regs.rcx, s.regs.r11, s.regs.rsp));
            }
            // A vector: its frame is on this vCPU's ring-0 stack.
            let vector = match port {
                PORT_OTHER => 32,
                PORT_INT80 => 0x80,
                p => p as u8,
            };
            let top = layout::stack_top(id);
            let at = s.regs.rsp.wrapping_sub(KBASE);
            let words = if layout::has_error_code(vector) { 6 } else { 5 };
            if at > top || top - at != words * 8 {
                return Err(Error::Host {
                    op: "KVM exception frame",
                    source: std::io::Error::other(format!(
                        "vector {vector}: ring-0 stack at {:#x}, expected {words} words below {:#x}",
                        s.regs.rsp,
                        KBASE + top
                    )),
                });
            }
            let frame: Vec<u64> = (0..words)
                .map(|i| shared.system.read_u64(at + i * 8))
                .collect();
            let (error, f) = if words == 6 {
                (frame[0], &frame[1..])
            } else {
                (0, &frame[..])
            };
            let (rip, cs, rflags, rsp) = (f[0], f[1], f[2], f[3]);
            if cs & 3 != 3 {
                return Err(Error::Host {
                    op: "KVM exception",
                    source: std::io::Error::other(format!(
                        "vector {vector} in ring 0 at {rip:#x} (cr2 {:#x})",
                        s.sregs.cr2
                    )),
                });
            }
            let lstar = KBASE + layout::SYSCALL_STUB;
            if vector == 14 && s.sregs.cr2 == lstar && rip == lstar && rflags & RFLAGS_IF == 0 {
                // `syscall` stayed in ring 3 (PVM) and faulted on the stub.
                count(&SYSCALLS);
                return Ok(syscall(regs, s.regs.rcx, s.regs.r11, rsp));
            }
            regs.rip = rip;
            regs.rsp = rsp;
            regs.eflags = rflags;
            // PVM raises #UD for `int $n` itself (at the instruction),
            // where a CPU would take gate n: 0x80 is ours, any other a #GP.
            let mut vector = vector;
            let int_n = (vector == 6 && space.read_byte(rip) == Some(0xcd))
                .then(|| space.read_byte(rip.wrapping_add(1)))
                .flatten();
            let int80_ud = int_n == Some(0x80);
            match int_n {
                Some(0x80) => regs.rip = rip + 2,
                // the gates a program may take: traps, past the instruction
                Some(n @ (3 | 4)) => {
                    regs.rip = rip + 2;
                    vector = n;
                }
                Some(_) => vector = 13,
                None => {}
            }
            match vector {
                // No 32-bit ABI: ENOSYS, as on the other platforms.
                0x80 => {
                    count(&INNER);
                    regs.rax = (-i64::from(libc::ENOSYS)) as u64;
                    continue;
                }
                6 if int80_ud => {
                    count(&INNER);
                    regs.rax = (-i64::from(libc::ENOSYS)) as u64;
                    continue;
                }
                32 => {
                    count(&KICKS);
                    return Ok(Event::Interrupted);
                }
                _ => {}
            }
            let cr2 = s.sregs.cr2;
            let held = vector == 14 && space.holds(cr2);
            let vcpu = &cpu.vcpu;
            count(&FAULTS);
            return Ok(vector_event(vector, error, rip, cr2, held, || {
                vcpu.get_xsave().map(|x| x.region[6]).unwrap_or(0)
            }));
        }
    }
}

impl Drop for KvmContext {
    fn drop(&mut self) {
        if let Some(i) = self.idle.take() {
            self.shared
                .idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(i);
        }
    }
}

fn load(regs: &Regs) -> kvm_regs {
    kvm_regs {
        rax: regs.rax,
        rbx: regs.rbx,
        rcx: regs.rcx,
        rdx: regs.rdx,
        rsi: regs.rsi,
        rdi: regs.rdi,
        rsp: regs.rsp,
        rbp: regs.rbp,
        r8: regs.r8,
        r9: regs.r9,
        r10: regs.r10,
        r11: regs.r11,
        r12: regs.r12,
        r13: regs.r13,
        r14: regs.r14,
        r15: regs.r15,
        rip: regs.rip,
        rflags: (regs.eflags & USER_FLAGS) | RFLAGS_IF | 2,
    }
}

fn store(regs: &mut Regs, r: &kvm_regs, s: &kvm_sregs) {
    regs.rax = r.rax;
    regs.rbx = r.rbx;
    regs.rcx = r.rcx;
    regs.rdx = r.rdx;
    regs.rsi = r.rsi;
    regs.rdi = r.rdi;
    regs.rsp = r.rsp;
    regs.rbp = r.rbp;
    regs.r8 = r.r8;
    regs.r9 = r.r9;
    regs.r10 = r.r10;
    regs.r11 = r.r11;
    regs.r12 = r.r12;
    regs.r13 = r.r13;
    regs.r14 = r.r14;
    regs.r15 = r.r15;
    regs.rip = r.rip;
    regs.eflags = r.rflags;
    regs.fs_base = s.fs.base;
    regs.gs_base = s.gs.base;
    regs.cs = u64::from(USER_CS);
    regs.ss = u64::from(USER_DS);
    regs.orig_rax = u64::MAX;
}

/// What a vector raised in ring 3 means to a Linux program (as Linux's
/// trap handlers say it).
fn vector_event(
    vector: u8,
    error: u64,
    rip: u64,
    cr2: u64,
    held: bool,
    mxcsr: impl FnOnce() -> u32,
) -> Event {
    const SI_KERNEL: i32 = 0x80;
    let signal = |signo, code, addr| Event::Signal { signo, code, addr };
    match vector {
        0 => signal(libc::SIGFPE, 1, rip),  // FPE_INTDIV
        1 => signal(libc::SIGTRAP, 2, rip), // TRAP_TRACE
        3 => signal(libc::SIGTRAP, SI_KERNEL, 0),
        6 => signal(libc::SIGILL, 2, rip), // ILL_ILLOPN
        14 => {
            let access = if error & 0x10 != 0 {
                Access::Execute
            } else if error & 2 != 0 {
                Access::Write
            } else {
                Access::Read
            };
            Event::Fault {
                signo: libc::SIGSEGV,
                // SEGV_PKUERR, SEGV_ACCERR, SEGV_MAPERR
                // (the kernel half is "not mapped" to a program, as Linux says)
                code: if error & 0x20 != 0 {
                    4
                } else if cr2 >= 1 << 47 {
                    1
                } else if error & 1 != 0 || held {
                    2
                } else {
                    1
                },
                addr: cr2,
                access: Some(access),
            }
        }
        16 => signal(libc::SIGFPE, 7, rip), // FPE_FLTINV
        17 => signal(libc::SIGBUS, 1, 0),   // BUS_ADRALN
        11 | 12 => signal(libc::SIGBUS, SI_KERNEL, 0),
        19 => {
            let m = mxcsr();
            let raised = m & 0x3f & !((m >> 7) & 0x3f);
            let code = if raised & 1 != 0 {
                7 // FPE_FLTINV
            } else if raised & 4 != 0 {
                3 // FPE_FLTDIV
            } else if raised & 8 != 0 {
                4 // FPE_FLTOVF
            } else if raised & 0x12 != 0 {
                5 // FPE_FLTUND
            } else if raised & 0x20 != 0 {
                6 // FPE_FLTRES
            } else {
                0
            };
            signal(libc::SIGFPE, code, rip)
        }
        _ => signal(libc::SIGSEGV, SI_KERNEL, 0),
    }
}

impl Context for KvmContext {
    fn switch(
        &mut self,
        address_space: &dyn platform::AddressSpace,
        regs: &mut Regs,
    ) -> Result<Event> {
        let space = address_space
            .as_any()
            .downcast_ref::<KvmAddressSpace>()
            .ok_or(Error::Misuse("not a KVM address space"))?;
        let tid = kickable_thread()?;
        self.kick
            .tid
            .store(tid, std::sync::atomic::Ordering::Release);
        let root = space.root();
        if self.root != root {
            // A thread changes address space only at execve, which starts
            // the FPU afresh (the Sentry resets it itself only when the
            // old address space stays).
            if self.root != 0 {
                self.reset_fpstate()?;
            }
            self.root = root;
        }
        let started = std::time::Instant::now();
        let event = self.run(space, regs);
        let used = on_cpu(started.elapsed());
        space.add_guest_time(used);
        GUEST_CPU.with(|c| c.set(c.get() + used));
        event
    }

    fn interrupter(&self) -> Arc<dyn Interrupter> {
        self.kick.clone()
    }

    fn guest_cpu_of_this_thread(&self) -> std::time::Duration {
        GUEST_CPU.with(|c| c.get())
    }

    fn fpstate(&mut self) -> Result<Vec<u8>> {
        let len = self.shared.xsave_len;
        let x = self.xsave()?;
        Ok(x.region
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .take(len)
            .collect())
    }

    fn set_fpstate(&mut self, state: &[u8]) -> Result<()> {
        let mut x = kvm_xsave::default();
        for (i, chunk) in state.chunks(4).take(x.region.len()).enumerate() {
            let mut w = [0u8; 4];
            w[..chunk.len()].copy_from_slice(chunk);
            x.region[i] = u32::from_le_bytes(w);
        }
        let cpu = self.cpu()?;
        // SAFETY: a plain kvm_xsave, no flexible array part.
        unsafe { cpu.vcpu.set_xsave(&x) }.map_err(|e| host("KVM_SET_XSAVE", e))
    }
}

/// A system call: `rip` and `flags` are what `syscall` saved.
fn syscall(regs: &mut Regs, rip: u64, flags: u64, rsp: u64) -> Event {
    regs.orig_rax = regs.rax;
    regs.rip = rip;
    regs.rcx = rip;
    regs.r11 = flags;
    regs.eflags = flags;
    regs.rsp = rsp;
    Event::Syscall
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_mean_what_linux_says() {
        let none = || 0;
        assert_eq!(
            vector_event(0, 0, 0x1000, 0, false, none),
            Event::Signal {
                signo: libc::SIGFPE,
                code: 1,
                addr: 0x1000
            }
        );
        assert_eq!(
            vector_event(6, 0, 0x1000, 0, false, none),
            Event::Signal {
                signo: libc::SIGILL,
                code: 2,
                addr: 0x1000
            }
        );
        assert_eq!(
            vector_event(13, 0, 0x1000, 0, false, none),
            Event::Signal {
                signo: libc::SIGSEGV,
                code: 0x80,
                addr: 0
            }
        );
        assert_eq!(
            vector_event(14, 6, 0x1000, 0xdead000, false, none),
            Event::Fault {
                signo: libc::SIGSEGV,
                code: 1,
                addr: 0xdead000,
                access: Some(Access::Write)
            }
        );
        assert_eq!(
            vector_event(14, 0x15, 0x1000, 0x2000, false, none),
            Event::Fault {
                signo: libc::SIGSEGV,
                code: 2,
                addr: 0x2000,
                access: Some(Access::Execute)
            }
        );
        // the platform's own pages, present but not the program's
        assert_eq!(
            vector_event(14, 5, 0x1000, KBASE, false, none),
            Event::Fault {
                signo: libc::SIGSEGV,
                code: 1,
                addr: KBASE,
                access: Some(Access::Read)
            }
        );
        // a PROT_NONE page: not present, but mapped
        assert_eq!(
            vector_event(14, 4, 0x1000, 0x3000, true, none),
            Event::Fault {
                signo: libc::SIGSEGV,
                code: 2,
                addr: 0x3000,
                access: Some(Access::Read)
            }
        );
        // divide by zero raised, not masked
        assert_eq!(
            vector_event(19, 0, 0x1000, 0, false, || 0x1f80 & !(1 << 9) | 4),
            Event::Signal {
                signo: libc::SIGFPE,
                code: 3,
                addr: 0x1000
            }
        );
    }

    #[test]
    fn user_flags_keep_interrupts_on_and_iopl_zero() {
        let r = load(&Regs {
            eflags: 0x3000 | 0x1,
            ..Regs::default()
        });
        assert_eq!(r.rflags, 0x203);
    }
}
