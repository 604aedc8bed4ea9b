//! Builds the guest programs in `guests/` (static C binaries) and the fixture
//! tree they inspect, both under OUT_DIR, so that the native and the sandboxed
//! run of a guest see the very same files.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let src = manifest.join("guests");
    let bin = out.join("guests");
    let fixtures = out.join("fixtures");
    println!("cargo:rerun-if-changed=guests");
    println!("cargo:rerun-if-changed=build.rs");

    make_fixtures(&fixtures);
    fs::create_dir_all(&bin).expect("create guest dir");

    let mut names: Vec<String> = fs::read_dir(&src)
        .expect("read guests/")
        .filter_map(|e| {
            let p = e.expect("dir entry").path();
            (p.extension()? == "c").then(|| p.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    names.sort();

    // gcc -static links for a noticeable time; two or so at once keeps a
    // small machine busy without starving the rest of the workspace build.
    let jobs = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4);
    let errors: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..jobs)
            .map(|j| {
                let names = &names;
                let (src, bin, fixtures) = (&src, &bin, &fixtures);
                s.spawn(move || {
                    names
                        .iter()
                        .skip(j)
                        .step_by(jobs)
                        .filter_map(|n| compile(src, bin, fixtures, n).err())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("compile thread"))
            .collect()
    });
    if !errors.is_empty() {
        for e in &errors {
            eprintln!("{e}");
        }
        panic!("{} guest program(s) failed to compile", errors.len());
    }

    let fuzz = out.join("fuzz");
    println!("cargo:rerun-if-changed=fuzz");
    if let Err(e) = compile(&manifest.join("fuzz"), &out, &fixtures, "fuzz") {
        panic!("{e}");
    }
    println!("cargo:rustc-env=SYSCALL_TESTS_FUZZER={}", fuzz.display());
    println!("cargo:rustc-env=SYSCALL_TESTS_GUEST_DIR={}", bin.display());
    println!(
        "cargo:rustc-env=SYSCALL_TESTS_FIXTURES={}",
        fixtures.display()
    );
    println!("cargo:rustc-env=SYSCALL_TESTS_GUESTS={}", names.join(","));
}

fn compile(src: &Path, bin: &Path, fixtures: &Path, name: &str) -> Result<(), String> {
    // A guest may ask for linker options of its own with a line
    // `/* link: OPTIONS */`.
    let text = fs::read_to_string(src.join(format!("{name}.c")))
        .map_err(|e| format!("{name}: cannot read the source: {e}"))?;
    let link: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("/* link: "))
        .filter_map(|l| l.strip_suffix(" */"))
        .flat_map(str::split_whitespace)
        .collect();
    let out = Command::new("gcc")
        .args(["-static", "-O1", "-Wall", "-std=gnu11"])
        .args(&link)
        .arg(format!("-DFIXTURES=\"{}\"", fixtures.display()))
        .arg(format!("-DGUEST_DIR=\"{}\"", bin.display()))
        .arg(format!("-I{}", src.display()))
        .arg("-o")
        .arg(bin.join(name))
        .arg(src.join(format!("{name}.c")))
        .output()
        .map_err(|e| format!("{name}: cannot run gcc: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{name}: gcc failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The fixture tree. Guests get its path at compile time (-DFIXTURES) and
/// rely on exactly this content: keep `guests/` in step when changing it.
fn make_fixtures(root: &Path) {
    if root.exists() {
        fs::remove_dir_all(root).expect("remove old fixtures");
    }
    let mk = |rel: &str| fs::create_dir_all(root.join(rel)).expect("mkdir fixture");
    let file = |rel: &str, data: &[u8], mode: u32| {
        let p = root.join(rel);
        fs::write(&p, data).expect("write fixture");
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).expect("chmod fixture");
    };
    let link = |target: &str, rel: &str| symlink(target, root.join(rel)).expect("symlink fixture");

    mk("dir/sub");
    file("file.txt", b"hello fixture\n", 0o644);
    file("empty", b"", 0o644);
    // Three pages and a bit, byte i = (i * 7 + i / 4096) mod 256: every page
    // differs, so a mapping at the wrong offset shows.
    let big: Vec<u8> = (0..3 * 4096 + 100)
        .map(|i: usize| (i * 7 + i / 4096) as u8)
        .collect();
    file("big.bin", &big, 0o644);
    file("dir/a", b"a\n", 0o644);
    file("dir/b", b"bb\n", 0o644);
    file("dir/c", b"ccc\n", 0o644);
    link("../file.txt", "dir/up");
    link("file.txt", "link_rel");
    link(&format!("{}/file.txt", root.display()), "link_abs");
    link("dir/../file.txt", "link_dotdot");
    link("dir", "link_dir");
    link("link_rel", "link_link");
    link("does-not-exist", "dangling");
    link("loop_b", "loop_a");
    link("loop_a", "loop_b");
    link("self", "self");
    // chain/0 -> 1 -> ... -> 39 -> ../file.txt: 40 links, Linux's MAXSYMLINKS,
    // still resolves; chain/start -> 0 makes 41 and must fail with ELOOP.
    mk("chain");
    for i in 0..39 {
        link(&(i + 1).to_string(), &format!("chain/{i}"));
    }
    link("../file.txt", "chain/39");
    link("0", "chain/start");
    // exec fixtures
    file("noexec.txt", b"not executable\n", 0o644);
    file("notelf", b"just some text, no magic\n", 0o755);
    file(
        "script.sh",
        b"#!/bin/sh\necho \"script: $# args: $*\"\nexit 3\n",
        0o755,
    );
    file(
        "script_static.sh",
        b"#!/bin/busybox sh\necho \"static script: $*\"\nexit 4\n",
        0o755,
    );
    file(
        "script_badinterp.sh",
        b"#!/nonexistent/interp\necho no\n",
        0o755,
    );
}
