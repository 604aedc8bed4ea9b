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
