//! Checkpoint and restore (`do --save DIR`, `do --restore DIR`): a Python
//! process saved as it asks, then restored, goes on as the run that was
//! never stopped (and as the same script natively); two restores of one
//! image run side by side; what cannot be saved yet, a changed file and a
//! bad image each get one line.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{command, run, Outcome, TempDir};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const TIMEOUT: Duration = Duration::from_secs(120);

/// Memory (a counter, a list), an open file read half-way, and stdin read
/// after the save: what a restored copy must carry on with.
const SCRIPT: &str = r#"
import sys
counter = 0
data = [i * i for i in range(50000)]
for _ in range(3):
    counter += 1
f = open(sys.argv[1], 'rb')
head = f.read(5)
try:
    with open('/proc/ferrovisor/checkpoint', 'w') as c:
        c.write('save')
    state = open('/proc/ferrovisor/checkpoint').read().strip()
except FileNotFoundError:
    state = 'native'
print('state', state, file=sys.stderr)
line = sys.stdin.readline().strip()
rest = f.read(5)
counter += 1
print(counter, sum(data), head, rest, line)
"#;

struct Fixture {
    dir: TempDir,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let dir = TempDir::new(tag);
        std::fs::write(dir.path().join("s.py"), SCRIPT).expect("script");
        std::fs::write(dir.path().join("data.txt"), "0123456789abcdef").expect("data");
        Fixture { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    fn images(&self) -> String {
        self.path("images")
    }
}

fn ferrovisor(args: &[&str], stdin: &[u8]) -> Outcome {
    let mut cmd = command(FERROVISOR, &[]);
    cmd.args(args);
    run(cmd, Some(stdin), TIMEOUT)
}

fn save(fx: &Fixture, platform: &str, stdin: &[u8]) -> Outcome {
    let (script, data, images) = (fx.path("s.py"), fx.path("data.txt"), fx.images());
    saving_on(platform, &images, &["python3", &script, &data], stdin)
}

/// `do --save IMAGES -- ARGV...` on the default platform.
fn saving(images: &str, argv: &[&str], stdin: &[u8]) -> Outcome {
    saving_on("seccomp", images, argv, stdin)
}

/// `do --platform PLATFORM --save IMAGES -- ARGV...`.
fn saving_on(platform: &str, images: &str, argv: &[&str], stdin: &[u8]) -> Outcome {
    let mut args = vec!["do", "--platform", platform, "--save", images, "--"];
    args.extend_from_slice(argv);
    ferrovisor(&args, stdin)
}

fn restore(images: &str, platform: &str, stdin: &[u8]) -> Outcome {
    ferrovisor(&["do", "--platform", platform, "--restore", images], stdin)
}

fn show(o: &Outcome) -> String {
    common::show(o)
}

#[test]
fn a_saved_python_process_goes_on_after_restore_as_if_never_stopped() {
    let fx = Fixture::new("ckpt-python");
    let native = {
        let mut cmd = command("python3", &[]);
        cmd.args(["-c", SCRIPT, &fx.path("data.txt")]);
        run(cmd, Some(b"one\n"), TIMEOUT)
    };
    assert_eq!(native.status, 0, "{}", show(&native));
    assert!(
        native.stdout.ends_with(" b'01234' b'56789' one\n"),
        "{}",
        show(&native)
    );
    for platform in ["seccomp", "ptrace"] {
        let first = save(&fx, platform, b"one\n");
        assert_eq!(first.status, 0, "{platform}: {}", show(&first));
        assert!(
            first.stderr.contains("state saved"),
            "{platform}: {}",
            show(&first)
        );
        assert_eq!(first.stdout, native.stdout, "{platform}: the saving run");
        let image = Path::new(&fx.images()).join("sandbox.img");
        assert!(image.metadata().is_ok_and(|m| m.len() > 0), "no image");

        // Two copies of the one image at once, each with its own input.
        let images = fx.images();
        let copies: Vec<_> = ["two", "three"]
            .into_iter()
            .map(|word| {
                let images = images.clone();
                let platform = platform.to_string();
                std::thread::spawn(move || {
                    (
                        word,
                        restore(&images, &platform, format!("{word}\n").as_bytes()),
                    )
                })
            })
            .collect();
        for c in copies {
            let (word, out) = c.join().expect("restore thread");
            assert_eq!(out.status, 0, "{platform}: {}", show(&out));
            assert!(
                out.stderr.contains("state restored"),
                "{platform}: {}",
                show(&out)
            );
            assert_eq!(
                out.stdout,
                native.stdout.replace(" one\n", &format!(" {word}\n")),
                "{platform}: a restored copy"
            );
        }
    }
}

#[test]
fn what_cannot_be_saved_yet_is_named_and_the_sandbox_runs_on() {
    let fx = Fixture::new("ckpt-refused");
    let images = fx.images();
    // A memfd is not saved yet: named, and the process runs on.
    let out = saving(
        &images,
        &[
            "python3",
            "-c",
            "import os\nm = os.memfd_create('x')\n\
             open('/proc/ferrovisor/checkpoint', 'w').write('x')\n\
             print(open('/proc/ferrovisor/checkpoint').read(), end='')\nprint('still running')",
        ],
        b"",
    );
    assert_eq!(out.status, 0, "{}", show(&out));
    assert!(
        out.stderr
            .contains("ferrovisor: checkpoint not saved: descriptor 3 ("),
        "{}",
        show(&out)
    );
    assert!(
        out.stdout.starts_with("failed: descriptor 3"),
        "{}",
        show(&out)
    );
    assert!(out.stdout.ends_with("still running\n"), "{}", show(&out));
    // A UDP socket is not saved yet.
    let out = saving(
        &images,
        &[
            "python3",
            "-c",
            "import socket\na = socket.socket(type=socket.SOCK_DGRAM)\na.bind(('127.0.0.1', 0))\n\
             open('/proc/ferrovisor/checkpoint', 'w').write('x')\n\
             print(open('/proc/ferrovisor/checkpoint').read(), end='')",
        ],
        b"",
    );
    assert_eq!(out.status, 0, "{}", show(&out));
    assert!(
        out.stdout
            .starts_with("failed: descriptor 3 (a TCP or UDP socket"),
        "{}",
        show(&out)
    );
}

#[test]
fn without_save_the_checkpoint_file_says_so_and_refuses_writes() {
    let out = ferrovisor(
        &[
            "do",
            "--",
            "python3",
            "-c",
            "import errno, os\nprint(open('/proc/ferrovisor/checkpoint').read(), end='')\n\
             fd = os.open('/proc/ferrovisor/checkpoint', os.O_WRONLY)\n\
             try:\n    os.write(fd, b'x')\n\
             except OSError as e:\n    print(e.errno == errno.EOPNOTSUPP)",
        ],
        b"",
    );
    assert_eq!(out.status, 0, "{}", show(&out));
    assert_eq!(
        out.stdout,
        "off: the sandbox was started without --save\nTrue\n",
        "{}",
        show(&out)
    );
}

#[test]
fn a_changed_file_or_a_bad_image_is_refused_in_one_line() {
    let fx = Fixture::new("ckpt-bad");
    let first = save(&fx, "seccomp", b"one\n");
    assert_eq!(first.status, 0, "{}", show(&first));
    let images = fx.images();
    let image = Path::new(&images).join("sandbox.img");
    let good = std::fs::read(&image).expect("image");
    let one_line = |o: &Outcome, what: &str| {
        assert_eq!(o.status, 2, "{what}: {}", show(o));
        assert_eq!(o.stderr.lines().count(), 1, "{what}: {}", show(o));
        assert!(o.stderr.contains(what), "{what}: {}", show(o));
        assert!(o.stdout.is_empty(), "{what}: {}", show(o));
    };
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x55;
    std::fs::write(&image, &flipped).expect("write");
    one_line(&restore(&images, "seccomp", b""), "corrupt");
    std::fs::write(&image, &good[..good.len() - 100]).expect("write");
    one_line(&restore(&images, "seccomp", b""), "truncated");
    std::fs::write(&image, b"#!/bin/sh\necho not an image at all\n").expect("write");
    one_line(
        &restore(&images, "seccomp", b""),
        "not a ferrovisor sandbox image",
    );
    one_line(
        &restore(&fx.path("nowhere"), "seccomp", b""),
        "No such file",
    );

    // The file the process had open changed: refused, not swapped.
    std::fs::write(&image, &good).expect("write");
    std::fs::write(fx.path("data.txt"), "0123456789ABCDEFG").expect("data");
    let out = restore(&images, "seccomp", b"two\n");
    assert_eq!(out.status, 125, "{}", show(&out));
    assert!(
        out.stderr
            .contains("data.txt has changed since the checkpoint"),
        "{}",
        show(&out)
    );
    assert!(out.stdout.is_empty(), "{}", show(&out));
}

/// The image's checksum as docs/checkpoint.md's format has it (FNV-style,
/// eight bytes a step), so that mutated images get past the header.
fn checksum(data: &[u8]) -> u64 {
    const P: u64 = 0x0000_0100_0000_01b3;
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ data.len() as u64;
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(b)).wrapping_mul(P).rotate_left(23);
    }
    for &b in words.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(P);
    }
    h
}

