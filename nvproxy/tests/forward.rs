//! The forwarder against a fake driver that records exactly what reaches
//! it: refusals never reach it, pointers and descriptors arrive translated,
//! and results come back to the guest's own memory.

use std::cell::RefCell;

use abi::Errno;
use nvproxy::abi::{
    esc, frontend_request, status, uvm, RmAllocWithRights, RmControl, UvmRegisterGpu,
};
use nvproxy::{abi_for, Caps, Driver, GuestMemory, Proxy, Record, Version};
use zerocopy::{FromBytes, IntoBytes};

const BASE: u64 = 0x7000_0000;

/// A guest address space: one region at `BASE`.
struct Mem(RefCell<Vec<u8>>);

impl Mem {
    fn new() -> Mem {
        Mem(RefCell::new(vec![0; 1 << 16]))
    }
    fn range(&self, addr: u64, len: usize) -> Result<std::ops::Range<usize>, Errno> {
        let off = addr.checked_sub(BASE).ok_or(Errno::EFAULT)? as usize;
        let end = off.checked_add(len).ok_or(Errno::EFAULT)?;
        (end <= self.0.borrow().len())
            .then_some(off..end)
            .ok_or(Errno::EFAULT)
    }
    fn put(&self, addr: u64, data: &[u8]) {
        self.write(addr, data).expect("well-formed test data");
    }
    fn get(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        self.read(addr, &mut v).expect("well-formed test data");
        v
    }
}

impl GuestMemory for Mem {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), Errno> {
        let r = self.range(addr, out.len())?;
        out.copy_from_slice(&self.0.borrow()[r]);
        Ok(())
    }
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Errno> {
        let r = self.range(addr, data.len())?;
        self.0.borrow_mut()[r].copy_from_slice(data);
        Ok(())
    }
}

/// What the fake driver saw of one call.
#[derive(Debug, Clone)]
struct Call {
    request: u32,
    params: Vec<u8>,
}

/// A driver double: records each call and answers like the real one for
/// the few commands the tests use. Guest descriptors 7 and 8 are NVIDIA
/// files with host descriptors 107 and 108.
#[derive(Default)]
struct FakeDriver {
    calls: RefCell<Vec<Call>>,
    /// what the driver read behind the embedded pointer, per call
    seen_inner: RefCell<Vec<Vec<u8>>>,
}

/// Reads `len` bytes at a proxy address the driver was handed.
fn proxy_bytes(addr: u64, len: usize) -> Vec<u8> {
    if addr == 0 || len == 0 {
        return Vec::new();
    }
    // SAFETY: the proxy passes pointers to its own live buffers of at
    // least `len` bytes for the duration of the call, as a driver's
    // copy_from_user relies on.
    unsafe { std::slice::from_raw_parts(addr as *const u8, len) }.to_vec()
}

fn proxy_write(addr: u64, data: &[u8]) {
    if addr == 0 || data.is_empty() {
        return;
    }
    // SAFETY: as above; the buffer is the proxy's and writable.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) }
}

