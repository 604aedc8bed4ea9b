//! A stand-alone gofer: `ferrovisor-gofer --root DIR --fd N [--ro]` serves
//! the connected socket `N` from inside the jail. The `ferrovisor gofer`
//! subcommand does the same; this binary lets the crate's tests run the real
//! process.

use std::path::PathBuf;

fn usage() -> ! {
    eprintln!("usage: ferrovisor-gofer --root DIR --fd N [--ro]");
    std::process::exit(2);
}

fn main() {
    let mut root = None;
    let mut fd = None;
    let mut read_only = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--root" => root = args.next().map(PathBuf::from),
            "--fd" => fd = args.next().and_then(|s| s.parse().ok()),
            "--ro" => read_only = true,
            _ => usage(),
        }
    }
    let (Some(root), Some(fd)) = (root, fd) else {
        usage()
    };
    let socket = match gofer::jail::inherited_socket(fd) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ferrovisor-gofer: {e}");
            std::process::exit(2);
        }
    };
    gofer::jail::run_gofer_process(&root, socket, read_only)
}