#[test]
fn mutated_images_never_crash_the_runtime() {
    let fx = Fixture::new("ckpt-fuzz");
    let images = fx.images();
    let first = saving(
        &images,
        &[
            "/bin/busybox",
            "sh",
            "-c",
            "echo save > /proc/ferrovisor/checkpoint; read x; echo got $x",
        ],
        b"one\n",
    );
    assert_eq!(first.status, 0, "{}", show(&first));
    let image = Path::new(&images).join("sandbox.img");
    let good = std::fs::read(&image).expect("image");
    // The checksums were computed as the format says, or the mutations
    // below would only ever test the header.
    let (body, pages) = layout(&good);
    assert_eq!(checksum(&good[body.clone()]).to_le_bytes(), good[24..32]);
    assert_eq!(checksum(&good[pages.clone()]).to_le_bytes(), good[40..48]);
    assert_eq!(good.len(), pages.end);
    let plain = restore(&images, "seccomp", b"two\n");
    assert_eq!(
        (plain.status, plain.stdout.as_str()),
        (0, "got two\n"),
        "{}",
        show(&plain)
    );
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let payload = body.len();
    let mut tally = std::collections::BTreeMap::new();
    for round in 0..120 {
        let mut bad = good.clone();
        // Mostly the process and the VMAs' records, which come first.
        let span = if round % 4 == 0 {
            payload
        } else {
            payload.min(16 << 10)
        };
        for _ in 0..1 + next() % 4 {
            // (now and then a page: the guest's memory, not the Sentry's)
            let at = if round % 8 == 7 && !pages.is_empty() {
                pages.start + next() as usize % pages.len()
            } else {
                HEADER + (next() as usize % span)
            };
            bad[at] = match next() % 3 {
                0 => 0xff,
                1 => 0,
                _ => bad[at] ^ (1 << (next() % 8)),
            };
        }
        let sum = checksum(&bad[body.clone()]);
        bad[24..32].copy_from_slice(&sum.to_le_bytes());
        let sum = checksum(&bad[pages.clone()]);
        bad[40..48].copy_from_slice(&sum.to_le_bytes());
        std::fs::write(&image, &bad).expect("write");
        let mut cmd = command(FERROVISOR, &[]);
        cmd.args(["do", "--timeout", "10s", "--restore", &images]);
        let out = run(cmd, Some(b"two\n"), TIMEOUT);
        assert!(
            !out.stderr.contains("panicked") && !out.stderr.contains("internal error"),
            "round {round}: {}",
            show(&out)
        );
        // Refused (125), ran (0), died of a signal, or timed out.
        assert!(
            matches!(out.status, 0 | 125 | 129..=159),
            "round {round}: {}",
            show(&out)
        );
        *tally.entry(out.status).or_insert(0) += 1;
    }
    eprintln!("exit statuses of mutated restores: {tally:?}");
}

