//! Measures the round trip of a `GetStat` request: in-process server thread
//! over a socket pair, and the real jailed gofer process (with its seccomp
//! filter). Run: `cargo run --release -p gofer --example stat_latency`.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::Instant;

use gofer::{Client, ServerOptions};

const N: u32 = 20_000;

fn measure(c: &Client, what: &str) {
    let root = c.attach().expect("attach").handle;
    for _ in 0..1000 {
        c.stat(root).expect("stat");
    }
    let mut us: Vec<f64> = (0..N)
        .map(|_| {
            let t = Instant::now();
            c.stat(root).expect("stat");
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    us.sort_by(f64::total_cmp);
    let mean = us.iter().sum::<f64>() / f64::from(N);
    let pct = |p: usize| us[us.len() * p / 100];
    println!(
        "{what}: GetStat round trip p10 {:.1} µs, median {:.1} µs, p90 {:.1} µs, mean {mean:.1} µs ({N} calls)",
        pct(10),
        pct(50),
        pct(90)
    );
}

fn main() {
    let dir = std::env::temp_dir();
    let (a, b) = UnixStream::pair().expect("pair");
    let root: OwnedFd = std::fs::File::open(&dir).expect("open").into();
    std::thread::spawn(move || gofer::serve(root, b, ServerOptions::default()));
    measure(&Client::new(a), "server thread");

    let Some(bin) = std::env::args().nth(1) else {
        println!("(pass the path of ferrovisor-gofer to measure the jailed process)");
        return;
    };
    let (a, b) = UnixStream::pair().expect("pair");
    // SAFETY: clears close-on-exec on our own descriptor for the child.
    unsafe { libc::fcntl(b.as_raw_fd(), libc::F_SETFD, 0) };
    let mut child = Command::new(bin)
        .arg("--root")
        .arg(&dir)
        .arg("--fd")
        .arg(b.as_raw_fd().to_string())
        .spawn()
        .expect("spawn");
    drop(b);
    let c = Client::new(a);
    measure(&c, "jailed gofer process");
    drop(c);
    let _ = child.wait();
}
