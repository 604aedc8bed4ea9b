//! What the proxy lets through: per driver version, the frontend escapes,
//! UVM requests, RM control commands and RM allocation classes, each with
//! how its parameters travel and the capability it belongs to. A version is
//! its parent's table plus a short delta (see [`RELEASES`]).

use std::collections::BTreeMap;
use std::fmt;

use bitflags::bitflags;

use crate::abi::{esc, uvm, OsEvent, RegisterFd, UvmMmInitialize, UvmRegisterGpu};

bitflags! {
    /// The NVIDIA container toolkit's driver capabilities
    /// (`NVIDIA_DRIVER_CAPABILITIES`): a command needs one of its tags.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Caps: u8 {
        /// CUDA and OpenCL
        const COMPUTE = 1;
        /// `nvidia-smi` and NVML
        const UTILITY = 2;
        /// OpenGL and Vulkan
        const GRAPHICS = 4;
        /// NVENC / NVDEC
        const VIDEO = 8;
    }
}

impl Caps {
    /// What a sandbox gets when it does not say: compute and utility.
    pub const DEFAULT: Caps = Caps::COMPUTE.union(Caps::UTILITY);
    const NAMES: [(&'static str, Caps); 4] = [
        ("compute", Caps::COMPUTE),
        ("utility", Caps::UTILITY),
        ("graphics", Caps::GRAPHICS),
        ("video", Caps::VIDEO),
    ];

    /// Parses `compute,utility` (and `all`).
    pub fn parse(s: &str) -> Result<Caps, String> {
        let mut caps = Caps::empty();
        for word in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            if word == "all" {
                caps |= Caps::all();
                continue;
            }
            caps |= Caps::NAMES
                .iter()
                .find(|(n, _)| *n == word)
                .map(|&(_, c)| c)
                .ok_or_else(|| {
                    format!("unknown GPU capability {word:?}: use compute, utility, graphics, video or all")
                })?;
        }
        if caps.is_empty() {
            return Err(
                "no GPU capability given: use compute, utility, graphics, video or all".into(),
            );
        }
        Ok(caps)
    }
}

impl fmt::Display for Caps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Caps::NAMES
            .iter()
            .filter(|(_, c)| self.contains(*c))
            .map(|(n, _)| *n)
            .collect();
        f.write_str(&names.join(","))
    }
}

/// How big a request's parameters may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// exactly this many bytes
    Exact(usize),
    /// one of these sizes (`NV_ESC_RM_ALLOC`: `NVOS21` or `NVOS64`)
    OneOf(&'static [usize]),
    /// a whole number of `unit`-byte elements, at least one, at most `max` bytes
    Array { unit: usize, max: usize },
}

impl Size {
    /// Whether `n` bytes fit.
    pub fn allows(self, n: usize) -> bool {
        match self {
            Size::Exact(s) => n == s,
            Size::OneOf(v) => v.contains(&n),
            Size::Array { unit, max } => n != 0 && n.is_multiple_of(unit) && n <= max,
        }
    }
}

/// An array behind a pointer field of a control command's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct List {
    /// offset of the `NvP64` pointer
    pub ptr: usize,
    /// offset of the `NvU32` element count
    pub count: usize,
    /// bytes per element
    pub elem: usize,
    /// the most elements the driver accepts
    pub max: u32,
}