/// Files in the sandbox's /tmp, one held open at an offset: `$T` is /tmp
/// in the sandbox and a fresh directory natively.
const TMP_SCRIPT: &str = r#"
import os, sys
t = os.environ['T']
os.makedirs(t + '/a/b')
open(t + '/a/b/note', 'w').write('hello tmpfs\n')
os.symlink('b/note', t + '/a/link')
os.chmod(t + '/a/b/note', 0o640)
f = open(t + '/log', 'w+')
f.write('line one\n')
f.flush()
try:
    with open('/proc/ferrovisor/checkpoint', 'w') as c:
        c.write('save')
except FileNotFoundError:
    pass
f.write('line two\n')
f.flush()
f.seek(0)
print(f.read(), end='')
print(open(t + '/a/link').read(), end='')
print(oct(os.stat(t + '/a/b/note').st_mode), sorted(os.listdir(t)))
"#;

#[test]
fn the_sandboxs_tmp_comes_back_with_a_file_open_at_its_offset() {
    let fx = Fixture::new("ckpt-tmp");
    let native_dir = TempDir::new("ckpt-tmp-native");
    let native = {
        let mut cmd = command("python3", &[("T", native_dir.path_str())]);
        cmd.args(["-c", TMP_SCRIPT]);
        run(cmd, None, TIMEOUT)
    };
    assert_eq!(native.status, 0, "{}", show(&native));
    let images = fx.images();
    let mut cmd = command(FERROVISOR, &[("T", "/tmp")]);
    cmd.args(["do", "--save", &images, "--", "python3", "-c", TMP_SCRIPT]);
    let first = run(cmd, None, TIMEOUT);
    assert_eq!(
        (first.status, &first.stdout),
        (0, &native.stdout),
        "{}",
        show(&first)
    );
    let again = restore(&images, "seccomp", b"");
    assert_eq!(
        (again.status, &again.stdout),
        (0, &native.stdout),
        "{}",
        show(&again)
    );
}

#[test]
fn a_sandbox_with_a_network_and_a_secret_is_saved_without_the_secret() {
    let fx = Fixture::new("ckpt-secret");
    let images = fx.images();
    let value = "checkpoint-secret-value-7f3a9c";
    let mut cmd = command(FERROVISOR, &[("TOKEN", value)]);
    cmd.args([
        "do",
        "--secret",
        "API=env:TOKEN:api.test",
        "--save",
        &images,
        "--",
        "/bin/busybox",
        "sh",
        "-c",
        "echo \"$API\" > /tmp/seen; echo save > /proc/ferrovisor/checkpoint; \
         cat /proc/ferrovisor/checkpoint /etc/resolv.conf",
    ]);
    let out = run(cmd, None, TIMEOUT);
    assert_eq!(out.status, 0, "{}", show(&out));
    assert!(out.stdout.starts_with("saved\n"), "{}", show(&out));
    assert!(out.stdout.contains("nameserver"), "{}", show(&out));
    let image = std::fs::read(Path::new(&images).join("sandbox.img")).expect("image");
    let has = |s: &str| image.windows(s.len()).any(|w| w == s.as_bytes());
    // The guest's placeholder is in the image (its environment and
    // /tmp/seen), so the scan sees the guest's state; the value is not.
    assert!(has("ferrovisor-secret-"), "no placeholder in the image");
    assert!(!has(value), "the secret's value is in the image");
}

