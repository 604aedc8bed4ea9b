//! `ferrovisor syscalls`: every x86-64 system call and how the sandbox
//! supports it, as a listing and as docs/compatibility.md.

use std::process::Command;

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");

fn syscalls(args: &[&str]) -> String {
    let out = Command::new(FERROVISOR)
        .arg("syscalls")
        .args(args)
        .output()
        .expect("run ferrovisor syscalls");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("the table is UTF-8")
}

#[test]
fn listing_has_every_syscall_with_its_support_and_note() {
    let text = syscalls(&[]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        abi::SYSCALLS.len() + 1,
        "a header, then a line per call"
    );
    assert!(lines[0].starts_with("NR ") && lines[0].ends_with("NOTE"));
    for (line, &(nr, name)) in lines[1..].iter().zip(abi::SYSCALLS) {
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), Some(nr.to_string().as_str()), "{line}");
        assert_eq!(words.next(), Some(name), "{line}");
        let support = words.next().unwrap_or_default();
        assert!(
            ["full", "partial", "unsupported"].contains(&support),
            "{line}"
        );
        if support == "partial" {
            assert!(
                words.next().is_some(),
                "a partial call says what is missing: {line}"
            );
        }
    }
    let socket = lines
        .iter()
        .find(|l| l.contains(" socket "))
        .expect("socket");
    assert!(
        socket.contains("partial") && socket.contains("AF_UNIX"),
        "{socket}"
    );
}

#[test]
fn markdown_is_docs_compatibility_md() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/compatibility.md"
    ))
    .expect("read docs/compatibility.md");
    assert!(
        syscalls(&["--markdown"]) == doc,
        "docs/compatibility.md differs from `ferrovisor syscalls --markdown`: run \
         `ferrovisor syscalls --markdown > docs/compatibility.md`"
    );
}

#[test]
fn host_filters_are_docs_filters_md() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/filters.md"))
        .expect("read docs/filters.md");
    assert!(
        syscalls(&["--host-filters"]) == doc,
        "docs/filters.md differs from `ferrovisor syscalls --host-filters`: run \
         `ferrovisor syscalls --host-filters > docs/filters.md`"
    );
}