/// How an entry's parameters cross from the guest to the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Params {
    /// copied in and back out as they are
    Copy,
    /// copied, and the `i32` descriptors at these offsets are the guest's:
    /// each becomes the host descriptor of the same NVIDIA file
    Fds(&'static [usize]),
    /// copied, and each of these arrays behind pointers copied too
    Lists(&'static [List]),
    /// `NV_ESC_RM_CONTROL`: the command is looked up in the control table
    Control,
    /// `NV_ESC_RM_ALLOC`: the class is looked up in the class table
    Alloc,
    /// `NV_ESC_RM_ALLOC_MEMORY`: only the classes whose `pMemory` the
    /// driver does not read as an address of the caller's (not
    /// `NV01_MEMORY_SYSTEM_OS_DESCRIPTOR`, which pins the caller's pages:
    /// those would be the Sentry's), the descriptor translated
    AllocMemory(&'static [u32]),
    /// `NV01_EVENT` and `NV01_EVENT_OS_EVENT` (`NV0005_ALLOC_PARAMETERS`):
    /// RM allocates the class the parameters' `hClass` names, and only the
    /// OS event passes, whose 64-bit `data` is an NVIDIA descriptor
    OsEvent,
    /// `UVM_INITIALIZE`: the VA space is made one of no process's
    /// (`UVM_INIT_FLAGS_MULTI_PROCESS_SHARING_MODE`) and without HMM
    /// (`UVM_INIT_FLAGS_DISABLE_HMM`), whatever the guest asked: the
    /// process that makes the call is the Sentry, and with HMM the GPU
    /// would fault its pages in
    UvmInitialize,
}

/// One allowed command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// the name in NVIDIA's headers
    pub name: &'static str,
    /// its parameters' size
    pub size: Size,
    /// how they travel
    pub params: Params,
    /// the capabilities that allow it (any one will do)
    pub caps: Caps,
}

/// The table of one driver version.
#[derive(Clone, Debug, Default)]
pub struct Abi {
    /// by `_IOC_NR`
    pub frontend: BTreeMap<u32, Entry>,
    /// by request number
    pub uvm: BTreeMap<u32, Entry>,
    /// by command (class in the top 16 bits)
    pub control: BTreeMap<u32, Entry>,
    /// by class
    pub alloc: BTreeMap<u32, Entry>,
}

impl Abi {
    /// Every ioctl request number the Sentry may pass to the host for this
    /// table, sorted: the host filter allows exactly these (with a GPU).
    /// Each frontend escape is `_IOWR('F', nr, size)` for each size it
    /// accepts; UVM requests are their own numbers.
    pub fn host_requests(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.uvm.keys().copied().collect();
        for (&nr, e) in &self.frontend {
            match e.size {
                Size::Exact(n) => v.push(crate::abi::frontend_request(nr, n)),
                Size::OneOf(sizes) => {
                    v.extend(sizes.iter().map(|&n| crate::abi::frontend_request(nr, n)))
                }
                Size::Array { unit, max } => v.extend(
                    (unit..=max)
                        .step_by(unit)
                        .map(|n| crate::abi::frontend_request(nr, n)),
                ),
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    }
}

const CU: Caps = Caps::DEFAULT;
const ALL: Caps = Caps::all();

fn entry(name: &'static str, size: Size, params: Params, caps: Caps) -> Entry {
    Entry {
        name,
        size,
        params,
        caps,
    }
}

/// Offsets of the descriptor fields, with the structure they are in.
const REGISTER_FD_FDS: &[usize] = &[core::mem::offset_of!(RegisterFd, ctl_fd)];
const OS_EVENT_FDS: &[usize] = &[core::mem::offset_of!(OsEvent, fd)];
const MAP_MEMORY_FDS: &[usize] = &[core::mem::offset_of!(crate::abi::RmMapMemoryWithFd, fd)];
/// The descriptor of `NV_ESC_RM_ALLOC_MEMORY`.
pub const ALLOC_MEMORY_FDS: &[usize] =
    &[core::mem::offset_of!(crate::abi::RmAllocMemoryWithFd, fd)];
/// `NV01_MEMORY_SYSTEM`, `NV01_MEMORY_LOCAL_PRIVILEGED`, `NV01_MEMORY_LOCAL_USER`.
/// (`NV_ESC_RM_VID_HEAP_CONTROL` is left out for the same reason: most of
/// its functions carry addresses of the caller's.)
const ALLOC_MEMORY_CLASSES: &[u32] = &[0x3e, 0x3f, 0x40];
const UVM_REGISTER_GPU_FDS: &[usize] = &[core::mem::offset_of!(UvmRegisterGpu, rm_ctrl_fd)];
const UVM_MM_INITIALIZE_FDS: &[usize] = &[core::mem::offset_of!(UvmMmInitialize, uvm_fd)];
/// `rmCtrlFd` of `UVM_REGISTER_GPU_VASPACE_PARAMS` and
/// `UVM_REGISTER_CHANNEL_PARAMS` (after a 16-byte GPU UUID).
const UVM_RM_CTRL_FD_AFTER_UUID: &[usize] = &[16];
/// `rmCtrlFd` of `UVM_MAP_EXTERNAL_ALLOCATION_PARAMS` (after 256 per-GPU
/// attributes).
const UVM_MAP_EXTERNAL_FDS: &[usize] = &[9248];

/// The 580 line's first table (580.65.06).
fn base_580(abi: &mut Abi) {
    use Params::*;
    use Size::*;
    let ex = |n| Exact(n);
    for (nr, name, size, params, caps) in [
        (
            esc::CARD_INFO,
            "NV_ESC_CARD_INFO",
            Array {
                unit: 72,
                max: 72 * 32,
            },
            Copy,
            ALL,
        ),
        (
            esc::REGISTER_FD,
            "NV_ESC_REGISTER_FD",
            ex(4),
            Fds(REGISTER_FD_FDS),
            ALL,
        ),
        (
            esc::ALLOC_OS_EVENT,
            "NV_ESC_ALLOC_OS_EVENT",
            ex(16),
            Fds(OS_EVENT_FDS),
            ALL,
        ),
        (
            esc::FREE_OS_EVENT,
            "NV_ESC_FREE_OS_EVENT",
            ex(16),
            Fds(OS_EVENT_FDS),
            ALL,
        ),
        (
            esc::CHECK_VERSION_STR,
            "NV_ESC_CHECK_VERSION_STR",
            ex(72),
            Copy,
            ALL,
        ),
        (
            esc::ATTACH_GPUS_TO_FD,
            "NV_ESC_ATTACH_GPUS_TO_FD",
            Array {
                unit: 4,
                max: 4 * 32,
            },
            Copy,
            ALL,
        ),
        (esc::SYS_PARAMS, "NV_ESC_SYS_PARAMS", ex(8), Copy, ALL),
        (
            esc::WAIT_OPEN_COMPLETE,
            "NV_ESC_WAIT_OPEN_COMPLETE",
            ex(8),
            Copy,
            ALL,
        ),
        (
            esc::RM_ALLOC_MEMORY,
            "NV_ESC_RM_ALLOC_MEMORY",
            ex(56),
            AllocMemory(ALLOC_MEMORY_CLASSES),
            ALL,
        ),
        (esc::RM_FREE, "NV_ESC_RM_FREE", ex(16), Copy, ALL),
        (esc::RM_CONTROL, "NV_ESC_RM_CONTROL", ex(32), Control, ALL),
        (
            esc::RM_ALLOC,
            "NV_ESC_RM_ALLOC",
            OneOf(&[32, 48]),
            Alloc,
            ALL,
        ),
        (
            esc::RM_DUP_OBJECT,
            "NV_ESC_RM_DUP_OBJECT",
            ex(28),
            Copy,
            ALL,
        ),
        (esc::RM_SHARE, "NV_ESC_RM_SHARE", ex(24), Copy, ALL),
        (
            esc::RM_MAP_MEMORY,
            "NV_ESC_RM_MAP_MEMORY",
            ex(56),
            Fds(MAP_MEMORY_FDS),
            ALL,
        ),
        (
            esc::RM_UNMAP_MEMORY,
            "NV_ESC_RM_UNMAP_MEMORY",
            ex(32),
            Copy,
            ALL,
        ),
        (
            esc::RM_ALLOC_CONTEXT_DMA2,
            "NV_ESC_RM_ALLOC_CONTEXT_DMA2",
            ex(56),
            Copy,
            ALL,
        ),
        (
            esc::RM_MAP_MEMORY_DMA,
            "NV_ESC_RM_MAP_MEMORY_DMA",
            ex(64),
            Copy,
            ALL,
        ),
        (
            esc::RM_UNMAP_MEMORY_DMA,
            "NV_ESC_RM_UNMAP_MEMORY_DMA",
            ex(48),
            Copy,
            ALL,
        ),
        (
            esc::RM_BIND_CONTEXT_DMA,
            "NV_ESC_RM_BIND_CONTEXT_DMA",
            ex(16),
            Copy,
            ALL,
        ),
        (
            esc::RM_UPDATE_DEVICE_MAPPING_INFO,
            "NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO",
            ex(40),
            Copy,
            ALL,
        ),
    ] {
        abi.frontend.insert(nr, entry(name, size, params, caps));
    }
    for (nr, name, size, params) in [
        (uvm::INITIALIZE, "UVM_INITIALIZE", 16, UvmInitialize),
        (uvm::DEINITIALIZE, "UVM_DEINITIALIZE", 0, Copy),
        (uvm::CREATE_RANGE_GROUP, "UVM_CREATE_RANGE_GROUP", 16, Copy),
        (
            uvm::DESTROY_RANGE_GROUP,
            "UVM_DESTROY_RANGE_GROUP",
            16,
            Copy,
        ),
        (
            uvm::REGISTER_GPU_VASPACE,
            "UVM_REGISTER_GPU_VASPACE",
            32,
            Fds(UVM_RM_CTRL_FD_AFTER_UUID),
        ),
        (
            uvm::UNREGISTER_GPU_VASPACE,
            "UVM_UNREGISTER_GPU_VASPACE",
            20,
            Copy,
        ),
        (
            uvm::REGISTER_CHANNEL,
            "UVM_REGISTER_CHANNEL",
            56,
            Fds(UVM_RM_CTRL_FD_AFTER_UUID),
        ),
        (uvm::UNREGISTER_CHANNEL, "UVM_UNREGISTER_CHANNEL", 28, Copy),
        (uvm::ENABLE_PEER_ACCESS, "UVM_ENABLE_PEER_ACCESS", 36, Copy),
        (
            uvm::DISABLE_PEER_ACCESS,
            "UVM_DISABLE_PEER_ACCESS",
            36,
            Copy,
        ),
        (uvm::SET_RANGE_GROUP, "UVM_SET_RANGE_GROUP", 32, Copy),
        (
            uvm::MAP_EXTERNAL_ALLOCATION,
            "UVM_MAP_EXTERNAL_ALLOCATION",
            9264,
            Fds(UVM_MAP_EXTERNAL_FDS),
        ),
        (uvm::FREE, "UVM_FREE", 24, Copy),
        (
            uvm::REGISTER_GPU,
            "UVM_REGISTER_GPU",
            40,
            Fds(UVM_REGISTER_GPU_FDS),
        ),
        (uvm::UNREGISTER_GPU, "UVM_UNREGISTER_GPU", 20, Copy),
        (uvm::PAGEABLE_MEM_ACCESS, "UVM_PAGEABLE_MEM_ACCESS", 8, Copy),
        (
            uvm::PREVENT_MIGRATION_RANGE_GROUPS,
            "UVM_PREVENT_MIGRATION_RANGE_GROUPS",
            272,
            Copy,
        ),
        (
            uvm::ALLOW_MIGRATION_RANGE_GROUPS,
            "UVM_ALLOW_MIGRATION_RANGE_GROUPS",
            272,
            Copy,
        ),
        (
            uvm::SET_PREFERRED_LOCATION,
            "UVM_SET_PREFERRED_LOCATION",
            40,
            Copy,
        ),
        (
            uvm::UNSET_PREFERRED_LOCATION,
            "UVM_UNSET_PREFERRED_LOCATION",
            24,
            Copy,
        ),
        (
            uvm::ENABLE_READ_DUPLICATION,
            "UVM_ENABLE_READ_DUPLICATION",
            24,
            Copy,
        ),
        (
            uvm::DISABLE_READ_DUPLICATION,
            "UVM_DISABLE_READ_DUPLICATION",
            24,
            Copy,
        ),
        (uvm::SET_ACCESSED_BY, "UVM_SET_ACCESSED_BY", 40, Copy),
        (uvm::UNSET_ACCESSED_BY, "UVM_UNSET_ACCESSED_BY", 40, Copy),
        (uvm::MIGRATE, "UVM_MIGRATE", 80, Copy),
        (
            uvm::MIGRATE_RANGE_GROUP,
            "UVM_MIGRATE_RANGE_GROUP",
            32,
            Copy,
        ),
        (
            uvm::ENABLE_SYSTEM_WIDE_ATOMICS,
            "UVM_ENABLE_SYSTEM_WIDE_ATOMICS",
            20,
            Copy,
        ),
        (
            uvm::DISABLE_SYSTEM_WIDE_ATOMICS,
            "UVM_DISABLE_SYSTEM_WIDE_ATOMICS",
            20,
            Copy,
        ),
        (
            uvm::MAP_DYNAMIC_PARALLELISM_REGION,
            "UVM_MAP_DYNAMIC_PARALLELISM_REGION",
            40,
            Copy,
        ),
        (uvm::UNMAP_EXTERNAL, "UVM_UNMAP_EXTERNAL", 40, Copy),
        (
            uvm::ALLOC_SEMAPHORE_POOL,
            "UVM_ALLOC_SEMAPHORE_POOL",
            9248,
            Copy,
        ),
        (
            uvm::PAGEABLE_MEM_ACCESS_ON_GPU,
            "UVM_PAGEABLE_MEM_ACCESS_ON_GPU",
            24,
            Copy,
        ),
        (uvm::VALIDATE_VA_RANGE, "UVM_VALIDATE_VA_RANGE", 24, Copy),
        (
            uvm::CREATE_EXTERNAL_RANGE,
            "UVM_CREATE_EXTERNAL_RANGE",
            24,
            Copy,
        ),
        (
            uvm::MAP_EXTERNAL_SPARSE,
            "UVM_MAP_EXTERNAL_SPARSE",
            40,
            Copy,
        ),
        (
            uvm::MM_INITIALIZE,
            "UVM_MM_INITIALIZE",
            8,
            Fds(UVM_MM_INITIALIZE_FDS),
        ),
    ] {
        abi.uvm.insert(nr, entry(name, Exact(size), params, CU));
    }
    for &(cmd, name, size, caps) in crate::rm::CONTROLS_580 {
        abi.control
            .insert(cmd, entry(name, Exact(size), Copy, caps));
    }
    for &(cmd, name, size, lists) in crate::rm::CONTROL_LISTS_580 {
        abi.control
            .insert(cmd, entry(name, Exact(size), Lists(lists), CU));
    }
    for &(cmd, name, size, fds) in crate::rm::CONTROL_FDS_580 {
        abi.control
            .insert(cmd, entry(name, Exact(size), Fds(fds), CU));
    }
    for &(class, name, size, caps) in crate::rm::CLASSES_580 {
        abi.alloc
            .insert(class, entry(name, Exact(size), Copy, caps));
    }
    // sizeof(NV0005_ALLOC_PARAMETERS) is 24 (cl0005.h).
    for (class, name) in [(0x05, "NV01_EVENT"), (0x79, "NV01_EVENT_OS_EVENT")] {
        abi.alloc
            .insert(class, entry(name, Exact(24), OsEvent, ALL));
    }
    // The generated rows are 580.105.08's; before 580.95.05 the encoder's
    // capability table (NV0080_CTRL_MSENC_CAPS_TBL_SIZE) was 4 bytes, not 5.
    set_control_size(abi, NV0080_CTRL_CMD_MSENC_GET_CAPS_V2, 8);
}

const NV0080_CTRL_CMD_MSENC_GET_CAPS_V2: u32 = 0x0080_1b02;

fn set_control_size(abi: &mut Abi, cmd: u32, size: usize) {
    if let Some(e) = abi.control.get_mut(&cmd) {
        e.size = Size::Exact(size);
    }
}

/// 580.95.05: NV0080_CTRL_MSENC_CAPS_TBL_SIZE grew from 4 to 5.
fn msenc_caps_tbl_5(abi: &mut Abi) {
    set_control_size(abi, NV0080_CTRL_CMD_MSENC_GET_CAPS_V2, 12);
}

/// A driver version, `major.minor.patch` (`580.105.08`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    /// Parses `580.105.08` (or `580.142`, whose patch is 0).
    pub fn parse(s: &str) -> Option<Version> {
        let mut it = s.trim().split('.');
        let num = |p: Option<&str>| -> Option<u32> {
            p.filter(|p| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()))?
                .parse()
                .ok()
        };
        let major = num(it.next())?;
        let minor = num(it.next())?;
        let patch = match it.next() {
            Some(p) => num(Some(p))?,
            None => 0,
        };
        it.next().is_none().then_some(Version {
            major,
            minor,
            patch,
        })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.patch == 0 {
            write!(f, "{}.{}", self.major, self.minor)
        } else {
            write!(f, "{}.{}.{:02}", self.major, self.minor, self.patch)
        }
    }
}

/// A supported release: its version, the release its table starts from
/// (none for the first of a line) and what it changes.
pub struct Release {
    pub version: &'static str,
    pub parent: Option<&'static str>,
    pub delta: fn(&mut Abi),
}

fn unchanged(_: &mut Abi) {}

/// Every supported driver version, oldest first. A new version is one row:
/// its parent and, where the driver's ABI moved, a delta function.
pub const RELEASES: &[Release] = &[
    Release {
        version: "580.65.06",
        parent: None,
        delta: base_580,
    },
    Release {
        version: "580.76.05",
        parent: Some("580.65.06"),
        delta: unchanged,
    },
    Release {
        version: "580.82.07",
        parent: Some("580.76.05"),
        delta: unchanged,
    },
    Release {
        version: "580.95.05",
        parent: Some("580.82.07"),
        delta: msenc_caps_tbl_5,
    },
    Release {
        version: "580.105.08",
        parent: Some("580.95.05"),
        delta: unchanged,
    },
    Release {
        version: "580.119.02",
        parent: Some("580.105.08"),
        delta: unchanged,
    },
    Release {
        version: "580.126.09",
        parent: Some("580.119.02"),
        delta: unchanged,
    },
    Release {
        version: "580.126.16",
        parent: Some("580.126.09"),
        delta: unchanged,
    },
    Release {
        version: "580.126.18",
        parent: Some("580.126.16"),
        delta: unchanged,
    },
    Release {
        version: "580.126.20",
        parent: Some("580.126.18"),
        delta: unchanged,
    },
    Release {
        version: "580.142",
        parent: Some("580.126.20"),
        delta: unchanged,
    },
    Release {
        version: "580.159.03",
        parent: Some("580.142"),
        delta: unchanged,
    },
    Release {
        version: "580.159.04",
        parent: Some("580.159.03"),
        delta: unchanged,
    },
];

/// The versions ferrovisor can proxy, oldest first.
pub fn supported() -> impl Iterator<Item = Version> {
    RELEASES.iter().filter_map(|r| Version::parse(r.version))
}

/// The table of driver version `v`, or `None` when it is not supported.
pub fn abi_for(v: Version) -> Option<Abi> {
    let release = RELEASES
        .iter()
        .find(|r| Version::parse(r.version) == Some(v))?;
    let mut chain = vec![release];
    while let Some(p) = chain.last().and_then(|r| r.parent) {
        chain.push(RELEASES.iter().find(|r| r.version == p)?);
    }
    let mut abi = Abi::default();
    for r in chain.iter().rev() {
        (r.delta)(&mut abi);
    }
    Some(abi)
}

/// Reads the version from `/proc/driver/nvidia/version`'s first line
/// (`NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.105.08  Release Build ...`).
pub fn version_from_proc(text: &str) -> Option<Version> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    line.split_whitespace().find_map(Version::parse)
}

