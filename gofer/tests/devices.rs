//! The device opener: fresh descriptors of the named character devices of
//! its directory, and nothing else.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;

use abi::Errno;
use gofer::devices::{opener_policy, serve, DeviceOpener};

/// A directory with `nvidiactl` (a character device: /dev/null's numbers),
/// `nvidia0` (a regular file) and `nvidia1` (a symlink to /dev/null).
fn device_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fv-devices-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).expect("make the directory");
    let node =
        CString::new(dir.join("nvidiactl").into_os_string().into_encoded_bytes()).expect("path");
    // SAFETY: `node` is a valid C string; mknod creates one inode.
    let r = unsafe { libc::mknod(node.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    assert_eq!(
        r,
        0,
        "mknod (tests run as root): {}",
        std::io::Error::last_os_error()
    );
    std::fs::write(dir.join("nvidia0"), b"not a device").expect("write");
    std::os::unix::fs::symlink("/dev/null", dir.join("nvidia1")).expect("symlink");
    dir
}

#[test]
fn only_the_allowed_character_devices_open_each_time_afresh() {
    let dir = device_dir();
    let held: OwnedFd = std::fs::File::open(&dir)
        .expect("open the directory")
        .into();
    let (ours, theirs) = UnixStream::pair().expect("socketpair");
    let allowed: Vec<String> = ["nvidiactl", "nvidia0", "nvidia1"]
        .map(String::from)
        .to_vec();
    let server = std::thread::spawn(move || serve(&held, &allowed, &OwnedFd::from(theirs)));
    let opener = DeviceOpener::new(ours.into());

    let a = opener.open("nvidiactl").expect("the device opens");
    let b = opener.open("nvidiactl").expect("again");
    let meta = std::fs::File::from(a.try_clone().expect("dup"))
        .metadata()
        .expect("fstat");
    assert_eq!(meta.rdev(), libc::makedev(1, 3));
    assert_ne!(a.as_raw_fd(), b.as_raw_fd());
    // Two opens are two open file descriptions: a flag on one is not on the other.
    // SAFETY: fcntl on descriptors this test owns.
    let (fa, fb) = unsafe {
        libc::fcntl(a.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK);
        (
            libc::fcntl(a.as_raw_fd(), libc::F_GETFL),
            libc::fcntl(b.as_raw_fd(), libc::F_GETFL),
        )
    };
    assert_ne!(fa & libc::O_NONBLOCK, fb & libc::O_NONBLOCK);

    assert_eq!(
        opener.open("nvidia0").err(),
        Some(Errno::ENXIO),
        "a regular file"
    );
    assert_eq!(
        opener.open("nvidia1").err(),
        Some(Errno::ELOOP),
        "a symlink"
    );
    assert_eq!(
        opener.open("null").err(),
        Some(Errno::ENOENT),
        "a name not given"
    );
    assert_eq!(opener.open("../../dev/null").err(), Some(Errno::ENOENT));
    assert_eq!(opener.open("").err(), Some(Errno::ENOENT));
    drop(opener);
    assert_eq!(server.join().expect("the server ends"), Ok(()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_policy_opens_only_under_its_directory_with_its_flags() {
    const ALLOW: u32 = 0x7fff_0000;
    let p = opener_policy(5);
    let flags = gofer::devices::OPEN_FLAGS as u64;
    let decide = |args: [u64; 6]| p.decide(libc::SYS_openat, args).expect("compile");
    assert_eq!(decide([5, 0, flags, 0, 0, 0]), ALLOW);
    assert_ne!(decide([6, 0, flags, 0, 0, 0]), ALLOW);
    assert_ne!(decide([libc::AT_FDCWD as u64, 0, flags, 0, 0, 0]), ALLOW);
    assert_ne!(decide([5, 0, flags | libc::O_CREAT as u64, 0, 0, 0]), ALLOW);
    assert_ne!(decide([5, 0, libc::O_PATH as u64, 0, 0, 0]), ALLOW);
    for nr in [
        libc::SYS_execve,
        libc::SYS_open,
        libc::SYS_socket,
        libc::SYS_ioctl,
    ] {
        assert_ne!(p.decide(nr, [0; 6]).expect("compile"), ALLOW, "{nr}");
    }
}
