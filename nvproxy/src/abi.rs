//! The NVIDIA driver's ioctl ABI as data: request numbers, the escape codes
//! of the control device, RM status codes and the `#[repr(C)]` parameter
//! structures, laid out as in NVIDIA's open kernel modules (580.x).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// `'F'`: the magic of every frontend ioctl (`nv-ioctl-numbers.h`).
pub const NV_IOCTL_MAGIC: u32 = b'F' as u32;
/// Escapes numbered from here are the driver's own; those below are RM's.
pub const NV_IOCTL_BASE: u32 = 200;

/// The frontend escape numbers (`_IOC_NR` of a request on `/dev/nvidia*`).
pub mod esc {
    use super::NV_IOCTL_BASE as B;
    pub const CARD_INFO: u32 = B;
    pub const REGISTER_FD: u32 = B + 1;
    pub const ALLOC_OS_EVENT: u32 = B + 6;
    pub const FREE_OS_EVENT: u32 = B + 7;
    pub const STATUS_CODE: u32 = B + 9;
    pub const CHECK_VERSION_STR: u32 = B + 10;
    pub const IOCTL_XFER_CMD: u32 = B + 11;
    pub const ATTACH_GPUS_TO_FD: u32 = B + 12;
    pub const QUERY_DEVICE_INTR: u32 = B + 13;
    pub const SYS_PARAMS: u32 = B + 14;
    pub const EXPORT_TO_DMABUF_FD: u32 = B + 17;
    pub const WAIT_OPEN_COMPLETE: u32 = B + 18;

    pub const RM_ALLOC_MEMORY: u32 = 0x27;
    pub const RM_FREE: u32 = 0x29;
    pub const RM_CONTROL: u32 = 0x2a;
    pub const RM_ALLOC: u32 = 0x2b;
    pub const RM_DUP_OBJECT: u32 = 0x34;
    pub const RM_SHARE: u32 = 0x35;
    pub const RM_VID_HEAP_CONTROL: u32 = 0x4a;
    pub const RM_MAP_MEMORY: u32 = 0x4e;
    pub const RM_UNMAP_MEMORY: u32 = 0x4f;
    pub const RM_ALLOC_CONTEXT_DMA2: u32 = 0x54;
    pub const RM_MAP_MEMORY_DMA: u32 = 0x57;
    pub const RM_UNMAP_MEMORY_DMA: u32 = 0x58;
    pub const RM_BIND_CONTEXT_DMA: u32 = 0x59;
    pub const RM_EXPORT_OBJECT_TO_FD: u32 = 0x5c;
    pub const RM_IMPORT_OBJECT_FROM_FD: u32 = 0x5d;
    pub const RM_UPDATE_DEVICE_MAPPING_INFO: u32 = 0x5e;
}