/// Whether `path` holds a whole image: its header's payload length
/// accounts for every byte after the header.
fn image_complete(path: &Path) -> bool {
    let Ok(b) = std::fs::read(path) else {
        return false;
    };
    if b.len() < HEADER || &b[..8] != b"FVSNAP\r\n" {
        return false;
    }
    let (_, pages) = layout(&b);
    b.len() == pages.end
}

/// An image's header: magic, version, flags, then the payload's length
/// and checksum and the page area's (docs/checkpoint.md).
const HEADER: usize = 48;

/// Where an image's payload and page area lie (the area starts at the
/// first page boundary after the payload).
fn layout(image: &[u8]) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
    let word = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&image[at..at + 8]);
        u64::from_le_bytes(b) as usize
    };
    let payload = HEADER..HEADER + word(16);
    let at = payload.end.div_ceil(4096) * 4096;
    (payload, at..at + word(32))
}

/// Waits (up to 20 s) for `path` to hold a whole image.
fn wait_for_image(path: &Path) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if image_complete(path) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// `SIGUSR2` to `do --save` saves a guest that is blocked reading stdin
/// (the read gives up for the save and starts again): the first run and
/// the restored copy both take their next line and go on alike.
#[test]
fn sigusr2_saves_a_process_blocked_in_a_read() {
    use std::io::{BufRead, Write};
    let dir = TempDir::new("ckpt-usr2");
    let images = dir.path().join("images");
    let script = "import sys\nn = 41\nprint('before', n, flush=True)\n\
                  line = sys.stdin.readline()\nprint('after', n + 1, line.strip(), flush=True)\n";
    let mut cmd = command(FERROVISOR, &[]);
    cmd.args(["do", "--save"])
        .arg(&images)
        .args(["--", "python3", "-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn do");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("first line");
    assert_eq!(first, "before 41\n");
    // Blocked in its read by now (or soon: the save waits for it).
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGUSR2) };
    let image = images.join("sandbox.img");
    let saved = wait_for_image(&image);
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"hello\n").expect("write stdin");
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).expect("rest");
    let status = child.wait().expect("wait do");
    assert!(saved, "no whole image in {}", image.display());
    assert_eq!(
        (status.code(), rest.as_str()),
        (Some(0), "after 42 hello\n")
    );
    let again = restore(&images.display().to_string(), "seccomp", b"world\n");
    assert_eq!(
        (again.status, again.stdout.as_str()),
        (0, "after 42 world\n"),
        "{}",
        show(&again)
    );
}

/// Python threads sleeping as the save is made, joined after, and a
/// pipe with bytes in it.
const THREADS: &str = r#"
import os, threading, time, sys
r, w = os.pipe()
os.write(w, b'queued')
results = []
def worker(n):
    time.sleep(0.3)
    results.append(n * n)
ts = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
for t in ts:
    t.start()
try:
    open('/proc/ferrovisor/checkpoint', 'w').write('x')
    state = open('/proc/ferrovisor/checkpoint').read().strip()
except FileNotFoundError:
    state = 'native'
print(state, flush=True)
for t in ts:
    t.join()
print(sorted(results), os.read(r, 100).decode(), sys.stdin.readline().strip())
"#;

/// A sandbox of several processes and threads is saved whole: a shell
/// with a child asleep (saved in its sleep, which starts again), and a
/// Python process with three threads asleep; each restored copy goes on
/// as the run that was never stopped, and as the same run natively.
#[test]
fn processes_and_threads_are_saved_and_go_on_after_restore() {
    let dir = TempDir::new("ckpt-many");
    let images = dir.path().join("images").display().to_string();
    let script = "sleep 0.3 & echo save > /proc/ferrovisor/checkpoint; \
                  cat /proc/ferrovisor/checkpoint; wait $!; echo \"child done $?\"";
    let ok = |o: &Outcome, want: &str, what: &str| {
        assert_eq!(
            (o.status, o.stdout.as_str()),
            (0, want),
            "{what}: {}",
            show(o)
        );
    };
    ok(
        &saving(&images, &["sh", "-c", script], b""),
        "saved\nchild done 0\n",
        "sh",
    );
    ok(
        &restore(&images, "seccomp", b""),
        "restored\nchild done 0\n",
        "sh restored",
    );

    let native = {
        let mut cmd = command("python3", &[]);
        cmd.args(["-c", THREADS]);
        run(cmd, Some(b"one\n"), TIMEOUT)
    };
    assert_eq!(
        native.stdout,
        "native\n[0, 1, 4] queued one\n",
        "{}",
        show(&native)
    );
    for platform in ["seccomp", "ptrace"] {
        let first = saving_on(platform, &images, &["python3", "-c", THREADS], b"one\n");
        ok(&first, "saved\n[0, 1, 4] queued one\n", platform);
        let again = restore(&images, platform, b"two\n");
        ok(&again, "restored\n[0, 1, 4] queued two\n", platform);
    }
    // The FPU state's layout is the platform's: another platform says so.
    let other = restore(&images, "seccomp", b"");
    assert_eq!(other.status, 125, "{}", show(&other));
    assert!(
        other
            .stderr
            .contains("restore with the --platform it was saved with"),
        "{}",
        show(&other)
    );
}

