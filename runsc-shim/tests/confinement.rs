//! Every host process of a running `do` sandbox is confined (issue 21,
//! point 4): each has `no_new_privs` and a seccomp filter, and each that is
//! still in the host's user namespace holds no capability but `CAP_KILL`
//! (the waiting `do` process's, to signal the Sentry).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const CAP_KILL: u64 = 1 << 5;

/// One host process as /proc tells it.
#[derive(Debug)]
struct HostProcess {
    pid: u32,
    cmd: String,
    uid: String,
    cap_eff: u64,
    no_new_privs: bool,
    seccomp: bool,
    host_userns: bool,
}

fn status_field<'a>(status: &'a str, key: &str) -> &'a str {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map_or("", str::trim)
}

fn read(pid: u32) -> Option<HostProcess> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let ns = std::fs::read_link(format!("/proc/{pid}/ns/user")).ok()?;
    Some(HostProcess {
        pid,
        cmd: String::from_utf8_lossy(&cmd).replace('\0', " "),
        uid: status_field(&status, "Uid:").to_owned(),
        cap_eff: u64::from_str_radix(status_field(&status, "CapEff:"), 16).ok()?,
        no_new_privs: status_field(&status, "NoNewPrivs:") == "1",
        seccomp: status_field(&status, "Seccomp:") == "2",
        host_userns: ns == std::fs::read_link("/proc/self/ns/user").ok()?,
    })
}

/// `root` and all its descendants.
fn tree(root: u32) -> Vec<HostProcess> {
    let parent_of = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()
    };
    let pids: Vec<u32> = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    let mut found = vec![root];
    let mut grew = true;
    while grew {
        grew = false;
        for &p in &pids {
            if !found.contains(&p) && parent_of(p).is_some_and(|pp| found.contains(&pp)) {
                found.push(p);
                grew = true;
            }
        }
    }
    found.into_iter().filter_map(read).collect()
}

#[test]
fn every_host_process_of_a_sandbox_is_confined() {
    let mut child = Command::new(FERROVISOR)
        .args(["do", "--", "/bin/sleep", "5"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn ferrovisor do");
    // Wait for the stub of the guest's address space (a descendant with no
    // command line) and the gofer; `do` itself reads as empty while it execs.
    let root = child.id();
    let is_stub = |p: &HostProcess| p.pid != root && p.cmd.is_empty();
    let is_gofer = |p: &HostProcess| p.cmd.contains(" gofer ");
    let deadline = Instant::now() + Duration::from_secs(20);
    let procs = loop {
        let procs = tree(root);
        let ready = procs.iter().any(is_stub) && procs.iter().any(is_gofer);
        if ready || Instant::now() > deadline {
            break procs;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    let listing: Vec<String> = procs
        .iter()
        .map(|p| {
            format!(
                "{} uid {} caps {:#x} nnp {} seccomp {} host-userns {}: {}",
                p.pid, p.uid, p.cap_eff, p.no_new_privs, p.seccomp, p.host_userns, p.cmd
            )
        })
        .collect();
    let listing = listing.join("\n");
    // (the listing: `cargo test --test confinement -- --nocapture`)
    eprintln!("{listing}");
    assert!(procs.iter().any(is_stub), "no stub:\n{listing}");
    assert!(procs.iter().any(is_gofer), "no gofer:\n{listing}");
    for p in &procs {
        assert!(p.no_new_privs && p.seccomp, "unconfined:\n{listing}");
        if p.host_userns {
            assert_eq!(p.cap_eff & !CAP_KILL, 0, "capabilities:\n{listing}");
        }
    }
}