/// The supported versions as one comma-separated line, for messages.
pub fn supported_list() -> String {
    supported()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The running driver's table, from the text of
/// `/proc/driver/nvidia/version` (`None`: the file is missing), or a
/// one-line message saying what is wrong and what to do.
pub fn host_abi(proc_version: Option<&str>) -> Result<(Version, Abi), String> {
    let text = proc_version.ok_or_else(|| {
        "no NVIDIA driver on this host (/proc/driver/nvidia/version is missing): load the nvidia kernel module first".to_string()
    })?;
    let v = version_from_proc(text).ok_or_else(|| {
        "cannot read the NVIDIA driver's version from /proc/driver/nvidia/version: expected a line 'NVRM version: ... 580.105.08 ...'".to_string()
    })?;
    let abi = abi_for(v).ok_or_else(|| {
        format!(
            "NVIDIA driver {v} is not supported by nvproxy; supported: {}",
            supported_list()
        )
    })?;
    Ok((v, abi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_release_builds_and_parents_come_first() {
        let mut seen = Vec::new();
        for r in RELEASES {
            if let Some(p) = r.parent {
                assert!(seen.contains(&p), "{}'s parent {p} comes later", r.version);
            }
            let v = Version::parse(r.version).expect("a listed version");
            assert_eq!(v.to_string(), r.version);
            assert!(abi_for(v).is_some());
            seen.push(r.version);
        }
        assert!(abi_for(Version::parse("570.86.15").expect("a listed version")).is_none());
    }

    #[test]
    fn a_delta_changes_only_its_version_and_later() {
        let size = |v: &str| {
            abi_for(Version::parse(v).expect("a listed version"))
                .expect("a listed version")
                .control[&NV0080_CTRL_CMD_MSENC_GET_CAPS_V2]
                .size
        };
        // sizeof(NV0080_CTRL_MSENC_GET_CAPS_V2_PARAMS) in each version's headers.
        assert_eq!(size("580.82.07"), Size::Exact(8));
        assert_eq!(size("580.95.05"), Size::Exact(12));
        assert_eq!(size("580.159.04"), Size::Exact(12));
    }

    #[test]
    fn control_ids_sit_in_the_class_their_name_says() {
        let abi = abi_for(Version::parse("580.105.08").expect("a listed version"))
            .expect("a listed version");
        assert!(abi.control.len() > 100, "{}", abi.control.len());
        for (&cmd, e) in &abi.control {
            // NV2080_CTRL_...: the class is in the name; NV_CONF_COMPUTE_CTRL_...
            // and the like are commands of a class the table allocates.
            match u32::from_str_radix(&e.name[2..6], 16) {
                Ok(class) if e.name.as_bytes()[6] == b'_' => {
                    assert_eq!(cmd >> 16, class, "{}", e.name)
                }
                _ => assert!(abi.alloc.contains_key(&(cmd >> 16)), "{}", e.name),
            }
        }
        // Spot values from the headers (ctrl2080gpu.h, ctrl0000system.h, cl0080.h).
        assert_eq!(
            abi.control[&0x2080_0110].name,
            "NV2080_CTRL_CMD_GPU_GET_NAME_STRING"
        );
        assert_eq!(abi.control[&0x2080_0110].size, Size::Exact(132));
        assert_eq!(abi.control[&0x0000_0101].size, Size::Exact(40));
        assert_eq!(abi.alloc[&0x80].name, "NV01_DEVICE_0");
        assert_eq!(abi.alloc[&0x80].size, Size::Exact(56));
        assert_eq!(abi.alloc[&0xcbc0].name, "HOPPER_COMPUTE_A");
        assert_eq!(abi.uvm[&75].name, "UVM_MM_INITIALIZE");
    }

    #[test]
    fn the_host_filter_gets_exactly_the_tables_requests() {
        let abi = abi_for(Version::parse("580.105.08").expect("a listed version"))
            .expect("a listed version");
        let r = abi.host_requests();
        // 18 fixed-size escapes, RM_ALLOC's two sizes, 32 card-info and
        // 32 attach sizes, 36 UVM requests.
        assert_eq!(r.len(), 18 + 2 + 32 + 32 + 36);
        for want in [
            0xc020_462a,
            0xc030_462b,
            0xc020_462b,
            0xc048_46c8,
            0xc004_46c9,
            0x3000_0001,
            75,
        ] {
            assert!(r.binary_search(&want).is_ok(), "{want:#x}");
        }
        // Not the wrong size of a known escape, nor an unknown one.
        assert!(r.binary_search(&0xc018_462a).is_err());
        assert!(r
            .binary_search(&crate::abi::frontend_request(0x99, 16))
            .is_err());
    }

    #[test]
    fn versions_parse_strictly() {
        assert_eq!(
            Version::parse("580.105.08"),
            Some(Version {
                major: 580,
                minor: 105,
                patch: 8
            })
        );
        assert_eq!(Version::parse("580.142").map(|v| v.patch), Some(0));
        for bad in [
            "",
            "580",
            "580.",
            "580.1.2.3",
            "a.b.c",
            "580.-1.2",
            "58000000.1",
        ] {
            assert_eq!(Version::parse(bad), None, "{bad:?}");
        }
        let proc = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.03  Release Build  (dvs-builder@U22-I3-AE18-23-3)  Thu Oct 16 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
        assert_eq!(
            version_from_proc(proc)
                .expect("a listed version")
                .to_string(),
            "580.159.03"
        );
        assert_eq!(version_from_proc("GCC version: 12.2.0\n"), None);
    }

    #[test]
    fn the_host_driver_is_named_when_refused() {
        let e = host_abi(None).expect_err("refused");
        assert!(e.contains("no NVIDIA driver"), "{e}");
        let e = host_abi(Some(
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Tue Feb 13 2024\n",
        ))
        .expect_err("refused");
        assert!(
            e.starts_with("NVIDIA driver 550.54.14 is not supported"),
            "{e}"
        );
        assert!(e.contains("580.105.08"), "{e}");
        assert!(host_abi(Some("garbage"))
            .expect_err("refused")
            .contains("cannot read"));
        let (v, abi) = host_abi(Some(
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build\n",
        ))
        .expect("a listed version");
        assert_eq!(v.to_string(), "580.159.04");
        assert!(abi.frontend.contains_key(&esc::RM_CONTROL));
    }

    #[test]
    fn capabilities_parse() {
        assert_eq!(
            Caps::parse("compute,utility").expect("a listed version"),
            Caps::DEFAULT
        );
        assert_eq!(Caps::parse("all").expect("a listed version"), Caps::all());
        assert_eq!(Caps::DEFAULT.to_string(), "compute,utility");
        assert!(Caps::parse("compute,display")
            .expect_err("refused")
            .contains("\"display\""));
        assert!(Caps::parse("").is_err());
    }
}
