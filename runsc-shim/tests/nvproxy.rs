//! `ferrovisor nvproxy`: the supported NVIDIA drivers, and whether this
//! host's is one of them.

use std::process::Command;

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");

fn nvproxy(arg: &str) -> std::process::Output {
    Command::new(FERROVISOR)
        .args(["nvproxy", arg])
        .output()
        .expect("run ferrovisor nvproxy")
}

#[test]
fn the_supported_drivers_are_listed_one_per_line() {
    let out = nvproxy("list-supported-drivers");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let lines: Vec<&str> = text.lines().collect();
    // The GPU machines' drivers, and the line's first and newest.
    for v in ["580.65.06", "580.105.08", "580.159.03", "580.159.04"] {
        assert!(lines.contains(&v), "{v} missing from {lines:?}");
    }
    assert!(lines.iter().all(|l| l.starts_with("580.")), "{lines:?}");
}

#[test]
fn check_host_names_the_driver_or_says_there_is_none() {
    let out = nvproxy("check-host");
    let stderr = String::from_utf8_lossy(&out.stderr);
    match std::fs::read_to_string("/proc/driver/nvidia/version") {
        Err(_) => {
            assert_eq!(out.status.code(), Some(1), "{out:?}");
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(
                stderr.starts_with("ferrovisor: no NVIDIA driver on this host"),
                "{stderr}"
            );
        }
        // On a GPU machine: supported (exit 0), or one line naming it.
        Ok(_) if out.status.success() => {
            assert!(
                String::from_utf8_lossy(&out.stdout).contains(": supported"),
                "{out:?}"
            );
        }
        Ok(_) => assert!(
            stderr.contains("is not supported by nvproxy; supported: 580."),
            "{stderr}"
        ),
    }
}

/// A device directory standing for the host's `/dev`: `nvidiactl` and
/// `nvidia0` are character devices with /dev/null's numbers, so what the
/// proxy forwards reaches a real host driver (which answers ENOTTY) and
/// what it refuses does not.
fn fake_dev_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("fv-nvdev-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).expect("make the directory");
    for name in ["nvidiactl", "nvidia0"] {
        let st = Command::new("mknod")
            .arg(dir.join(name))
            .args(["c", "1", "3"])
            .status()
            .expect("mknod");
        assert!(st.success(), "mknod (tests run as root)");
    }
    dir
}

/// Issues what libcuda issues first, on the sandbox's /dev/nvidiactl.
const GUEST: &str = r#"
import fcntl, os, struct, errno
print(sorted(n for n in os.listdir('/dev') if n.startswith('nvidia')))
fd = os.open('/dev/nvidiactl', os.O_RDWR)
def iowr(nr, size): return (3 << 30) | (size << 16) | (ord('F') << 8) | nr
def call(req, buf):
    b = bytearray(buf)
    try:
        fcntl.ioctl(fd, req, b, True)
        return 'ok', bytes(b)
    except OSError as e:
        return errno.errorcode[e.errno], b''
print('unknown escape', call(iowr(0x99, 16), bytes(16))[0])
print('wrong size', call(iowr(0x2a, 24), bytes(24))[0])
r, out = call(iowr(0x2a, 32), struct.pack('IIIIQII', 1, 2, 0x2080dead, 0, 0, 0, 0))
print('unknown control', r, hex(struct.unpack('IIIIQII', out)[6]))
print('rm free', call(iowr(0x29, 16), bytes(16))[0])
import mmap
try:
    mmap.mmap(fd, 4096)
except OSError as e:
    print('mmap', errno.errorcode[e.errno])
import select
p = select.poll(); p.register(fd, select.POLLIN | select.POLLOUT)
print('poll', p.poll(1000) == [(fd, select.POLLIN | select.POLLOUT)])
for dev in ('/dev/nvidia-uvm', '/dev/nvidia1'):
    try:
        os.open(dev, os.O_RDWR)
    except OSError as e:
        print(dev, errno.errorcode[e.errno])
"#;

#[test]
fn a_guest_reaches_the_host_driver_only_through_the_table() {
    let dir = fake_dev_dir("guest");
    let log = dir.join("nvproxy.log");
    let out = Command::new(FERROVISOR)
        .args([
            "do",
            "--gpus",
            "all",
            "--nvproxy-driver-version",
            "580.105.08",
        ])
        .arg("--nvproxy-dev-dir")
        .arg(&dir)
        .arg("--nvproxy-log")
        .arg(&log)
        .args(["--", "python3", "-c", GUEST])
        .output()
        .expect("run ferrovisor do");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout,
        "['nvidia0', 'nvidiactl']\n\
         unknown escape EINVAL\n\
         wrong size EINVAL\n\
         unknown control ok 0x56\n\
         rm free ENOTTY\n\
         mmap ENODEV\n\
         poll True\n\
         /dev/nvidia-uvm ENOENT\n\
         /dev/nvidia1 ENOENT\n"
    );
    let log = std::fs::read_to_string(&log).expect("the log");
    assert_eq!(
        log,
        "refused frontend escape 0x99: not in the table\n\
         refused NV_ESC_RM_CONTROL with 24 bytes: wrong parameter size\n\
         refused control 0x2080dead: not in the table\n\
         forwarded NV_ESC_RM_FREE\n\
         refused mmap of /dev/nvidiactl (0x1000 bytes at offset 0x0): device mappings are not implemented yet\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_gpus_there_is_no_nvidia_device_and_bad_requests_get_one_line() {
    let out = Command::new(FERROVISOR)
        .args(["do", "--", "/bin/ls", "/dev/nvidiactl"])
        .output()
        .expect("run ferrovisor do");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("No such file"),
        "{out:?}"
    );
    let dir = fake_dev_dir("errors");
    let gpu_do = |args: &[&str]| {
        Command::new(FERROVISOR)
            .arg("do")
            .args(args)
            .arg("--nvproxy-dev-dir")
            .arg(&dir)
            .args(["--", "/bin/true"])
            .output()
            .expect("run ferrovisor do")
    };
    let v = "--nvproxy-driver-version";
    for (args, want) in [
        (vec!["--gpus", "3", v, "580.105.08"], "GPU 3 not found: "),
        (
            vec!["--gpus", "x", v, "580.105.08"],
            "--gpus \"x\": give all, or GPU indices",
        ),
        (
            vec![
                "--gpus",
                "all",
                v,
                "580.105.08",
                "--nvproxy-capabilities",
                "display",
            ],
            "unknown GPU capability \"display\"",
        ),
        (
            vec!["--gpus", "all", v, "550.54.14"],
            "ferrovisor: NVIDIA driver 550.54.14 is not supported by nvproxy; supported: 580.65.06",
        ),
    ] {
        let out = gpu_do(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{args:?}: {out:?}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