/// An interval timer armed before the save fires in the restored copy,
/// with the time it had left.
#[test]
fn an_armed_interval_timer_fires_after_restore() {
    let script = "import signal, time\nfired = []\n\
                  signal.signal(signal.SIGALRM, lambda s, f: fired.append(1))\n\
                  signal.setitimer(signal.ITIMER_REAL, 0.4)\n\
                  try:\n    open('/proc/ferrovisor/checkpoint', 'w').write('x')\n    \
                  state = open('/proc/ferrovisor/checkpoint').read().strip()\n\
                  except FileNotFoundError:\n    state = 'native'\n\
                  t = time.monotonic()\n\
                  while not fired and time.monotonic() - t < 5:\n    time.sleep(0.05)\n\
                  print(state, 'alarm' if fired else 'no alarm')\n";
    goes_on_as_natively("ckpt-timer", script, b"", " alarm\n", 1);
}

/// An epoll set watching a pipe, and an eventfd's count, as the save
/// left them: the restored copy sees the pipe's next byte through the
/// epoll, as the run natively does.
#[test]
fn an_epoll_set_and_an_eventfd_come_back() {
    let script = "import os, select, sys\nr, w = os.pipe()\nep = select.epoll()\n\
                  ep.register(r, select.EPOLLIN)\nev = os.eventfd(5)\nos.eventfd_write(ev, 2)\n\
                  try:\n    open('/proc/ferrovisor/checkpoint', 'w').write('x')\n    \
                  state = open('/proc/ferrovisor/checkpoint').read().strip()\n\
                  except FileNotFoundError:\n    state = 'native'\n\
                  before = ep.poll(0)\nos.write(w, b'!')\n\
                  after = [(fd == r, e) for fd, e in ep.poll(1)]\n\
                  print(state, before, after, os.eventfd_read(ev), sys.stdin.readline().strip())\n";
    goes_on_as_natively("ckpt-epoll", script, b"one\n", " [] [(True, 1)] 7 one\n", 1);
}

/// An asyncio program (its epoll, its self-pipe socketpair, a worker
/// thread of its executor) with bytes queued in a socketpair: the restored
/// copy reads them and goes on, as the run natively does.
#[test]
fn an_asyncio_program_with_a_socketpair_goes_on() {
    let script = "import asyncio, socket, sys\na, b = socket.socketpair()\n\
                  a.send(b'queued in a socket')\n\
                  async def main():\n    loop = asyncio.get_running_loop()\n    \
                  try:\n        open('/proc/ferrovisor/checkpoint', 'w').write('x')\n        \
                  state = open('/proc/ferrovisor/checkpoint').read().strip()\n    \
                  except FileNotFoundError:\n        state = 'native'\n    \
                  await asyncio.sleep(0.2)\n    data = await loop.sock_recv(b, 100)\n    \
                  line = await loop.run_in_executor(None, sys.stdin.readline)\n    \
                  print(state, data, line.strip())\nasyncio.run(main())\n";
    goes_on_as_natively(
        "ckpt-asyncio",
        script,
        b"one\n",
        " b'queued in a socket' one\n",
        2,
    );
}

/// C the guests below start with: `save()` asks the Sentry to save the
/// sandbox and says what became of it (`saved`, `restored`), or `native`
/// outside a sandbox.
const SAVE_C: &str = r#"
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
static const char *save(void) {
    static char buf[32];
    int fd = open("/proc/ferrovisor/checkpoint", O_WRONLY);
    if (fd < 0)
        return "native";
    write(fd, "x", 1);
    close(fd);
    fd = open("/proc/ferrovisor/checkpoint", O_RDONLY);
    read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[strcspn(buf, "\n")] = 0;
    return buf;
}
"#;

/// A System V semaphore set (its values, its `SEM_UNDO` adjustment) as
/// the save left it; a semop after the restore sees the saved value.
const SEM_C: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/sem.h>
#include <unistd.h>
int main(void) {
    int id = semget(0x5eed, 2, IPC_CREAT | 0600);
    struct sembuf up = {0, 3, SEM_UNDO}, other = {1, 7, 0};
    semop(id, &up, 1);
    semop(id, &other, 1);
    const char *state = save();
    struct sembuf down = {0, -1, 0};
    semop(id, &down, 1);
    printf("%s %d %d %d\n", state, semget(0x5eed, 0, 0) == id, semctl(id, 0, GETVAL),
           semctl(id, 1, GETVAL));
    semctl(id, 0, IPC_RMID);
    return 0;
}
"#;