impl Driver for FakeDriver {
    fn ioctl(&self, request: u32, params: &mut [u8]) -> Result<i32, Errno> {
        self.calls.borrow_mut().push(Call {
            request,
            params: params.to_vec(),
        });
        if request == frontend_request(esc::RM_CONTROL, 32) {
            let mut c = RmControl::read_from_bytes(params).expect("well-formed test data");
            let inner = proxy_bytes(c.params, c.params_size as usize);
            self.seen_inner.borrow_mut().push(inner.clone());
            if c.cmd == 0x2080_0110 {
                // NV2080_CTRL_CMD_GPU_GET_NAME_STRING: flags in, name out.
                let mut out = inner;
                out[4..4 + 11].copy_from_slice(b"NVIDIA H200");
                proxy_write(c.params, &out);
            } else if c.cmd == 0x2080_0101 {
                // NV2080_CTRL_CMD_GPU_GET_INFO: answer each index with index+100.
                let count =
                    u32::from_ne_bytes(inner[0..4].try_into().expect("well-formed test data"))
                        as usize;
                let list =
                    u64::from_ne_bytes(inner[8..16].try_into().expect("well-formed test data"));
                let mut entries = proxy_bytes(list, count * 8);
                self.seen_inner.borrow_mut().push(entries.clone());
                for e in entries.chunks_mut(8) {
                    let idx =
                        u32::from_ne_bytes(e[0..4].try_into().expect("well-formed test data"));
                    e[4..8].copy_from_slice(&(idx + 100).to_ne_bytes());
                }
                proxy_write(list, &entries);
            }
            c.status = status::OK;
            params.copy_from_slice(c.as_bytes());
        } else if request == frontend_request(esc::RM_ALLOC, 48) {
            let mut a = RmAllocWithRights::read_from_bytes(params).expect("well-formed test data");
            self.seen_inner
                .borrow_mut()
                .push(proxy_bytes(a.p_alloc_parms, a.params_size as usize));
            a.h_object_new = 0xcafe_0001;
            a.status = status::OK;
            params.copy_from_slice(a.as_bytes());
        }
        Ok(0)
    }
    fn host_fd(&self, guest_fd: i32) -> Option<i32> {
        matches!(guest_fd, 7 | 8).then_some(guest_fd + 100)
    }
}

fn proxy(caps: Caps) -> Proxy {
    Proxy::new(
        abi_for(Version::parse("580.105.08").expect("well-formed test data"))
            .expect("well-formed test data"),
        caps,
    )
}

fn control(mem: &Mem, cmd: u32, params: u64, size: u32) -> u64 {
    let c = RmControl {
        h_client: 0xc1d0_0001,
        h_object: 0x5c00_0001,
        cmd,
        flags: 0,
        params,
        params_size: size,
        status: 0,
    };
    mem.put(BASE, c.as_bytes());
    BASE
}

fn guest_control(mem: &Mem) -> RmControl {
    RmControl::read_from_bytes(&mem.get(BASE, 32)).expect("well-formed test data")
}

const RM_CONTROL: u32 = frontend_request(esc::RM_CONTROL, 32);

#[test]
fn unknown_and_malformed_requests_never_reach_the_driver() {
    let (mem, drv, p) = (Mem::new(), FakeDriver::default(), proxy(Caps::DEFAULT));
    // An escape the table does not know: EINVAL, as the driver answers.
    let o = p.frontend(&mem, &drv, frontend_request(0x99, 16), BASE);
    assert_eq!(o.ret, Err(Errno::EINVAL));
    assert!(matches!(o.record, Record::Refused(ref w, _) if w.contains("0x99")));
    // A known escape with the wrong size encoded in the request.
    let o = p.frontend(&mem, &drv, frontend_request(esc::RM_CONTROL, 24), BASE);
    assert_eq!(o.ret, Err(Errno::EINVAL));
    // Not an 'F' request at all.
    assert_eq!(p.frontend(&mem, &drv, 0x5401, BASE).ret, Err(Errno::EINVAL));
    // Parameters outside the guest's memory.
    assert_eq!(
        p.frontend(&mem, &drv, RM_CONTROL, 0x10).ret,
        Err(Errno::EFAULT)
    );
    // An unknown UVM request.
    assert_eq!(p.uvm(&mem, &drv, 9999, BASE).ret, Err(Errno::EINVAL));
    assert!(drv.calls.borrow().is_empty());
}

#[test]
fn an_unknown_control_command_is_answered_not_supported() {
    let (mem, drv, p) = (Mem::new(), FakeDriver::default(), proxy(Caps::DEFAULT));
    let arg = control(&mem, 0x2080_dead, BASE + 0x100, 8);
    let o = p.frontend(&mem, &drv, RM_CONTROL, arg);
    assert_eq!(o.ret, Ok(0));
    assert_eq!(guest_control(&mem).status, status::NOT_SUPPORTED);
    assert_eq!(
        o.record,
        Record::Refused("control 0x2080dead".into(), "not in the table")
    );
    assert!(drv.calls.borrow().is_empty());
}