/// The UVM requests on `/dev/nvidia-uvm`: plain numbers, not `_IOC`
/// encodings, so the size of each one's parameters is the table's to know
/// (`uvm_ioctl.h`, `uvm_linux_ioctl.h`).
pub mod uvm {
    pub const INITIALIZE: u32 = 0x3000_0001;
    pub const DEINITIALIZE: u32 = 0x3000_0002;
    pub const CREATE_RANGE_GROUP: u32 = 23;
    pub const DESTROY_RANGE_GROUP: u32 = 24;
    pub const REGISTER_GPU_VASPACE: u32 = 25;
    pub const UNREGISTER_GPU_VASPACE: u32 = 26;
    pub const REGISTER_CHANNEL: u32 = 27;
    pub const UNREGISTER_CHANNEL: u32 = 28;
    pub const ENABLE_PEER_ACCESS: u32 = 29;
    pub const DISABLE_PEER_ACCESS: u32 = 30;
    pub const SET_RANGE_GROUP: u32 = 31;
    pub const MAP_EXTERNAL_ALLOCATION: u32 = 33;
    pub const FREE: u32 = 34;
    pub const REGISTER_GPU: u32 = 37;
    pub const UNREGISTER_GPU: u32 = 38;
    pub const PAGEABLE_MEM_ACCESS: u32 = 39;
    pub const PREVENT_MIGRATION_RANGE_GROUPS: u32 = 40;
    pub const ALLOW_MIGRATION_RANGE_GROUPS: u32 = 41;
    pub const SET_PREFERRED_LOCATION: u32 = 42;
    pub const UNSET_PREFERRED_LOCATION: u32 = 43;
    pub const ENABLE_READ_DUPLICATION: u32 = 44;
    pub const DISABLE_READ_DUPLICATION: u32 = 45;
    pub const SET_ACCESSED_BY: u32 = 46;
    pub const UNSET_ACCESSED_BY: u32 = 47;
    pub const MIGRATE: u32 = 51;
    pub const MIGRATE_RANGE_GROUP: u32 = 53;
    pub const ENABLE_SYSTEM_WIDE_ATOMICS: u32 = 54;
    pub const DISABLE_SYSTEM_WIDE_ATOMICS: u32 = 55;
    pub const MAP_DYNAMIC_PARALLELISM_REGION: u32 = 65;
    pub const UNMAP_EXTERNAL: u32 = 66;
    pub const ALLOC_SEMAPHORE_POOL: u32 = 68;
    pub const CLEAN_UP_ZOMBIE_RESOURCES: u32 = 69;
    pub const PAGEABLE_MEM_ACCESS_ON_GPU: u32 = 70;
    pub const POPULATE_PAGEABLE: u32 = 71;
    pub const VALIDATE_VA_RANGE: u32 = 72;
    pub const CREATE_EXTERNAL_RANGE: u32 = 73;
    pub const MAP_EXTERNAL_SPARSE: u32 = 74;
    pub const MM_INITIALIZE: u32 = 75;
    pub const DISCARD: u32 = 80;
}

/// RM status codes (`nvstatuscodes.h`) the proxy itself answers with.
pub mod status {
    pub const OK: u32 = 0;
    pub const INSUFFICIENT_PERMISSIONS: u32 = 0x1b;
    pub const INVALID_ARGUMENT: u32 = 0x1f;
    pub const INVALID_CLASS: u32 = 0x22;
    pub const INVALID_POINTER: u32 = 0x3d;
    pub const NOT_SUPPORTED: u32 = 0x56;
}

const IOC_READ_WRITE: u32 = 3;

/// `_IOWR('F', nr, size)`: the request number of a frontend escape whose
/// parameters are `size` bytes.
pub const fn frontend_request(nr: u32, size: usize) -> u32 {
    (IOC_READ_WRITE << 30) | ((size as u32 & 0x3fff) << 16) | (NV_IOCTL_MAGIC << 8) | (nr & 0xff)
}

/// `_IOC_NR` and `_IOC_SIZE` of a frontend request, or `None` for one that
/// is not a read-write `'F'` request.
pub const fn split_frontend_request(request: u32) -> Option<(u32, usize)> {
    if request >> 30 != IOC_READ_WRITE || (request >> 8) & 0xff != NV_IOCTL_MAGIC {
        return None;
    }
    Some((request & 0xff, ((request >> 16) & 0x3fff) as usize))
}

/// An RM control command's class: its top 16 bits (`NV0000`, `NV2080`, ...).
pub const fn control_class(cmd: u32) -> u32 {
    cmd >> 16
}

