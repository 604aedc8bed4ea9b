//! The NVIDIA device files of a sandbox given a GPU (nvproxy): each open is
//! a fresh host descriptor from the device opener, each ioctl goes through
//! the running driver's table (`nvproxy`), and every call the proxy makes
//! to the host is an `ioctl` the host filter names.

use std::collections::HashSet;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use abi::Errno;

use crate::host;
use crate::kernel::task::Task;
use crate::vfs::file::{Caller, FileDescription, FileImpl};
use crate::vfs::NvDevice;

/// The GPU of a sandbox: the proxy, the opener and the recorder.
pub struct Gpu {
    proxy: nvproxy::Proxy,
    opener: gofer::devices::DeviceOpener,
    devices: Vec<NvDevice>,
    log: Option<Mutex<std::fs::File>>,
    /// refusals already reported (each is logged once by name)
    refused: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("devices", &self.devices)
            .finish_non_exhaustive()
    }
}

impl Gpu {
    /// A GPU with `devices` under `/dev`, opened through `opener`.
    pub fn new(
        proxy: nvproxy::Proxy,
        opener: gofer::devices::DeviceOpener,
        devices: Vec<NvDevice>,
        log: Option<std::fs::File>,
    ) -> Gpu {
        Gpu {
            proxy,
            opener,
            devices,
            log: log.map(Mutex::new),
            refused: Mutex::new(HashSet::new()),
        }
    }

    /// The devices `/dev` shows.
    pub fn devices(&self) -> Vec<NvDevice> {
        self.devices.clone()
    }

    /// The exact host ioctl requests the proxy makes.
    pub fn host_requests(&self) -> Vec<u32> {
        self.proxy.abi.host_requests()
    }

    /// `open(2)` of `dev`: a fresh host descriptor, ENOENT if the host has
    /// none.
    pub fn open(self: &Arc<Self>, dev: NvDevice) -> Result<Arc<NvFile>, Errno> {
        if !self.devices.contains(&dev) {
            return Err(Errno::ENOENT);
        }
        let host = self.opener.open(&dev.name())?;
        Ok(Arc::new(NvFile {
            dev,
            host,
            gpu: self.clone(),
        }))
    }

    fn record(&self, r: &nvproxy::Record) {
        if let Some(log) = &self.log {
            let mut f = log.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(f, "{r}");
        }
        if let nvproxy::Record::Refused(what, why) = r {
            let first = self
                .refused
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(what.clone());
            if first {
                tracing::warn!("nvproxy refused {what}: {why}");
            }
        }
    }
}

/// An open NVIDIA device.
pub struct NvFile {
    dev: NvDevice,
    host: OwnedFd,
    gpu: Arc<Gpu>,
}

impl std::fmt::Debug for NvFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvFile")
            .field("dev", &self.dev)
            .finish_non_exhaustive()
    }
}

/// Bytes past a UVM request's parameters that the driver may write into
/// harmlessly (see [`HostDriver`]'s `ioctl`).
const SLACK: usize = 4096;

/// The guest's memory, as the proxy reads and writes it.
struct TaskMemory<'a>(&'a Task);

impl nvproxy::GuestMemory for TaskMemory<'_> {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), Errno> {
        self.0.mm().copy_in(addr, out)
    }
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), Errno> {
        self.0.mm().copy_out(addr, data)
    }
}

/// The host driver behind one open file, and the guest's other NVIDIA
/// descriptors.
struct HostDriver<'a> {
    task: &'a Task,
    file: &'a NvFile,
}

impl nvproxy::Driver for HostDriver<'_> {
    fn ioctl(&self, request: u32, params: &mut [u8]) -> Result<i32, Errno> {
        // A frontend request carries its size and the driver copies that
        // much; a UVM request's size is the table's alone: should the
        // driver's structure be larger, it writes into this slack, never
        // past the Sentry's buffer.
        if self.file.dev != NvDevice::Uvm {
            return host::nv_ioctl(self.file.host.as_fd(), request, params);
        }
        let mut padded = vec![0u8; params.len() + SLACK];
        padded[..params.len()].copy_from_slice(params);
        let r = host::nv_ioctl(self.file.host.as_fd(), request, &mut padded);
        let len = params.len();
        params.copy_from_slice(&padded[..len]);
        r
    }
    fn host_fd(&self, guest_fd: i32) -> Option<i32> {
        let file = self.task.fds().file(i64::from(guest_fd)).ok()?;
        let nv = file.downcast::<NvFile>()?;
        Some(nv.host.as_raw_fd())
    }
}

impl NvFile {
    /// `ioctl(2)`: through the table, or answered as the driver answers
    /// what it does not know.
    pub fn ioctl(&self, task: &Task, cmd: u32, arg: u64) -> Result<u64, Errno> {
        let (mem, drv) = (TaskMemory(task), HostDriver { task, file: self });
        let out = match self.dev {
            NvDevice::Uvm => self.gpu.proxy.uvm(&mem, &drv, cmd, arg),
            _ => self.gpu.proxy.frontend(&mem, &drv, cmd, arg),
        };
        self.gpu.record(&out.record);
        out.ret
    }
}

impl NvFile {
    /// `mmap(2)` of device or UVM memory: not there yet (the platforms map
    /// only the memory file), so it is refused with `ENODEV`, recorded so
    /// that a workload's first mapping is one line to find.
    pub fn refuse_mmap(&self, offset: u64, len: u64) -> Errno {
        let what = format!(
            "mmap of /dev/{} ({len:#x} bytes at offset {offset:#x})",
            self.dev.name()
        );
        self.gpu.record(&nvproxy::Record::Refused(
            what,
            "device mappings are not implemented yet",
        ));
        Errno::ENODEV
    }
}

impl FileImpl for NvFile {
    fn poll(&self, _caller: &dyn Caller, events: i16, _depth: u32) -> i16 {
        host::poll_events(self.host.as_fd(), events)
    }

    /// The driver's events (`NV_ESC_ALLOC_OS_EVENT`) come with no
    /// notification the Sentry hears of: a waiter looks again now and then.
    fn wait_queues(&self, _out: &mut Vec<crate::kernel::wait::WaitQueue>, _depth: u32) -> bool {
        true
    }

    fn stat(&self, file: &FileDescription) -> Result<abi::Stat, Errno> {
        file.location.as_ref().ok_or(Errno::EBADF)?.node().stat()
    }
}