#[test]
fn a_system_v_semaphore_set_comes_back() {
    let dir = TempDir::new("ckpt-sem");
    let bin = common::compile_static(dir.path(), "sem", &format!("{SAVE_C}{SEM_C}"));
    let bin = bin.display().to_string();
    // (natively in an IPC namespace of its own: the host's stays as it was)
    let mut cmd = command("unshare", &[]);
    cmd.args(["--ipc", &bin]);
    let native = run(cmd, None, TIMEOUT);
    assert_eq!(native.stdout, "native 1 2 7\n", "{}", show(&native));
    let images = dir.path().join("images").display().to_string();
    let first = saving(&images, &[&bin], b"");
    assert_eq!(first.stdout, "saved 1 2 7\n", "{}", show(&first));
    let again = restore(&images, "seccomp", b"");
    assert_eq!(again.stdout, "restored 1 2 7\n", "{}", show(&again));
}

/// A System V message queue with two messages of two types queued, as
/// the save left it: after the restore, the second type is taken first,
/// then the first, and the queue's counts and limits are as saved.
const MSG_C: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/msg.h>
#include <unistd.h>
struct m { long type; char text[32]; };
int main(void) {
    int id = msgget(0x5eed, IPC_CREAT | 0640);
    struct m a = {1, "first"}, b = {2, "second"}, got;
    msgsnd(id, &a, 6, 0);
    msgsnd(id, &b, 7, 0);
    struct msqid_ds ds;
    msgctl(id, IPC_STAT, &ds);
    ds.msg_qbytes = 4000;
    msgctl(id, IPC_SET, &ds);
    const char *state = save();
    msgctl(id, IPC_STAT, &ds);
    printf("%s %d %lu %lu %lu %o", state, msgget(0x5eed, 0) == id, (unsigned long)ds.msg_qnum,
           (unsigned long)ds.msg_cbytes, (unsigned long)ds.msg_qbytes, ds.msg_perm.mode & 0777);
    long n = msgrcv(id, &got, sizeof got.text, 2, IPC_NOWAIT);
    printf(" %ld %s", n, got.text);
    n = msgrcv(id, &got, sizeof got.text, 0, IPC_NOWAIT);
    printf(" %ld %s", n, got.text);
    n = msgrcv(id, &got, sizeof got.text, 0, IPC_NOWAIT);
    printf(" %ld\n", n);
    msgctl(id, IPC_RMID, NULL);
    return 0;
}
"#;

/// A timerfd armed before the save fires after the restore, within what
/// it had left; a signalfd reads the signal left pending at the save.
const TIMERFD_C: &str = r#"
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
int main(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = signalfd(-1, &set, 0);
    int tfd = timerfd_create(CLOCK_MONOTONIC, 0);
    struct itimerspec it = {{0, 0}, {0, 300000000}};
    timerfd_settime(tfd, 0, &it, NULL);
    raise(SIGUSR1);
    const char *state = save();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct itimerspec left;
    timerfd_gettime(tfd, &left);
    struct signalfd_siginfo si;
    long n = read(sfd, &si, sizeof si);
    uint64_t fired = 0;
    read(tfd, &fired, sizeof fired);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double waited = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%s sig %ld %u fired %llu left<=300ms %d waited<1s %d\n", state, n, si.ssi_signo,
           (unsigned long long)fired, left.it_value.tv_sec == 0, waited < 1.0);
    return 0;
}
"#;

#[test]
fn a_timerfd_and_a_signalfd_come_back() {
    let dir = TempDir::new("ckpt-tfd");
    let bin = common::compile_static(dir.path(), "tfd", &format!("{SAVE_C}{TIMERFD_C}"));
    let bin = bin.display().to_string();
    let native = run(command(&bin, &[]), None, TIMEOUT);
    let rest = " sig 128 10 fired 1 left<=300ms 1 waited<1s 1\n";
    assert_eq!(native.stdout, format!("native{rest}"), "{}", show(&native));
    let images = dir.path().join("images").display().to_string();
    let first = saving(&images, &[&bin], b"");
    assert_eq!(first.stdout, format!("saved{rest}"), "{}", show(&first));
    let again = restore(&images, "seccomp", b"");
    assert_eq!(again.stdout, format!("restored{rest}"), "{}", show(&again));
}