#[test]
fn a_control_with_the_wrong_size_or_a_wild_pointer_is_refused() {
    let (mem, drv, p) = (Mem::new(), FakeDriver::default(), proxy(Caps::DEFAULT));
    // NV2080_CTRL_GPU_GET_NAME_STRING_PARAMS is 132 bytes.
    let arg = control(&mem, 0x2080_0110, BASE + 0x100, 100);
    assert_eq!(p.frontend(&mem, &drv, RM_CONTROL, arg).ret, Ok(0));
    assert_eq!(guest_control(&mem).status, status::INVALID_ARGUMENT);
    let arg = control(&mem, 0x2080_0110, 0xdead_0000_0000, 132);
    assert_eq!(p.frontend(&mem, &drv, RM_CONTROL, arg).ret, Ok(0));
    assert_eq!(guest_control(&mem).status, status::INVALID_POINTER);
    // A list longer than the driver's maximum (70 entries).
    mem.put(BASE + 0x100, &[71u32.to_ne_bytes(), [0; 4]].concat());
    mem.put(BASE + 0x108, &(BASE + 0x200).to_ne_bytes());
    let arg = control(&mem, 0x2080_0101, BASE + 0x100, 16);
    assert_eq!(p.frontend(&mem, &drv, RM_CONTROL, arg).ret, Ok(0));
    assert_eq!(guest_control(&mem).status, status::INVALID_ARGUMENT);
    assert!(drv.calls.borrow().is_empty());
}

#[test]
fn control_parameters_travel_through_proxy_memory_and_back() {
    let (mem, drv, p) = (Mem::new(), FakeDriver::default(), proxy(Caps::DEFAULT));
    let inner = BASE + 0x100;
    let mut params = vec![0u8; 132];
    params[0..4].copy_from_slice(&1u32.to_ne_bytes()); // gpuNameStringFlags: UNICODE? no, ASCII=0; any input
    mem.put(inner, &params);
    let arg = control(&mem, 0x2080_0110, inner, 132);
    let o = p.frontend(&mem, &drv, RM_CONTROL, arg);
    assert_eq!(o.ret, Ok(0));
    assert_eq!(
        o.record,
        Record::Forwarded(
            "NV_ESC_RM_CONTROL",
            Some("NV2080_CTRL_CMD_GPU_GET_NAME_STRING")
        )
    );
    // The driver got the proxy's copy, not the guest's address, with the
    // guest's input in it.
    let call = drv.calls.borrow()[0].clone();
    let sent = RmControl::read_from_bytes(&call.params).expect("well-formed test data");
    assert_ne!(sent.params, inner);
    assert_eq!(drv.seen_inner.borrow()[0][0..4], 1u32.to_ne_bytes());
    // The guest sees the driver's answer in its own buffer, and its own pointer.
    assert_eq!(&mem.get(inner + 4, 11), b"NVIDIA H200");
    let back = guest_control(&mem);
    assert_eq!(back.params, inner);
    assert_eq!(back.status, status::OK);
}

