//! The Sentry's folders are layers and imports go one way
//! (docs/architecture.md): this test reads every `crate::` path in
//! `sentry/src` and fails on one that points up or sideways.
//!
//! `KNOWN` lists the imports against the direction that are still to be
//! undone, one line per (file, target layer). The test also fails when one
//! of them is gone, so the list only shrinks.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Layers a layer may import, besides itself.
fn allowed(from: &str) -> &'static [&'static str] {
    const LEAVES: [&str; 2] = ["kernel::auth", "kernel::wait"];
    match from {
        "host" => &[],
        "mm" => &["host"],
        "kernel::auth" | "kernel::wait" => &["mm", "host"],
        "vfs" => &["kernel::auth", "kernel::wait", "mm", "host"],
        "loader" => &["vfs", "kernel::auth", "kernel::wait", "mm", "host"],
        "kernel" => &[
            "kernel::auth",
            "kernel::wait",
            "vfs",
            "loader",
            "mm",
            "host",
        ],
        "fsimpl" => &[
            "kernel", LEAVES[0], LEAVES[1], "vfs", "loader", "mm", "host",
        ],
        "socket" => &[
            "fsimpl", "kernel", LEAVES[0], LEAVES[1], "vfs", "loader", "mm", "host",
        ],
        "syscalls" => &[
            "socket", "fsimpl", "kernel", LEAVES[0], LEAVES[1], "vfs", "loader", "mm", "host",
        ],
        // The facade and boot may name anything.
        _ => &[
            "boot", "syscalls", "socket", "fsimpl", "kernel", LEAVES[0], LEAVES[1], "vfs",
            "loader", "mm", "host",
        ],
    }
}

/// Imports against the direction that are still to be undone.
const KNOWN: &[(&str, &str)] = &[];

/// The layer a module path (the segments after `crate::`) belongs to.
fn layer_of(segments: &[&str]) -> Option<String> {
    let first = *segments.first()?;
    match first {
        "kernel" => match segments.get(1) {
            Some(&s @ ("auth" | "wait")) => Some(format!("kernel::{s}")),
            _ => Some("kernel".into()),
        },
        "host" | "mm" | "loader" | "vfs" | "fsimpl" | "socket" | "syscalls" | "boot" => {
            Some(first.into())
        }
        _ => None,
    }
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read sentry/src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rs_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `crate::a::b...` path in `text`, as its segments; a brace group
/// after `crate::kernel::` is expanded into its first segments.
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        // Skip `$crate::` and identifiers that merely end in "crate".
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let mut segs = Vec::new();
        let mut s = rest;
        loop {
            let n = s
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(s.len());
            if n == 0 {
                break;
            }
            segs.push(s[..n].to_string());
            s = &s[n..];
            if let Some(t) = s.strip_prefix("::") {
                s = t;
                if let Some(group) = s.strip_prefix('{') {
                    let end = group.find('}').unwrap_or(group.len());
                    for item in group[..end].split(',') {
                        let item = item.trim();
                        let head = item.split("::").next().unwrap_or("").trim();
                        if !head.is_empty() {
                            let mut v = segs.clone();
                            v.push(head.to_string());
                            out.push(v);
                        }
                    }
                    segs.clear();
                    break;
                }
            } else {
                break;
            }
        }
        if !segs.is_empty() {
            out.push(segs);
        }
    }
    out
}

#[test]
fn imports_follow_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    files.sort();
    let mut found = BTreeSet::new();
    for path in &files {
        let rel = path
            .strip_prefix(&src)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        let module: Vec<&str> = rel.trim_end_matches(".rs").split('/').collect();
        let Some(from) = layer_of(&module) else {
            continue; // lib.rs: the facade
        };
        let text = fs::read_to_string(path).expect("read source");
        // Comments and doc links may name any layer.
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for segs in crate_paths(&code) {
            let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
            let Some(to) = layer_of(&segs) else { continue };
            if to == from || allowed(&from).contains(&to.as_str()) {
                continue;
            }
            found.insert((rel.clone(), to));
        }
    }
    let known: BTreeSet<(String, String)> = KNOWN
        .iter()
        .map(|(f, t)| (f.to_string(), t.to_string()))
        .collect();
    let new: Vec<_> = found.difference(&known).collect();
    let gone: Vec<_> = known.difference(&found).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "imports against the layers (file, layer it imports): {new:#?}\n\
         listed in KNOWN but gone (remove them): {gone:#?}"
    );
}

#[test]
fn the_parser_sees_groups_and_skips_dollar_crate() {
    let paths = crate_paths("use crate::kernel::{wait::Queue, task::Thread};\n$crate::mm::X");
    assert_eq!(
        paths,
        vec![
            vec!["kernel".to_string(), "wait".into()],
            vec!["kernel".to_string(), "task".into()],
        ]
    );
    assert_eq!(
        layer_of(&["kernel", "wait", "Queue"]).as_deref(),
        Some("kernel::wait")
    );
    assert_eq!(layer_of(&["kernel", "Kernel"]).as_deref(), Some("kernel"));
    assert!(allowed("vfs").contains(&"kernel::wait"));
    assert!(!allowed("vfs").contains(&"kernel"));
}