#[test]
fn a_system_v_message_queue_comes_back_with_its_messages() {
    let dir = TempDir::new("ckpt-msg");
    let bin = common::compile_static(dir.path(), "msg", &format!("{SAVE_C}{MSG_C}"));
    let bin = bin.display().to_string();
    // (natively in an IPC namespace of its own: the host's stays as it was)
    let mut cmd = command("unshare", &[]);
    cmd.args(["--ipc", &bin]);
    let native = run(cmd, None, TIMEOUT);
    let rest = " 1 2 13 4000 640 7 second 6 first -1\n";
    assert_eq!(native.stdout, format!("native{rest}"), "{}", show(&native));
    let images = dir.path().join("images").display().to_string();
    let first = saving(&images, &[&bin], b"");
    assert_eq!(first.stdout, format!("saved{rest}"), "{}", show(&first));
    for _ in 0..2 {
        let again = restore(&images, "seccomp", b"");
        assert_eq!(again.stdout, format!("restored{rest}"), "{}", show(&again));
    }
}

/// A TCP socket listening on the sandbox's loopback listens again on the
/// same port in the restored copy, and takes a connection there.
#[test]
fn a_listening_loopback_socket_listens_again() {
    let script = "import socket, sys\nsrv = socket.socket()\nsrv.bind(('127.0.0.1', 0))\n\
                  srv.listen()\nport = srv.getsockname()[1]\n\
                  try:\n    open('/proc/ferrovisor/checkpoint', 'w').write('x')\n    \
                  state = open('/proc/ferrovisor/checkpoint').read().strip()\n\
                  except FileNotFoundError:\n    state = 'native'\n\
                  c = socket.create_connection(('127.0.0.1', port))\nc.sendall(b'hello')\n\
                  conn, _ = srv.accept()\n\
                  print(state, conn.recv(100), port == srv.getsockname()[1])\n";
    goes_on_as_natively("ckpt-listen", script, b"", " b'hello' True\n", 1);
}

/// A pty pair with bytes queued both ways, a half-typed line, its own
/// settings and window size, and a child whose controlling terminal it
/// is, blocked reading it: after the restore the child reads the whole
/// line and is still the terminal's foreground, as natively.
#[test]
fn a_pty_and_its_line_discipline_come_back() {
    let script = "import fcntl, os, struct, termios\nm, s = os.openpty()\n\
                  name = os.ttyname(s)\na = termios.tcgetattr(s)\na[3] &= ~termios.ECHO\n\
                  termios.tcsetattr(s, termios.TCSANOW, a)\n\
                  fcntl.ioctl(m, termios.TIOCSWINSZ, struct.pack('HHHH', 24, 80, 0, 0))\n\
                  os.write(m, b'half a ')\nos.write(s, b'from the slave\\n')\nr, w = os.pipe()\n\
                  pid = os.fork()\nif pid == 0:\n    os.setsid()\n    t = os.open(name, os.O_RDWR)\n    \
                  os.write(w, b'ready')\n    got = os.read(os.open('/dev/tty', os.O_RDONLY), 100)\n    \
                  fg = os.tcgetpgrp(t) == os.getpid()\n    os.write(w, got + (b'fg' if fg else b'bg'))\n    \
                  os._exit(0)\nos.read(r, 5)\n\
                  try:\n    open('/proc/ferrovisor/checkpoint', 'w').write('x')\n    \
                  state = open('/proc/ferrovisor/checkpoint').read().strip()\n\
                  except FileNotFoundError:\n    state = 'native'\n\
                  os.write(m, b'line\\n')\nos.waitpid(pid, 0)\n\
                  print(state, os.read(r, 100), os.read(m, 100), os.ttyname(s) == name,\n      \
                  tuple(os.get_terminal_size(s)), termios.tcgetattr(s)[3] & termios.ECHO)\n";
    goes_on_as_natively(
        "ckpt-pty",
        script,
        b"",
        " b'half a line\\nfg' b'from the slave\\r\\n' True (80, 24) 0\n",
        2,
    );
}

/// A sandbox saved at a terminal (its standard descriptors the
/// terminal's pty) and restored without one writes to the restoring
/// caller's standard output instead.
#[test]
fn saved_at_a_terminal_restored_without_one_uses_the_callers_stdio() {
    let dir = TempDir::new("ckpt-console");
    let images = dir.path().join("images").display().to_string();
    let guest = "import os, sys\n\
                 open('/proc/ferrovisor/checkpoint', 'w').write('x')\n\
                 state = open('/proc/ferrovisor/checkpoint').read().strip()\n\
                 line = sys.stdin.readline().strip() if state == 'restored' else 'no read'\n\
                 print(state, os.isatty(1), line)";
    // (the run at the terminal reads nothing: `script` may pass on its
    // stdin's end too late, or never)
    let line = format!("{FERROVISOR} do --save {images} -- python3 -c \"{guest}\"");
    let mut cmd = command("script", &[]);
    cmd.args(["-qec", &line, "/dev/null"]);
    let at_tty = run(cmd, Some(b""), TIMEOUT);
    assert!(at_tty.stdout.contains("saved True"), "{}", show(&at_tty));
    let again = restore(&images, "seccomp", b"from the caller\n");
    assert_eq!(
        again.stdout,
        "restored False from the caller\n",
        "{}",
        show(&again)
    );
}

