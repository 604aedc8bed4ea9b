//! The Sentry's own memory does not grow with the lengths a guest passes:
//! a guest `write`s 512 MiB in one call to a Unix socket and to a TCP
//! connection whose readers wait before reading, and to a tmpfs file, then
//! reads it back in one call; meanwhile the sandbox's processes' anonymous
//! memory (`RssAnon`, the Sentry's heap: guest memory is the memory file,
//! shared memory, and does not count) is sampled and must stay far below
//! the transfer (ARCHITECTURE.md, "Limits that hold at any size").

mod common;

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{command, compile_static, TempDir};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");

/// The guest: 512 MiB per call, each stream's reader sleeping 2 s first so
/// that the writer is blocked with most of the call still to go.
const GUEST: &str = r#"
#define _GNU_SOURCE
#include <netinet/in.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define N (512L << 20)

/* A child that reads `fd` to its end, after 2 s; `other` is the writer's
 * end, which it must close for that end to come. */
static int drain_later(int fd, int other)
{
	pid_t pid = fork();
	if (pid == 0) {
		close(other);
		static char r[1 << 20];
		long got = 0;
		ssize_t k;
		sleep(2);
		while ((k = read(fd, r, sizeof r)) > 0)
			got += k;
		_exit(got == N ? 0 : 1);
	}
	return pid;
}

static int ok(pid_t pid)
{
	int st = 0;
	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	char *b = mmap(NULL, N, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b == MAP_FAILED)
		return 2;
	memset(b, 'x', N);

	int s[2];
	socketpair(AF_UNIX, SOCK_STREAM, 0, s);
	pid_t r = drain_later(s[1], s[0]);
	close(s[1]);
	printf("unix write %ld\n", (long)write(s[0], b, N));
	close(s[0]);
	printf("unix reader %d\n", ok(r));

	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof a;
	bind(l, (struct sockaddr *)&a, sizeof a);
	listen(l, 1);
	getsockname(l, (struct sockaddr *)&a, &alen);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	connect(c, (struct sockaddr *)&a, sizeof a);
	int acc = accept(l, NULL, NULL);
	r = drain_later(acc, c);
	close(acc);
	printf("tcp send %ld\n", (long)send(c, b, N, 0));
	close(c);
	printf("tcp reader %d\n", ok(r));

	int f = open("/tmp/big", O_RDWR | O_CREAT | O_TRUNC, 0600);
	unlink("/tmp/big");
	printf("tmpfs write %ld\n", (long)write(f, b, N));
	printf("tmpfs read %ld\n", (long)pread(f, b, N, 0));
	printf("tmpfs data %d\n", b[0] == 'x' && b[N - 1] == 'x');
	return 0;
}
"#;

const EXPECTED: &str = "unix write 536870912\nunix reader 1\n\
                        tcp send 536870912\ntcp reader 1\n\
                        tmpfs write 536870912\ntmpfs read 536870912\ntmpfs data 1\n";

/// Most anonymous memory the sandbox's processes may hold together at any
/// moment: a quarter of one transfer. The Sentry's baseline is a few MiB
/// and its staging buffers are 64 KiB each; a buffer the guest's size
/// would be 512 MiB.
const LIMIT_KB: u64 = 128 << 10;

/// `RssAnon` (KiB) summed over `root` and every process below it.
fn tree_rss_anon_kb(root: u32) -> u64 {
    let mut parent: HashMap<u32, u32> = HashMap::new();
    let mut anon: HashMap<u32, u64> = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        for line in status.lines() {
            let mut it = line.split_whitespace();
            match it.next() {
                Some("PPid:") => {
                    if let Some(p) = it.next().and_then(|v| v.parse().ok()) {
                        parent.insert(pid, p);
                    }
                }
                Some("RssAnon:") => {
                    if let Some(k) = it.next().and_then(|v| v.parse().ok()) {
                        anon.insert(pid, k);
                    }
                }
                _ => {}
            }
        }
    }
    let below = |mut p: u32| {
        for _ in 0..64 {
            if p == root {
                return true;
            }
            match parent.get(&p) {
                Some(&q) if q != p => p = q,
                _ => return false,
            }
        }
        false
    };
    anon.iter()
        .filter(|(&p, _)| below(p))
        .map(|(_, &k)| k)
        .sum()
}

fn run_and_sample(platform: &str, guest: &Path) -> (String, u64) {
    let mut cmd = command(FERROVISOR, &[]);
    cmd.args(["do", "--platform", platform, "--"])
        .arg(guest)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn ferrovisor");
    let pid = child.id();
    // Sampled every 20 ms while it runs; a hung run is killed and fails.
    // Its output is a few lines, which the pipes hold until the end.
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut peak = 0;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for ferrovisor") {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("--platform {platform}: ferrovisor still running after 240 s");
        }
        peak = peak.max(tree_rss_anon_kb(pid));
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .expect("piped stdout")
        .read_to_string(&mut stdout)
        .expect("read stdout");
    child
        .stderr
        .take()
        .expect("piped stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    assert!(
        status.success(),
        "--platform {platform}: ferrovisor failed: {status:?}\n{stderr}"
    );
    (stdout, peak)
}

#[test]
fn half_gib_transfers_do_not_grow_the_sentry() {
    let dir = TempDir::new("guest-buffers");
    let guest = compile_static(dir.path(), "big_write", GUEST);
    for platform in ["seccomp", "ptrace"] {
        let (stdout, peak_kb) = run_and_sample(platform, &guest);
        assert_eq!(stdout, EXPECTED, "--platform {platform}: guest output");
        // The sampler saw the sandbox at all (a zero would mean it looked
        // at the wrong processes and proved nothing).
        assert!(peak_kb > 0, "--platform {platform}: no RssAnon sampled");
        assert!(
            peak_kb < LIMIT_KB,
            "--platform {platform}: the sandbox's anonymous memory peaked at \
             {peak_kb} KiB during 512 MiB transfers (limit {LIMIT_KB} KiB)"
        );
        eprintln!("--platform {platform}: peak RssAnon {peak_kb} KiB");
    }
}