macro_rules! abi_struct {
    ($(#[$m:meta])* $name:ident [$size:expr] { $($(#[$fm:meta])* $f:ident: $t:ty,)* }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
        pub struct $name { $($(#[$fm])* pub $f: $t,)* }
        const _: () = assert!(core::mem::size_of::<$name>() == $size);
    };
}

abi_struct!(
    /// `NVOS00_PARAMETERS`: `NV_ESC_RM_FREE`.
    RmFree [16] { h_root: u32, h_object_parent: u32, h_object_old: u32, status: u32, }
);
abi_struct!(
    /// `NVOS21_PARAMETERS`: `NV_ESC_RM_ALLOC` without access rights.
    RmAlloc [32] {
        h_root: u32, h_object_parent: u32, h_object_new: u32, h_class: u32,
        p_alloc_parms: u64, params_size: u32, status: u32,
    }
);
abi_struct!(
    /// `NVOS64_PARAMETERS`: `NV_ESC_RM_ALLOC` with requested rights; the
    /// driver tells the two apart by the request's size.
    RmAllocWithRights [48] {
        h_root: u32, h_object_parent: u32, h_object_new: u32, h_class: u32,
        p_alloc_parms: u64, p_rights_requested: u64, params_size: u32, flags: u32,
        status: u32, _pad: u32,
    }
);
abi_struct!(
    /// `NVOS54_PARAMETERS`: `NV_ESC_RM_CONTROL`.
    RmControl [32] {
        h_client: u32, h_object: u32, cmd: u32, flags: u32,
        params: u64, params_size: u32, status: u32,
    }
);
abi_struct!(
    /// `NVOS33_PARAMETERS` with the device descriptor to map through
    /// (`nv_ioctl_nvos33_parameters_with_fd`): `NV_ESC_RM_MAP_MEMORY`.
    RmMapMemoryWithFd [56] {
        h_client: u32, h_device: u32, h_memory: u32, _pad0: u32,
        offset: u64, length: u64, p_linear_address: u64, status: u32, flags: u32,
        fd: i32, _pad1: u32,
    }
);
abi_struct!(
    /// `NVOS02_PARAMETERS` with a descriptor
    /// (`nv_ioctl_nvos02_parameters_with_fd`): `NV_ESC_RM_ALLOC_MEMORY`.
    RmAllocMemoryWithFd [56] {
        h_root: u32, h_object_parent: u32, h_object_new: u32, h_class: u32,
        flags: u32, _pad0: u32, p_memory: u64, limit: u64, status: u32, _pad1: u32,
        fd: i32, _pad2: u32,
    }
);
abi_struct!(
    /// `nv_ioctl_register_fd_t`: ties a device descriptor to a control one.
    RegisterFd [4] { ctl_fd: i32, }
);
abi_struct!(
    /// `nv_ioctl_alloc_os_event_t` (and `_free_`): `fd` is an NVIDIA
    /// descriptor the driver signals.
    OsEvent [16] { h_client: u32, h_device: u32, fd: u32, status: u32, }
);
abi_struct!(
    /// `nv_ioctl_rm_api_version_t`: the version-string handshake.
    RmApiVersion [72] { cmd: u32, reply: u32, version_string: [u8; 64], }
);
abi_struct!(
    /// `UVM_INITIALIZE_PARAMS`.
    UvmInitialize [16] { flags: u64, rm_status: u32, _pad: u32, }
);
abi_struct!(
    /// `UVM_MM_INITIALIZE_PARAMS`: `uvm_fd` is another UVM descriptor.
    UvmMmInitialize [8] { uvm_fd: i32, rm_status: u32, }
);
abi_struct!(
    /// `UVM_REGISTER_GPU_PARAMS`: `rm_ctrl_fd` is a control descriptor.
    UvmRegisterGpu [40] {
        gpu_uuid: [u8; 16], numa_enabled: u8, _pad0: [u8; 3], numa_node_id: i32,
        rm_ctrl_fd: i32, h_client: u32, h_smc_part_ref: u32, rm_status: u32,
    }
);

#[cfg(test)]
mod tests {
    //! Expected values are written down from NVIDIA's headers at 580.105.08
    //! (`sizeof` / `offsetof` printed by a C program built against them).
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn struct_sizes_match_the_headers() {
        assert_eq!(size_of::<RmFree>(), 16); // NVOS00_PARAMETERS
        assert_eq!(size_of::<RmAlloc>(), 32); // NVOS21_PARAMETERS
        assert_eq!(size_of::<RmAllocWithRights>(), 48); // NVOS64_PARAMETERS
        assert_eq!(size_of::<RmControl>(), 32); // NVOS54_PARAMETERS
        assert_eq!(size_of::<RmMapMemoryWithFd>(), 56);
        assert_eq!(size_of::<RmAllocMemoryWithFd>(), 56);
        assert_eq!(size_of::<RmApiVersion>(), 72);
        assert_eq!(size_of::<OsEvent>(), 16);
        assert_eq!(size_of::<UvmInitialize>(), 16);
        assert_eq!(size_of::<UvmMmInitialize>(), 8);
        assert_eq!(size_of::<UvmRegisterGpu>(), 40);
    }

    #[test]
    fn field_offsets_match_the_headers() {
        assert_eq!(offset_of!(RmAlloc, p_alloc_parms), 16);
        assert_eq!(offset_of!(RmAlloc, params_size), 24);
        assert_eq!(offset_of!(RmAlloc, status), 28);
        assert_eq!(offset_of!(RmAllocWithRights, p_rights_requested), 24);
        assert_eq!(offset_of!(RmAllocWithRights, params_size), 32);
        assert_eq!(offset_of!(RmAllocWithRights, flags), 36);
        assert_eq!(offset_of!(RmAllocWithRights, status), 40);
        assert_eq!(offset_of!(RmControl, cmd), 8);
        assert_eq!(offset_of!(RmControl, params), 16);
        assert_eq!(offset_of!(RmControl, params_size), 24);
        assert_eq!(offset_of!(RmControl, status), 28);
        assert_eq!(offset_of!(RmMapMemoryWithFd, offset), 16);
        assert_eq!(offset_of!(RmMapMemoryWithFd, p_linear_address), 32);
        assert_eq!(offset_of!(RmMapMemoryWithFd, status), 40);
        assert_eq!(offset_of!(RmMapMemoryWithFd, flags), 44);
        assert_eq!(offset_of!(RmMapMemoryWithFd, fd), 48);
        assert_eq!(offset_of!(RmAllocMemoryWithFd, p_memory), 24);
        assert_eq!(offset_of!(RmAllocMemoryWithFd, limit), 32);
        assert_eq!(offset_of!(RmAllocMemoryWithFd, status), 40);
        assert_eq!(offset_of!(RmAllocMemoryWithFd, fd), 48);
        assert_eq!(offset_of!(RmApiVersion, version_string), 8);
        assert_eq!(offset_of!(OsEvent, fd), 8);
        assert_eq!(offset_of!(OsEvent, status), 12);
        assert_eq!(offset_of!(UvmInitialize, rm_status), 8);
        assert_eq!(offset_of!(UvmMmInitialize, rm_status), 4);
        assert_eq!(offset_of!(UvmRegisterGpu, rm_ctrl_fd), 24);
        assert_eq!(offset_of!(UvmRegisterGpu, h_client), 28);
        assert_eq!(offset_of!(UvmRegisterGpu, h_smc_part_ref), 32);
        assert_eq!(offset_of!(UvmRegisterGpu, rm_status), 36);
    }

    #[test]
    fn request_numbers_match_the_headers() {
        // _IOWR('F', 0x2a, NVOS54_PARAMETERS) as libcuda issues it.
        assert_eq!(frontend_request(esc::RM_CONTROL, 32), 0xc020_462a);
        assert_eq!(frontend_request(esc::RM_ALLOC, 48), 0xc030_462b);
        assert_eq!(frontend_request(esc::CARD_INFO, 72), 0xc048_46c8);
        assert_eq!(frontend_request(esc::CHECK_VERSION_STR, 72), 0xc048_46d2);
        assert_eq!(split_frontend_request(0xc020_462a), Some((0x2a, 32)));
        assert_eq!(split_frontend_request(0x4020_462a), None);
        assert_eq!(split_frontend_request(0xc020_472a), None);
        assert_eq!(uvm::INITIALIZE, 805_306_369);
        assert_eq!(uvm::MM_INITIALIZE, 75);
    }
}