/// Runs Python `script` natively, then saving (`do --save`) and restored
/// `restores` times, each with `stdin`: every run prints its state
/// (`native`, `saved`, `restored`) and then `rest`, as the script reads
/// it from /proc/ferrovisor/checkpoint.
fn goes_on_as_natively(tag: &str, script: &str, stdin: &[u8], rest: &str, restores: usize) {
    let native = {
        let mut cmd = command("python3", &[]);
        cmd.args(["-c", script]);
        run(cmd, Some(stdin), TIMEOUT)
    };
    assert_eq!(native.stdout, format!("native{rest}"), "{}", show(&native));
    let dir = TempDir::new(tag);
    let images = dir.path().join("images").display().to_string();
    let first = saving(&images, &["python3", "-c", script], stdin);
    assert_eq!(first.stdout, format!("saved{rest}"), "{}", show(&first));
    for _ in 0..restores {
        let again = restore(&images, "seccomp", stdin);
        assert_eq!(again.stdout, format!("restored{rest}"), "{}", show(&again));
    }
}

/// A guest with 64 MiB of random bytes that says their digest, saves
/// itself (when it can), then overwrites a byte of every page if told
/// `write` and says the digest again.
const SHARE_SCRIPT: &str = r#"
import hashlib, os, sys
b = bytearray(os.urandom(1 << 20)) * 64
digest = lambda: hashlib.sha256(b).hexdigest()[:16]
try:
    with open('/proc/ferrovisor/checkpoint', 'w') as c:
        c.write('save')
except FileNotFoundError:
    pass
print('ready', digest(), flush=True)
if sys.stdin.readline().strip() == 'write':
    b[::4096] = bytes(len(b) // 4096)
print('sum', digest(), flush=True)
"#;

/// `pid` and every process below it.
fn tree(pid: u32) -> Vec<u32> {
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", all[i]));
        for t in tasks.into_iter().flatten().flatten() {
            let kids = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            all.extend(
                kids.split_whitespace()
                    .filter_map(|k| k.parse::<u32>().ok()),
            );
        }
        i += 1;
    }
    all
}

/// Memory the processes of `pid`'s tree hold of their own, in KiB: their
/// proportional share of anonymous and shared memory (the memory file is
/// shared memory), leaving out cached pages of files (the image's).
fn own_memory_kib(pid: u32) -> u64 {
    tree(pid)
        .iter()
        .map(|p| {
            let rollup = std::fs::read_to_string(format!("/proc/{p}/smaps_rollup"));
            rollup
                .unwrap_or_default()
                .lines()
                .filter(|l| l.starts_with("Pss_Anon:") || l.starts_with("Pss_Shmem:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// Two sandboxes restored from one image share its pages: each holds far
/// less memory of its own than its guest's 64 MiB, on both platforms,
/// and what one guest writes the other never sees.
#[test]
fn restored_sandboxes_share_the_images_pages_until_they_write() {
    use std::io::{BufRead, BufReader, Write};
    let fx = Fixture::new("ckpt-share");
    let images = fx.images();
    for platform in ["seccomp", "ptrace"] {
        let first = saving_on(
            platform,
            &images,
            &["python3", "-c", SHARE_SCRIPT],
            b"keep\n",
        );
        assert_eq!(first.status, 0, "{platform}: {}", show(&first));
        let lines: Vec<&str> = first.stdout.lines().collect();
        let digest = lines[0].strip_prefix("ready ").expect("a digest");
        assert_eq!(lines.get(1), Some(&format!("sum {digest}").as_str()));
        let mut copies = Vec::new();
        for _ in 0..2 {
            let mut cmd = command(FERROVISOR, &[]);
            cmd.args(["do", "--platform", platform, "--restore", &images]);
            cmd.stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null());
            let mut child = cmd.spawn().expect("spawn");
            let mut out = BufReader::new(child.stdout.take().expect("stdout"));
            let mut line = String::new();
            out.read_line(&mut line).expect("first line");
            assert_eq!(line.trim(), format!("ready {digest}"), "{platform}");
            copies.push((child, out));
        }
        for (child, _) in &copies {
            let own = own_memory_kib(child.id());
            eprintln!("{platform}: a restored sandbox holds {own} KiB of its own");
            assert!(own < 32 << 10, "{platform}: {own} KiB of its own");
        }
        let mut said = Vec::new();
        for ((mut child, mut out), word) in copies.into_iter().zip(["write", "keep"]) {
            let mut stdin = child.stdin.take().expect("stdin");
            writeln!(stdin, "{word}").expect("tell");
            drop(stdin);
            let mut line = String::new();
            out.read_line(&mut line).expect("last line");
            assert!(child.wait().expect("wait").success(), "{platform}");
            said.push(line.trim().to_string());
        }
        assert_ne!(said[0], format!("sum {digest}"), "{platform}: the write");
        assert_eq!(
            said[1],
            format!("sum {digest}"),
            "{platform}: the other copy"
        );
    }
}