#[test]
fn arrays_behind_pointers_are_copied_both_ways() {
    let (mem, drv, p) = (Mem::new(), FakeDriver::default(), proxy(Caps::DEFAULT));
    let (inner, list) = (BASE + 0x100, BASE + 0x200);
    // Two NV2080_CTRL_GPU_INFO entries asking for indices 3 and 9.
    mem.put(
        list,
        &[3u32, 0, 9, 0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect::<Vec<_>>(),
    );
    mem.put(inner, &[2u32.to_ne_bytes(), [0; 4]].concat());
    mem.put(inner + 8, &list.to_ne_bytes());
    let arg = control(&mem, 0x2080_0101, inner, 16);
    assert_eq!(p.frontend(&mem, &drv, RM_CONTROL, arg).ret, Ok(0));
    // The driver read the indices through a pointer of the proxy's.
    let seen = drv.seen_inner.borrow();
    assert_ne!(
        u64::from_ne_bytes(seen[0][8..16].try_into().expect("well-formed test data")),
        list
    );
    assert_eq!(seen[1][0..4], 3u32.to_ne_bytes());
    // The guest's list holds the answers; its pointer is its own again.
    let got = mem.get(list, 16);
    assert_eq!(got[4..8], 103u32.to_ne_bytes());
    assert_eq!(got[12..16], 109u32.to_ne_bytes());
    assert_eq!(mem.get(inner + 8, 8), list.to_ne_bytes());
}

#[test]
fn descriptors_inside_parameters_are_translated_and_restored() {
    let (mem, drv, p) = (Mem::new(), FakeDriver::default(), proxy(Caps::DEFAULT));
    // NV_ESC_REGISTER_FD with the guest's control descriptor 7.
    mem.put(BASE, &7i32.to_ne_bytes());
    let o = p.frontend(&mem, &drv, frontend_request(esc::REGISTER_FD, 4), BASE);
    assert_eq!(o.ret, Ok(0));
    assert_eq!(
        drv.calls.borrow()[0].request,
        frontend_request(esc::REGISTER_FD, 4)
    );
    assert_eq!(drv.calls.borrow()[0].params, 107i32.to_ne_bytes());
    assert_eq!(mem.get(BASE, 4), 7i32.to_ne_bytes());
    // A descriptor that is not an NVIDIA file reaches the driver as -1.
    mem.put(BASE, &3i32.to_ne_bytes());
    p.frontend(&mem, &drv, frontend_request(esc::REGISTER_FD, 4), BASE);
    assert_eq!(drv.calls.borrow()[1].params, (-1i32).to_ne_bytes());
    // UVM_REGISTER_GPU's rmCtrlFd.
    let r = UvmRegisterGpu {
        rm_ctrl_fd: 8,
        h_client: 0xc1d0_0001,
        ..zerocopy::FromZeros::new_zeroed()
    };
    mem.put(BASE, r.as_bytes());
    let o = p.uvm(&mem, &drv, uvm::REGISTER_GPU, BASE);
    assert_eq!(o.record, Record::Forwarded("UVM_REGISTER_GPU", None));
    let sent = UvmRegisterGpu::read_from_bytes(&drv.calls.borrow()[2].params)
        .expect("well-formed test data");
    assert_eq!((sent.rm_ctrl_fd, sent.h_client), (108, 0xc1d0_0001));
    assert_eq!(
        UvmRegisterGpu::read_from_bytes(&mem.get(BASE, 40))
            .expect("well-formed test data")
            .rm_ctrl_fd,
        8
    );
}

#[test]
fn allocation_classes_are_checked_and_their_parameters_translated() {
    let mem = Mem::new();
    let alloc = |class: u32, size: u32| {
        let a = RmAllocWithRights {
            h_root: 0xc1d0_0001,
            h_object_parent: 0xc1d0_0001,
            h_class: class,
            p_alloc_parms: BASE + 0x100,
            params_size: size,
            ..zerocopy::FromZeros::new_zeroed()
        };
        mem.put(BASE, a.as_bytes());
    };
    let read =
        || RmAllocWithRights::read_from_bytes(&mem.get(BASE, 48)).expect("well-formed test data");
    let req = frontend_request(esc::RM_ALLOC, 48);
    let (drv, p) = (FakeDriver::default(), proxy(Caps::DEFAULT));
    // NV01_DEVICE_0 with its 56-byte NV0080_ALLOC_PARAMETERS.
    mem.put(BASE + 0x100, &[0x5au8; 56]);
    alloc(0x80, 56);
    assert_eq!(p.frontend(&mem, &drv, req, BASE).ret, Ok(0));
    assert_eq!(drv.seen_inner.borrow()[0], vec![0x5a; 56]);
    let back = read();
    assert_eq!(
        (back.h_object_new, back.p_alloc_parms),
        (0xcafe_0001, BASE + 0x100)
    );
    // An unknown class, and a graphics class without the capability.
    alloc(0x1234, 8);
    assert_eq!(p.frontend(&mem, &drv, req, BASE).ret, Ok(0));
    assert_eq!(read().status, status::INVALID_CLASS);
    alloc(0xc697, 16); // AMPERE_A
    assert_eq!(p.frontend(&mem, &drv, req, BASE).ret, Ok(0));
    assert_eq!(read().status, status::INSUFFICIENT_PERMISSIONS);
    assert_eq!(drv.calls.borrow().len(), 1);
    // With graphics granted it goes through.
    let (drv, p) = (FakeDriver::default(), proxy(Caps::all()));
    alloc(0xc697, 16);
    assert_eq!(p.frontend(&mem, &drv, req, BASE).ret, Ok(0));
    assert_eq!(drv.calls.borrow().len(), 1);
}

proptest::proptest! {
    /// Any request with any parameters gets an answer, never a panic, and
    /// a request the table does not know never reaches the driver.
    #[test]
    fn any_request_is_answered_and_unknown_ones_stay_home(
        request in proptest::prelude::any::<u32>(),
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
        off in 0u64..0x200,
    ) {
        let (mem, drv, p) = (Mem::new(), FakeDriver::default(), proxy(Caps::DEFAULT));
        mem.put(BASE + off, &bytes);
        let _ = p.frontend(&mem, &drv, request, BASE + off);
        let known = nvproxy::abi::split_frontend_request(request)
            .is_some_and(|(nr, _)| p.abi.frontend.contains_key(&nr));
        proptest::prop_assert!(known || drv.calls.borrow().is_empty());
        let _ = p.uvm(&mem, &drv, request, BASE + off);
    }
}

#[test]
fn records_read_as_one_line_each() {
    let f = Record::Forwarded(
        "NV_ESC_RM_CONTROL",
        Some("NV2080_CTRL_CMD_GPU_GET_NAME_STRING"),
    );
    assert_eq!(
        f.to_string(),
        "forwarded NV_ESC_RM_CONTROL NV2080_CTRL_CMD_GPU_GET_NAME_STRING"
    );
    let r = Record::Refused("control 0x2080dead".into(), "not in the table");
    assert_eq!(
        r.to_string(),
        "refused control 0x2080dead: not in the table"
    );
}

#[test]
fn calls_that_would_aim_the_driver_at_proxy_memory_are_refused() {
    use nvproxy::abi::RmAllocMemoryWithFd;
    let (mem, drv, p) = (Mem::new(), FakeDriver::default(), proxy(Caps::all()));
    // NV01_MEMORY_SYSTEM_OS_DESCRIPTOR pins the caller's pages at pMemory:
    // the caller is the proxy, so a guest could name the proxy's memory.
    let req = frontend_request(esc::RM_ALLOC_MEMORY, 56);
    let a = RmAllocMemoryWithFd {
        h_class: 0x71,
        p_memory: 0x5555_0000,
        limit: 0xfff,
        fd: 7,
        ..zerocopy::FromZeros::new_zeroed()
    };
    mem.put(BASE, a.as_bytes());
    assert_eq!(p.frontend(&mem, &drv, req, BASE).ret, Err(Errno::EINVAL));
    // NV_ESC_RM_VID_HEAP_CONTROL (NVOS32) carries such addresses too.
    let vid_heap = frontend_request(esc::RM_VID_HEAP_CONTROL, 184);
    assert_eq!(
        p.frontend(&mem, &drv, vid_heap, BASE).ret,
        Err(Errno::EINVAL)
    );
    assert!(drv.calls.borrow().is_empty());
    // NV01_MEMORY_SYSTEM goes through, its descriptor translated.
    mem.put(BASE, RmAllocMemoryWithFd { h_class: 0x3e, ..a }.as_bytes());
    assert_eq!(p.frontend(&mem, &drv, req, BASE).ret, Ok(0));
    let sent = RmAllocMemoryWithFd::read_from_bytes(&drv.calls.borrow()[0].params)
        .expect("well-formed test data");
    assert_eq!(sent.fd, 107);
}

#[test]
fn an_os_event_carries_a_descriptor_and_no_other_event_passes() {
    let (mem, drv, p) = (Mem::new(), FakeDriver::default(), proxy(Caps::DEFAULT));
    let req = frontend_request(esc::RM_ALLOC, 48);
    let event = |class: u32, data: u64| {
        // NV0005_ALLOC_PARAMETERS: hParentClient, hSrcResource, hClass, notifyIndex, data.
        let params = [
            0xc1d0_0001u32.to_ne_bytes(),
            0x5c00_0001u32.to_ne_bytes(),
            class.to_ne_bytes(),
            1u32.to_ne_bytes(),
        ]
        .concat();
        mem.put(
            BASE + 0x100,
            &[params, data.to_ne_bytes().to_vec()].concat(),
        );
        let a = RmAllocWithRights {
            h_root: 0xc1d0_0001,
            h_class: 0x05, // NV01_EVENT: RM takes the class from the parameters
            p_alloc_parms: BASE + 0x100,
            params_size: 24,
            ..zerocopy::FromZeros::new_zeroed()
        };
        mem.put(BASE, a.as_bytes());
    };
    event(0x79, 7);
    assert_eq!(p.frontend(&mem, &drv, req, BASE).ret, Ok(0));
    let seen = drv.seen_inner.borrow()[0].clone();
    assert_eq!(
        seen[16..24],
        107u64.to_ne_bytes(),
        "the host descriptor, 64 bits"
    );
    assert_eq!(
        mem.get(BASE + 0x110, 8),
        7u64.to_ne_bytes(),
        "the guest's own again"
    );
    // NV01_EVENT_KERNEL_CALLBACK_EX (0x7e): its data is a kernel function.
    event(0x7e, 0xffff_ffff_8100_0000);
    assert_eq!(p.frontend(&mem, &drv, req, BASE).ret, Ok(0));
    let back =
        RmAllocWithRights::read_from_bytes(&mem.get(BASE, 48)).expect("well-formed test data");
    assert_eq!(back.status, status::INVALID_CLASS);
    assert_eq!(drv.calls.borrow().len(), 1);
}

#[test]
fn uvm_never_ties_its_va_space_to_the_proxys_memory() {
    use nvproxy::abi::UvmInitialize;
    let (mem, drv, p) = (Mem::new(), FakeDriver::default(), proxy(Caps::DEFAULT));
    let init = UvmInitialize {
        flags: 0,
        ..zerocopy::FromZeros::new_zeroed()
    };
    mem.put(BASE, init.as_bytes());
    assert_eq!(p.uvm(&mem, &drv, uvm::INITIALIZE, BASE).ret, Ok(0));
    // The driver got DISABLE_HMM | MULTI_PROCESS_SHARING_MODE (uvm_types.h)...
    let sent = UvmInitialize::read_from_bytes(&drv.calls.borrow()[0].params)
        .expect("well-formed test data");
    assert_eq!(sent.flags, 0x3);
    // ...and the guest sees the flags it asked for.
    assert_eq!(
        UvmInitialize::read_from_bytes(&mem.get(BASE, 16))
            .expect("well-formed test data")
            .flags,
        0
    );
}

#[test]
fn a_control_that_exports_an_object_gets_the_host_descriptor() {
    let (mem, drv, p) = (Mem::new(), FakeDriver::default(), proxy(Caps::DEFAULT));
    // NV0000_CTRL_OS_UNIX_EXPORT_OBJECT_TO_FD_PARAMS: the object (16 bytes), fd, flags.
    let mut params = vec![0u8; 24];
    params[16..20].copy_from_slice(&8i32.to_ne_bytes());
    mem.put(BASE + 0x100, &params);
    let arg = control(&mem, 0x3d05, BASE + 0x100, 24);
    assert_eq!(p.frontend(&mem, &drv, RM_CONTROL, arg).ret, Ok(0));
    assert_eq!(drv.seen_inner.borrow()[0][16..20], 108i32.to_ne_bytes());
    assert_eq!(mem.get(BASE + 0x110, 4), 8i32.to_ne_bytes());
}
