//! Networking inside one sandbox over its own loopback (issue 7, point 5),
//! and attacks on the loopback-only default that must fail (point 6).
//!
//! Programs that print only deterministic facts run natively and under
//! `ferrovisor do` and must agree. Where the data is random (the 100 MB `nc`
//! transfer) the run compares checksums itself and prints the verdict. The
//! attack tests run only in the sandbox: natively the host's network would
//! answer differently, which is the point.

mod common;

use std::net::{TcpListener, UdpSocket};
use std::time::Duration;

use common::{command, run, Outcome, TempDir};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const TIMEOUT: Duration = Duration::from_secs(90);
const PYTHON: &[&str] = &["/usr/bin/python3", "-I", "-c"];

fn native(argv: &[&str]) -> Outcome {
    let mut cmd = command(argv[0], &[]);
    cmd.args(&argv[1..]);
    run(cmd, None, TIMEOUT)
}

fn sandboxed(argv: &[&str]) -> Outcome {
    let mut cmd = command(FERROVISOR, &[]);
    cmd.arg("do").arg("--").args(argv);
    run(cmd, None, TIMEOUT)
}

/// Native first (it must exit 0 and print `must_contain`, else the test is
/// wrong), then the sandbox: equal stdout and status.
fn compare(label: &str, argv: &[&str], must_contain: &str) {
    let nat = native(argv);
    assert!(
        nat.status == 0 && nat.stdout.contains(must_contain),
        "{label}: the NATIVE run exited {} without {must_contain:?}, so the test is wrong\n\
         stdout:\n{}stderr:\n{}",
        nat.status,
        nat.stdout,
        nat.stderr
    );
    let sb = sandboxed(argv);
    if nat.stdout != sb.stdout || nat.status != sb.status {
        panic!(
            "{label}: sandbox differs from native\nexit status: native {} / sandbox {}\n\
             --- native stdout ---\n{}--- sandbox stdout ---\n{}--- sandbox stderr ---\n{}",
            nat.status, sb.status, nat.stdout, sb.stdout, sb.stderr
        );
    }
}

/// Runs `argv` under `ferrovisor do --network sandbox` (with `eth0`).
fn sandboxed_with_link(argv: &[&str]) -> Outcome {
    let mut cmd = command(FERROVISOR, &[]);
    cmd.args(["do", "--network", "sandbox", "--"]).args(argv);
    run(cmd, None, TIMEOUT)
}

/// Asserts that `sb` exited 0 and printed `expected`; `what` names how it
/// differs otherwise.
fn assert_exits_0_with(sb: &Outcome, expected: &str, what: &str) {
    assert_eq!(
        (sb.status, sb.stdout.as_str()),
        (0, expected),
        "{what}; stderr: {}",
        sb.stderr
    );
}

fn python(script: &str, args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = PYTHON.iter().map(|s| s.to_string()).collect();
    v.push(script.to_owned());
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

fn as_strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

// ---- real programs over the sandbox's loopback --------------------------------

const HTTP_SERVER_AND_CLIENT: &str = r#"
import functools, hashlib, http.server, socket, sys, threading, urllib.request, urllib.error
root = sys.argv[1]
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass
class V6Server(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6
def serve(cls, host):
    srv = cls((host, 0), functools.partial(Quiet, directory=root))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv
for cls, host, fmt in ((http.server.ThreadingHTTPServer, "127.0.0.1", "http://127.0.0.1:%d/%s"),
                       (V6Server, "::1", "http://[::1]:%d/%s")):
    srv = serve(cls, host)
    port = srv.server_address[1]
    print("== serving on", host)
    for name in ("hello.txt", "sub/data.bin", "big.bin"):
        with urllib.request.urlopen(fmt % (port, name), timeout=20) as r:
            body = r.read()
            print(name, r.status, r.headers["Content-Length"], len(body), hashlib.sha256(body).hexdigest()[:16])
    try:
        urllib.request.urlopen(fmt % (port, "missing"), timeout=20)
    except urllib.error.HTTPError as e:
        print("missing", e.code)
    with urllib.request.urlopen(fmt % (port, "sub/"), timeout=20) as r:
        listing = r.read().decode()
        print("listing has data.bin", "data.bin" in listing)
    # Ten requests at once from threads.
    res = []
    def get():
        with urllib.request.urlopen(fmt % (port, "hello.txt"), timeout=20) as r:
            res.append(r.read())
    ts = [threading.Thread(target=get) for _ in range(10)]
    for t in ts: t.start()
    for t in ts: t.join()
    print("concurrent", len(res), len(set(res)))
    srv.shutdown()
    srv.server_close()
print("done")
"#;

#[test]
fn python_http_server_and_urllib_over_v4_and_v6_loopback() {
    let dir = TempDir::new("http");
    std::fs::create_dir_all(dir.path().join("sub")).expect("mkdir");
    std::fs::write(dir.path().join("hello.txt"), b"hello over http\n").expect("write");
    let data: Vec<u8> = (0..70_000u32).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(dir.path().join("sub/data.bin"), &data).expect("write");
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i ^ (i >> 7)) as u8).collect();
    std::fs::write(dir.path().join("big.bin"), &big).expect("write");
    let argv = python(HTTP_SERVER_AND_CLIENT, &[dir.path_str()]);
    compare("http.server + urllib", &as_strs(&argv), "done");
}

/// 100 MB of random data through busybox `nc` over TCP loopback: the
/// receiver's checksum equals the sender's. Both ends exit on their own (the
/// sender half-closes at EOF; the listener's `-e` program ends at EOF and
/// closes the connection).
const NC_100MB: &str = r#"
set -e
port=$1
d=$(mktemp -d)
head -c 100000000 /dev/urandom > $d/in
/bin/busybox nc -l -p $port -e /bin/busybox sh -c "cat > $d/out" &
listener=$!
# The listener may not be listening yet: retry while the connect is refused
# (a refused nc sends nothing).
i=0
until /bin/busybox nc 127.0.0.1 $port < $d/in 2>/dev/null; do
  i=$((i + 1)); [ $i -lt 100 ] || { echo "never connected"; exit 1; }
  sleep 0.05
done
wait $listener
echo "listener exit $?"
a=$(sha256sum < $d/in); b=$(sha256sum < $d/out)
[ "$a" = "$b" ] && echo "checksum unchanged" || echo "checksum CHANGED"
wc -c < $d/out
rm -rf $d
"#;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("pick a free port")
}

#[test]
fn busybox_nc_pipes_100mb_over_tcp_loopback() {
    let expected = "listener exit 0\nchecksum unchanged\n100000000\n";
    let port = free_port().to_string();
    let argv = ["/bin/busybox", "sh", "-c", NC_100MB, "nc100", &port];
    let nat = native(&argv);
    assert_eq!(
        (nat.status, nat.stdout.as_str()),
        (0, expected),
        "the NATIVE run disagrees, so the test is wrong; stderr: {}",
        nat.stderr
    );
    // Inside the sandbox the loopback is its own: any port works.
    let sb = sandboxed(&argv);
    assert_exits_0_with(&sb, expected, "sandbox differs from native");
}

const ASYNCIO_ECHO: &str = r#"
import asyncio, hashlib, resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < 1024:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
CLIENTS, MESSAGES = 200, 10
async def handle(reader, writer):
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            writer.write(line.upper())
            await writer.drain()
    finally:
        writer.close()
async def client(host, port, n):
    reader, writer = await asyncio.open_connection(host, port)
    got = []
    for m in range(MESSAGES):
        writer.write(b"client %d message %d %s\n" % (n, m, b"x" * (n % 50)))
        await writer.drain()
        got.append(await reader.readline())
    writer.close()
    await writer.wait_closed()
    return b"".join(got)
async def main():
    for host in ("127.0.0.1", "::1"):
        server = await asyncio.start_server(handle, host, 0, backlog=256)
        port = server.sockets[0].getsockname()[1]
        replies = await asyncio.wait_for(
            asyncio.gather(*(client(host, port, n) for n in range(CLIENTS))), 60)
        ok = all(r == b"".join(b"CLIENT %d MESSAGE %d %s\n" % (n, m, b"X" * (n % 50))
                               for m in range(MESSAGES)) for n, r in enumerate(replies))
        print(host, "clients", len(replies), "all echoed", ok,
              "digest", hashlib.sha256(b"".join(replies)).hexdigest()[:16])
        server.close()
        await server.wait_closed()
asyncio.run(main())
print("done")
"#;

#[test]
fn python_asyncio_echo_server_with_200_clients() {
    let argv = python(ASYNCIO_ECHO, &[]);
    compare("asyncio echo x200", &as_strs(&argv), "all echoed True");
}

/// TCP and UDP basics between processes of the same sandbox: a forked
/// server, `SO_REUSEADDR`, `getsockname`/`getpeername` relations, shutdown,
/// and connection refused on a closed port.
const TCP_UDP_BASICS: &str = r#"
import os, socket, errno
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0)); srv.listen(8)
port = srv.getsockname()[1]
pid = os.fork()
if pid == 0:
    c, peer = srv.accept()
    data = b""
    while True:
        chunk = c.recv(65536)
        if not chunk: break
        data += chunk
    c.sendall(b"got %d" % len(data)); c.close(); os._exit(0)
cli = socket.create_connection(("127.0.0.1", port))
print("peer is server", cli.getpeername() == ("127.0.0.1", port))
print("local is loopback", cli.getsockname()[0])
cli.sendall(b"z" * 1000000); cli.shutdown(socket.SHUT_WR)
print(cli.recv(100)); cli.close()
print("child", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
srv.close()
s = socket.socket()
try:
    s.connect(("127.0.0.1", port))
except OSError as e:
    print("closed port", errno.errorcode[e.errno])
u1 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u1.bind(("127.0.0.1", 0))
u2 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u2.sendto(b"datagram", u1.getsockname())
data, addr = u1.recvfrom(100)
print("udp", data, addr == u2.getsockname())
print("done")
"#;

#[test]
fn python_tcp_and_udp_between_processes() {
    let argv = python(TCP_UDP_BASICS, &[]);
    compare("tcp/udp basics", &as_strs(&argv), "done");
}

/// `ip addr`, `ip route`, `ip -6 route` and `ip link` (iproute2 over the
/// Sentry's netlink route sockets, issue 7 point 2) print what they print
/// natively in a fresh network namespace with its loopback up, which is
/// what the sandbox's loopback-only network is.
#[test]
fn ip_addr_route_and_link_print_what_a_fresh_namespace_does() {
    let script = "PATH=/usr/sbin:/usr/bin:/sbin:/bin; ip addr; echo --; ip route; echo --; \
                  ip -6 route; echo --; ip link; echo --; ip -o -4 addr show dev lo; echo --; \
                  ip route show table local; echo --; ip -6 route show table local; echo --; \
                  busybox ip addr; echo --; busybox ip route; echo --; cat /proc/net/dev; \
                  echo --; cat /proc/net/if_inet6; echo --; cat /proc/net/route; echo --; \
                  ip route get 127.0.0.1; ip -6 route get ::1; ip route get 1.1.1.1 2>&1; true";
    let nat = native(&[
        "/usr/bin/unshare",
        "-n",
        "/bin/sh",
        "-c",
        &format!("/usr/sbin/ip link set lo up && {{ {script}; }}"),
    ]);
    assert!(
        nat.status == 0 && nat.stdout.contains("inet 127.0.0.1/8 scope host lo"),
        "the NATIVE run is wrong: {nat:?}"
    );
    let sb = sandboxed(&["/bin/sh", "-c", script]);
    assert_exits_0_with(&sb, &nat.stdout, "sandbox differs from a fresh namespace");
}

/// `--network sandbox`: the guest's interface out, `eth0`, with the
/// netstack's address and a default route through it. Its IPv4 routes
/// (main and local tables, and /proc/net/route) are what Linux shows for a
/// namespace holding the same link; IPv6 is left out (Linux adds a
/// link-local address the netstack does not have).
#[test]
fn sandbox_network_routes_are_those_of_a_namespace_with_the_same_link() {
    let script = "PATH=/usr/sbin:/usr/bin:/sbin:/bin; ip route; echo --; \
                  ip route show table local; echo --; cat /proc/net/route; echo --; \
                  ip -o -4 addr show dev eth0 | sed 's/^[0-9]*: //'; echo --; \
                  for a in 1.1.1.1 10.0.2.7 10.0.2.15 127.0.0.5 10.0.2.255 224.0.0.1; do \
                  ip route get $a; done; ip route get 10.0.3.1 from 10.0.2.15; \
                  ip route get 1.1.1.1 from 9.9.9.9 2>&1; busybox ip route get 1.1.1.1";
    let nat = native(&[
        "/usr/bin/unshare",
        "-n",
        "/bin/sh",
        "-c",
        &format!(
            "ip link set lo up && ip link add eth0 type veth peer name p0 && \
             ip link set p0 up && ip addr add 10.0.2.15/24 dev eth0 && ip link set eth0 up && \
             ip route add default dev eth0 && {{ {script}; }}"
        ),
    ]);
    assert!(
        nat.status == 0 && nat.stdout.contains("default dev eth0 scope link"),
        "the NATIVE run is wrong: {nat:?}"
    );
    let sb = sandboxed_with_link(&["/bin/sh", "-c", script]);
    assert_exits_0_with(
        &sb,
        &nat.stdout,
        "sandbox differs from a namespace with the same link",
    );
}

/// Python: binds, listens, connects and exchanges datagrams on the
/// interface address (`10.0.2.15`, `fd00::15`) with argument `sandbox`;
/// with `none`, only the binds, which must fail there. Binding an address
/// the network does not have is `EADDRNOTAVAIL` in both.
const BIND_OWN_ADDRESS: &str = r#"
import errno, socket, sys
def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))
mode = sys.argv[1]
# An IPv4 socket bound to loopback has no route out (EINVAL where a route
# exists, ENETUNREACH where none does).
for ty, tn in ((socket.SOCK_STREAM, "tcp"), (socket.SOCK_DGRAM, "udp")):
    s = socket.socket(socket.AF_INET, ty)
    s.bind(("127.0.0.1", 0))
    s.setblocking(False)
    try:
        s.connect(("192.0.2.1", 80))
        print(tn, "out from loopback ok")
    except OSError as e:
        print(tn, "out from loopback", name(e))
    s.close()
for fam, addr, other, lo in ((socket.AF_INET, "10.0.2.15", "10.0.2.16", "127.0.0.1"),
                             (socket.AF_INET6, "fd00::15", "fd00::16", "::1")):
    for ty, tn in ((socket.SOCK_STREAM, "tcp"), (socket.SOCK_DGRAM, "udp")):
        for a in ((addr, other) if mode == "none" else (other,)):
            s = socket.socket(fam, ty)
            try:
                s.bind((a, 0))
                print(tn, "bind", a, "ok")
            except OSError as e:
                print(tn, "bind", a, name(e))
            s.close()
    if mode == "none":
        continue
    # TCP: a listener on the address; a client unbound, one bound there.
    l = socket.socket(fam)
    l.bind((addr, 0))
    l.listen(4)
    la = l.getsockname()
    print("listen on", la[0], la[1] > 0)
    c1 = socket.socket(fam)
    c1.connect(la[:2])
    a1, p1 = l.accept()
    print("unbound client", c1.getsockname()[0], "to", c1.getpeername()[0],
          "accepted from", p1[0], "at", a1.getsockname()[0])
    c1.sendall(b"ping")
    print("tcp", a1.recv(10))
    a1.sendall(b"pong")
    print("tcp", c1.recv(10))
    c2 = socket.socket(fam)
    c2.bind((addr, 0))
    c2.connect(la[:2])
    a2, p2 = l.accept()
    print("bound client", c2.getsockname()[0], p2[0], p2[1] == c2.getsockname()[1])
    # The loopback listener is not at the address, and the other way round.
    ll = socket.socket(fam)
    ll.bind((lo, la[1]))
    ll.listen(1)
    print("same port on", ll.getsockname()[0])
    c3 = socket.socket(fam)
    c3.bind((addr, 0))
    c3.connect(ll.getsockname()[:2])
    a3, p3 = ll.accept()
    print("to loopback from", p3[0], "at", a3.getsockname()[0])
    dup = socket.socket(fam)
    try:
        dup.bind(la[:2])
        print("second bind ok")
    except OSError as e:
        print("second bind", name(e))
    # A wildcard listener is reached at the address.
    w = socket.socket(fam)
    w.bind(("", 0))
    w.listen(1)
    c4 = socket.socket(fam)
    c4.connect((addr, w.getsockname()[1]))
    a4, p4 = w.accept()
    print("wildcard accepted from", p4[0], "at", a4.getsockname()[0])
    # UDP on the address, both ways.
    u = socket.socket(fam, socket.SOCK_DGRAM)
    u.bind((addr, 0))
    ua = u.getsockname()
    print("udp bound", ua[0])
    v = socket.socket(fam, socket.SOCK_DGRAM)
    v.sendto(b"ping", ua[:2])
    d, f = u.recvfrom(100)
    print("udp", d, "from", f[0])
    u.sendto(b"pong", f)
    d, f = v.recvfrom(100)
    print("udp", d, "from", f[0], f[1] == ua[1], v.getsockname()[0])
    x = socket.socket(fam, socket.SOCK_DGRAM)
    x.bind((lo, 0))
    x.sendto(b"lo", ua[:2])
    d, f = u.recvfrom(100)
    print("udp", d, "from", f[0])
    for s in (l, c1, a1, c2, a2, ll, c3, a3, dup, w, c4, a4, u, v, x):
        s.close()
print("done")
"#;

/// Sockets on the sandbox's own address (`--network sandbox`): TCP and UDP
/// bind, listen, accept and connect on `10.0.2.15` and `fd00::15` as Linux
/// does in a namespace holding that link (local delivery, the address as
/// source, wildcard and loopback listeners beside it); an address it does
/// not have is `EADDRNOTAVAIL`. With `--network none` there is no `eth0`,
/// so its addresses are `EADDRNOTAVAIL` too, as in a fresh namespace.
#[test]
fn binding_the_sandbox_address_works_as_on_linux() {
    let nat = native(&[
        "/usr/bin/unshare",
        "-n",
        "/bin/sh",
        "-c",
        "ip link set lo up && ip link add eth0 type veth peer name p0 && \
         ip link set p0 up && ip addr add 10.0.2.15/24 dev eth0 && \
         ip addr add fd00::15/64 dev eth0 nodad && ip link set eth0 up && \
         ip route add default dev eth0 && exec /usr/bin/python3 -I -c \"$0\" sandbox",
        BIND_OWN_ADDRESS,
    ]);
    assert!(
        nat.status == 0
            && nat
                .stdout
                .contains("wildcard accepted from fd00::15 at fd00::15"),
        "the NATIVE run is wrong: {nat:?}"
    );
    let sb = sandboxed_with_link(&as_strs(&python(BIND_OWN_ADDRESS, &["sandbox"])));
    assert_exits_0_with(
        &sb,
        &nat.stdout,
        "sandbox differs from a namespace with the same link",
    );

    let nat = native(&[
        "/usr/bin/unshare",
        "-n",
        "/bin/sh",
        "-c",
        "ip link set lo up && exec /usr/bin/python3 -I -c \"$0\" none",
        BIND_OWN_ADDRESS,
    ]);
    assert!(
        nat.status == 0 && nat.stdout.contains("udp bind fd00::15 EADDRNOTAVAIL"),
        "the NATIVE run is wrong: {nat:?}"
    );
    let sb = sandboxed(&as_strs(&python(BIND_OWN_ADDRESS, &["none"])));
    assert_exits_0_with(
        &sb,
        &nat.stdout,
        "--network none differs from a fresh namespace",
    );
}

/// Python: all of 127.0.0.0/8 is loopback's. Binds anywhere in it (the
/// broadcast address too), a listener on one address reached there only,
/// wildcard listeners (IPv4 and dual-stack) at every address and naming the
/// one dialled, 127.0.0.1 as the source of unbound sockets, datagrams
/// between addresses of the range, the broadcast address refused as a
/// destination, and no way out from an address of the range. IPv6 keeps
/// `::1` alone. The argument only names the run.
const LOOPBACK_RANGE: &str = r#"
import errno, socket, struct, sys
def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))
def attempt(label, f):
    try:
        print(label, "ok", f())
    except OSError as e:
        print(label, name(e))
mode = sys.argv[1]
# Binds anywhere in 127.0.0.0/8, the broadcast address included; IPv6 has ::1 only.
for a in ("127.0.0.2", "127.1.2.3", "127.0.0.0", "127.255.255.255"):
    for ty, tn in ((socket.SOCK_STREAM, "tcp"), (socket.SOCK_DGRAM, "udp")):
        s = socket.socket(socket.AF_INET, ty)
        attempt(tn + " bind " + a, lambda: (s.bind((a, 0)), s.getsockname()[0])[1])
        s.close()
s = socket.socket(socket.AF_INET6)
attempt("tcp bind ::2", lambda: s.bind(("::2", 0)))
# A listener on 127.0.0.5 is reached there, not at 127.0.0.6.
l = socket.socket()
l.bind(("127.0.0.5", 0))
l.listen(4)
port = l.getsockname()[1]
c = socket.socket()
c.connect(("127.0.0.5", port))
a, p = l.accept()
print("unbound client from", c.getsockname()[0], "accepted from", p[0], "at", a.getsockname()[0])
c = socket.socket()
attempt("connect 127.0.0.6 at the listener's port", lambda: c.connect(("127.0.0.6", port)))
c = socket.socket()
c.bind(("127.3.3.3", 0))
c.connect(("127.0.0.5", port))
a, p = l.accept()
print("bound client accepted from", p[0], p[1] == c.getsockname()[1])
c = socket.socket()
c.bind(("127.255.255.255", 0))
c.connect(("127.0.0.5", port))
a, p = l.accept()
print("client bound to broadcast is", c.getsockname()[0], "accepted from", p[0])
# A wildcard listener at every address of the range, named as dialled.
for fam, wild, fmt in ((socket.AF_INET, "0.0.0.0", "%s"), (socket.AF_INET6, "::", "::ffff:%s")):
    w = socket.socket(fam)
    w.bind((wild, 0))
    w.listen(4)
    for dialled in ("127.0.0.7", "127.200.1.9"):
        c = socket.socket(fam)
        c.connect((fmt % dialled, w.getsockname()[1]))
        a, p = w.accept()
        c.sendall(b"ping")
        print("wildcard", wild, "via", dialled, "from", p[0], "at", a.getsockname()[0],
              "client", c.getsockname()[0], a.recv(10))
# UDP between addresses of the range.
r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
r.bind(("127.0.0.5", 0))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(b"a", r.getsockname())
d, f = r.recvfrom(10)
print("udp", d, "from", f[0])
r.sendto(b"b", f)
d, f = u.recvfrom(10)
print("udp reply", d, "from", f[0])
b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
b.bind(("127.3.3.3", 0))
b.sendto(b"c", r.getsockname())
d, f = r.recvfrom(10)
print("udp", d, "from", f[0])
any4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
any4.bind(("0.0.0.0", 0))
any4.setsockopt(socket.IPPROTO_IP, getattr(socket, "IP_PKTINFO", 8), 1)
u.sendto(b"d", ("127.0.0.9", any4.getsockname()[1]))
d, anc, _, f = any4.recvmsg(10, 256)
for lvl, ty, data in anc:
    _, spec, dst = struct.unpack("i4s4s", data[:12])
    print("udp", d, "from", f[0], "pktinfo", socket.inet_ntoa(spec), socket.inet_ntoa(dst))
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.connect(("127.0.0.9", 9))
print("udp connected to 127.0.0.9 is", c.getsockname()[0])
# Loopback's broadcast address is no destination.
attempt("tcp connect 127.255.255.255", lambda: socket.socket().connect(("127.255.255.255", 9)))
attempt("udp sendto 127.255.255.255",
        lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.255.255.255", 9)))
# Bound in the range, no way out (EINVAL where a route exists, else ENETUNREACH).
for ty, tn in ((socket.SOCK_STREAM, "tcp"), (socket.SOCK_DGRAM, "udp")):
    s = socket.socket(socket.AF_INET, ty)
    s.bind(("127.0.0.5", 0))
    s.setblocking(False)
    attempt(tn + " out from 127.0.0.5", lambda: s.connect(("192.0.2.1", 80)))
print("done", mode)
"#;

/// All of 127.0.0.0/8 is the sandbox's loopback, as in a fresh namespace
/// with its loopback up (`ip route get` included); with `eth0`
/// (`--network sandbox`), as in a namespace holding the same link, where
/// an address of the range still has no way out (`EINVAL`).
#[test]
fn all_of_127_slash_8_is_loopback_as_on_linux() {
    let routes = "PATH=/usr/sbin:/usr/bin:/sbin:/bin; \
                  for a in 127.0.0.7 127.1.2.3 127.255.255.255; do ip route get $a; done; \
                  ip route get 127.0.0.7 from 127.0.0.3 2>&1; \
                  ip route get 192.0.2.1 from 127.0.0.3 2>&1; \
                  ip route get 224.0.0.1 from 127.0.0.3 2>&1; \
                  exec /usr/bin/python3 -I -c \"$0\" \"$1\"";
    let link = "ip link add eth0 type veth peer name p0 && ip link set p0 up && \
                ip addr add 10.0.2.15/24 dev eth0 && ip link set eth0 up && \
                ip route add default dev eth0 && ";
    for (mode, setup) in [("none", ""), ("link", link)] {
        let nat = native(&[
            "/usr/bin/unshare",
            "-n",
            "/bin/sh",
            "-c",
            &format!("ip link set lo up && {setup}{routes}"),
            LOOPBACK_RANGE,
            mode,
        ]);
        assert!(
            nat.status == 0
                && nat
                    .stdout
                    .contains("wildcard 0.0.0.0 via 127.0.0.7 from 127.0.0.1 at 127.0.0.7")
                && nat.stdout.contains(&format!("done {mode}")),
            "the NATIVE run is wrong: {nat:?}"
        );
        let argv = ["/bin/sh", "-c", routes, LOOPBACK_RANGE, mode];
        let sb = if mode == "none" {
            sandboxed(&argv)
        } else {
            sandboxed_with_link(&argv)
        };
        assert_exits_0_with(
            &sb,
            &nat.stdout,
            &format!("{mode}: sandbox differs from the namespace"),
        );
    }
}

// ---- attacks that must fail (sandbox only) ---------------------------------------

/// The host's own non-loopback IPv4 address, found without sending a packet.
fn host_address() -> Option<String> {
    let s = UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then(|| ip.to_string())
}

const CONNECT_OUT: &str = r#"
import errno, socket, sys, time
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(20)
    t0 = time.monotonic()
    try:
        s.connect((host, int(port)))
        verdict = "CONNECTED"
    except socket.timeout:
        verdict = "TIMEOUT"
    except OSError as e:
        verdict = errno.errorcode.get(e.errno, str(e.errno))
    dt = time.monotonic() - t0
    print(target, verdict, "fast" if dt < 3 else "slow %.1fs" % dt)
    s.close()
    # UDP: sending to a forbidden address must not succeed silently either...
    u = socket.socket(fam, socket.SOCK_DGRAM)
    try:
        u.sendto(b"x", (host, int(port)))
        uv = "sent"
    except OSError as e:
        uv = errno.errorcode.get(e.errno, str(e.errno))
    print(target, "udp", uv)
    u.close()
"#;

/// Destinations outside the sandbox's loopback: refused at once, never
/// connected, never a hang. The host's own 127.0.0.1 service (a listener this
/// test holds) must not be reachable through the sandbox's 127.0.0.1 either.
#[test]
fn connect_to_host_only_addresses_fails_fast() {
    let host_listener = TcpListener::bind("127.0.0.1:0").expect("host listener");
    host_listener.set_nonblocking(true).expect("nonblocking");
    let host_port = host_listener.local_addr().expect("addr").port();
    let mut targets = vec![
        "10.0.0.1:80".to_owned(),
        "169.254.169.254:80".to_owned(),
        "8.8.8.8:53".to_owned(),
        format!("127.0.0.1:{host_port}"),
        "2001:db8::1:80".to_owned(),
    ];
    if let Some(ip) = host_address() {
        targets.push(format!("{ip}:22"));
    }
    let argv = python(CONNECT_OUT, &as_strs(&targets));
    let sb = sandboxed(&as_strs(&argv));
    assert_eq!(sb.status, 0, "stdout:\n{}stderr:\n{}", sb.stdout, sb.stderr);
    let accepted = host_listener.accept().is_ok();
    let mut problems = Vec::new();
    for line in sb.stdout.lines().filter(|l| !l.contains(" udp ")) {
        let ok = (line.contains(" ECONNREFUSED ")
            || line.contains(" ENETUNREACH ")
            || line.contains(" EHOSTUNREACH "))
            && line.ends_with(" fast");
        if !ok {
            problems.push(line.to_owned());
        }
    }
    let tcp_lines = sb.stdout.lines().filter(|l| !l.contains(" udp ")).count();
    assert!(
        problems.is_empty() && !accepted && tcp_lines == targets.len(),
        "connections out of the loopback-only sandbox must fail at once with \
         ECONNREFUSED/ENETUNREACH\nbad: {problems:?}\nhost listener got a connection: {accepted}\n\
         full stdout:\n{}stderr:\n{}",
        sb.stdout,
        sb.stderr
    );
}

const RAW_SOCKETS: &str = r#"
import errno, socket
cases = [
    ("AF_INET SOCK_RAW ICMP", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
    ("AF_INET SOCK_RAW TCP", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP),
    ("AF_INET SOCK_RAW RAW", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW),
    ("AF_INET6 SOCK_RAW ICMPV6", socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6),
    ("AF_PACKET SOCK_RAW", socket.AF_PACKET, socket.SOCK_RAW, 0x0300),
    ("AF_PACKET SOCK_DGRAM", socket.AF_PACKET, socket.SOCK_DGRAM, 0x0300),
    ("AF_INET SOCK_PACKET", socket.AF_INET, 10, 0x0300),
]
for name, fam, typ, proto in cases:
    try:
        s = socket.socket(fam, typ, proto)
        print(name, "OPENED")
        s.close()
    except OSError as e:
        print(name, "refused", errno.errorcode.get(e.errno, str(e.errno)))
# The sandbox still works afterwards.
a, b = socket.socketpair(); a.send(b"ok"); print("socketpair", b.recv(2))
"#;

#[test]
fn raw_and_packet_sockets_are_refused() {
    let argv = python(RAW_SOCKETS, &[]);
    let sb = sandboxed(&as_strs(&argv));
    assert_eq!(sb.status, 0, "stdout:\n{}stderr:\n{}", sb.stdout, sb.stderr);
    let refused = sb
        .stdout
        .lines()
        .filter(|l| l.contains(" refused "))
        .count();
    assert!(
        !sb.stdout.contains("OPENED") && refused == 7 && sb.stdout.contains("socketpair b'ok'"),
        "raw and packet sockets must be refused:\n{}stderr:\n{}",
        sb.stdout,
        sb.stderr
    );
}

const SOCKET_EXHAUSTION: &str = r#"
import errno, os, resource, socket
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
def exhaust(n, kind):
    socks, err = [], None
    for i in range(n):
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            if kind == "listen":
                s.bind(("127.0.0.1", 0)); s.listen(4)
        except OSError as e:
            err = errno.errorcode.get(e.errno, str(e.errno))
            break
    return socks, err
# With the soft limit at 1024, 2000 sockets run into EMFILE.
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
socks, err = exhaust(2000, "plain")
print("at 1024: opened < 1024", len(socks) < 1024, "error", err)
for s in socks: s.close()
# With a higher limit: 2000 listening sockets, each holding a port, either
# all work or fail cleanly with a resource error.
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
socks, err = exhaust(2000, "listen")
print("listening sockets: clean", err in (None, "EMFILE", "ENFILE", "ENOBUFS", "ENOMEM", "EADDRINUSE"), len(socks) == 2000 or err)
for s in socks: s.close()
# Half a connection each: 1000 connected pairs.
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(128)
pairs, err = [], None
for i in range(1000):
    try:
        c = socket.create_connection(srv.getsockname(), timeout=10)
        a, _ = srv.accept()
        pairs.append((c, a))
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno)); break
print("connected pairs: clean", err in (None, "EMFILE", "ENFILE", "ENOBUFS", "ENOMEM", "EADDRNOTAVAIL"), len(pairs) == 1000 or err)
for c, a in pairs: c.close(); a.close()
# Everything still works afterwards.
c = socket.create_connection(srv.getsockname(), timeout=10); a, _ = srv.accept()
c.sendall(b"still alive"); print("after exhaustion", a.recv(100))
r, w = os.pipe(); os.write(w, b"pipe ok"); print(os.read(r, 10))
print("done")
"#;

#[test]
fn socket_exhaustion_gives_emfile_and_the_sandbox_survives() {
    let argv = python(SOCKET_EXHAUSTION, &[]);
    let nat = native(&as_strs(&argv));
    assert!(
        nat.status == 0 && nat.stdout.contains("error EMFILE") && nat.stdout.contains("done"),
        "the NATIVE run disagrees, so the test is wrong:\n{}{}",
        nat.stdout,
        nat.stderr
    );
    let sb = sandboxed(&as_strs(&argv));
    assert!(
        sb.status == 0
            && sb.stdout.contains("at 1024: opened < 1024 True error EMFILE")
            && sb.stdout.contains("listening sockets: clean True")
            && sb.stdout.contains("connected pairs: clean True")
            && sb.stdout.contains("after exhaustion b'still alive'")
            && sb.stdout.contains("done"),
        "sandbox: status {}\n--- native stdout ---\n{}--- sandbox stdout ---\n{}--- sandbox stderr ---\n{}",
        sb.status,
        nat.stdout,
        sb.stdout,
        sb.stderr
    );
    // The Sentry is still there for the next sandbox.
    let again = sandboxed(&["/bin/busybox", "echo", "alive"]);
    assert_eq!((again.status, again.stdout.as_str()), (0, "alive\n"));
}

const FLOOD_AND_CHURN: &str = r#"
import errno, socket, time
def name(e):
    return errno.errorcode.get(e.errno, str(e.errno))
# A port that is taken stays taken: EADDRINUSE, as Linux says.
a = socket.socket(); a.bind(("127.0.0.1", 0)); a.listen(1)
b = socket.socket()
try:
    b.bind(a.getsockname()); print("rebind OK")
except OSError as e:
    print("rebind", name(e))
b.close(); a.close()
# 600 non-blocking connects at a listener with a backlog of 1: each is
# pending or connected, none is an error, nothing hangs.
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
flood = []
for i in range(600):
    c = socket.socket(); c.setblocking(False)
    flood.append((c, c.connect_ex(srv.getsockname())))
print("flood: every connect pending or done", all(r in (0, errno.EINPROGRESS) for _, r in flood))
for c, _ in flood:
    c.close()
# The listener still accepts: a new client gets through once the queue
# drains (connections from the flood that made it in come first, dead or
# alive).
c = socket.socket(); c.setblocking(False); c.connect_ex(srv.getsockname())
srv.settimeout(20)
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    s, peer = srv.accept()
    if peer == c.getsockname():
        break
    s.close()
c.settimeout(20)
c.sendall(b"after the flood")
print("listener accepts after the flood", s.recv(100))
s.close(); c.close()
# Churn through ephemeral ports: 3000 connections opened and closed one
# after the other; every one works or fails with a clean resource error.
done, err = 0, None
for i in range(3000):
    try:
        c = socket.create_connection(srv.getsockname(), timeout=20)
        s, _ = srv.accept()
        c.close(); s.close()
        done += 1
    except OSError as e:
        err = name(e); break
print("churn clean", done == 3000 or err in ("EADDRNOTAVAIL", "EADDRINUSE", "EAGAIN", "ENOBUFS"))
c = socket.create_connection(srv.getsockname(), timeout=20); s, _ = srv.accept()
c.sendall(b"still alive"); print("after churn", s.recv(100))
print("done")
"#;

/// Attacks on the sandbox's own sockets (issue 7, point 6): a taken port
/// stays taken, a flood of non-blocking connects at a listener with a small
/// backlog, and thousands of connections churning through ephemeral ports.
/// Output identical to native; the Sentry lives on for the next sandbox.
#[test]
fn connect_flood_and_port_churn_leave_the_sandbox_working() {
    let argv = python(FLOOD_AND_CHURN, &[]);
    compare("flood and churn", &as_strs(&argv), "done");
    let again = sandboxed(&["/bin/busybox", "echo", "alive"]);
    assert_eq!((again.status, again.stdout.as_str()), (0, "alive\n"));
}

// ---- --network host: the host's network, shared ---------------------------

/// Runs `body` (shell) as root in a network namespace of its own (`unshare
/// -n`, loopback up), so that "the host's network" is one the test owns and
/// nothing changes on the machine. `$FV` is ferrovisor, `$DIR` a scratch
/// directory holding `server.py` (started first: a TCP service on
/// 127.0.0.1 and ::1 port 7001 answering each connection, after the
/// client's EOF, with the size and SHA-256 of what it sent; a UDP echo on
/// 127.0.0.1 port 7002; one line per TCP connection in `$DIR/server.log`),
/// `client.py` and `guest_server.py`. 10.9.9.2 is an address nobody
/// answers (a veth pair with no one behind it): a connection to it hangs.
fn in_private_netns(label: &str, body: &str) -> Outcome {
    let dir = TempDir::new(label);
    for (name, text) in [
        ("server.py", HOST_SERVER),
        ("client.py", HOST_CLIENT),
        ("guest_server.py", GUEST_SERVER),
        ("reach_guest.py", REACH_GUEST),
        ("cmsg.py", CONTROL_MESSAGES),
    ] {
        std::fs::write(dir.path().join(name), text).expect("script");
    }
    let script = format!(
        r#"set -e
ip link set lo up
ip link add fvh0 type veth peer name fvh1
ip addr add 10.9.9.1/24 dev fvh0
ip link set fvh0 up
ip link set fvh1 up
/usr/bin/python3 -I "$DIR/server.py" "$DIR/server.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null' EXIT
for i in $(seq 100); do
  /usr/bin/python3 -I -c "import socket; socket.create_connection(('127.0.0.1', 7001)).close()" 2>/dev/null && break
  sleep 0.1
done
# The server logs that probe from a thread of its own: wait for the line
# before emptying the log, or it could land after and count.
for i in $(seq 100); do
  grep -q 'tcp from' "$DIR/server.log" 2>/dev/null && break
  sleep 0.05
done
: > "$DIR/server.log"
set +e
{body}
"#
    );
    let mut cmd = command(
        "unshare",
        &[("FV", FERROVISOR), ("REFUSED", REFUSED_OPTIONS)],
    );
    cmd.env("DIR", dir.path());
    cmd.args(["-n", "sh", "-c", &script]);
    run(cmd, None, TIMEOUT)
}

fn show(o: &Outcome) -> String {
    format!(
        "exit {}\n--- stdout ---\n{}--- stderr ---\n{}",
        o.status, o.stdout, o.stderr
    )
}

const HOST_SERVER: &str = r#"
import hashlib, socket, sys, threading
log = sys.argv[1]
def serve_tcp(fam, host):
    l = socket.socket(fam, socket.SOCK_STREAM)
    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((host, 7001)); l.listen(64)
    while True:
        c, a = l.accept()
        threading.Thread(target=answer, args=(c, a), daemon=True).start()
def answer(c, a):
    with open(log, "a") as f:
        f.write("tcp from %s\n" % a[0])
    h, n = hashlib.sha256(), 0
    while True:
        d = c.recv(65536)
        if not d:
            break
        h.update(d); n += len(d)
    c.sendall(b"%d %s" % (n, h.hexdigest().encode()))
    c.close()
def serve_udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("127.0.0.1", 7002))
    while True:
        d, a = u.recvfrom(65536)
        u.sendto(d, a)
threading.Thread(target=serve_tcp, args=(socket.AF_INET6, "::1"), daemon=True).start()
threading.Thread(target=serve_udp, daemon=True).start()
serve_tcp(socket.AF_INET, "127.0.0.1")
"#;

/// The client: only deterministic facts, so that the native run and the
/// sandboxed one print the same.
const HOST_CLIENT: &str = r#"
import errno, fcntl, hashlib, os, select, signal, socket, struct, termios, time
def name(e):
    return errno.errorcode.get(e, str(e))
for fam, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 77)
    print(host, "options", s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0,
          s.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
          s.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
          s.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) == socket.SOCK_STREAM)
    s.connect((host, 7001))
    print(host, "peer", s.getpeername()[:2], "local", s.getsockname()[0])
    data = os.urandom(3 << 20)
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    select.select([s], [], [], 10)
    time.sleep(0.2)
    avail = struct.unpack("i", fcntl.ioctl(s, termios.FIONREAD, b"\0\0\0\0"))[0]
    reply = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        reply += d
    print(host, "fionread", avail == len(reply),
          "reply", reply.decode() == "%d %s" % (len(data), hashlib.sha256(data).hexdigest()))
    s.close()
# Non-blocking connect: EINPROGRESS (or at once), then epoll says writable.
s = socket.socket()
s.setblocking(False)
r = s.connect_ex(("127.0.0.1", 7001))
ep = select.epoll(); ep.register(s.fileno(), select.EPOLLOUT)
ev = ep.poll(10)
print("nonblocking connect", r in (0, errno.EINPROGRESS), "epoll", ev == [(s.fileno(), select.EPOLLOUT)],
      "so_error", s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
s.close()
# ... and to a closed port: the refusal comes through poll and SO_ERROR.
s = socket.socket()
s.setblocking(False)
r = s.connect_ex(("127.0.0.1", 7009))
if r == errno.EINPROGRESS:
    p = select.poll(); p.register(s, select.POLLOUT)
    p.poll(10000)
    r = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
print("nonblocking connect to a closed port", name(r))
try:
    socket.create_connection(("127.0.0.1", 7009), timeout=10)
except OSError as e:
    print("blocking connect to a closed port", name(e.errno))
# UDP.
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
ok = 0
for i in range(10):
    d = os.urandom(1 + 5000 * i)
    u.sendto(d, ("127.0.0.1", 7002))
    r, a = u.recvfrom(65536)
    ok += r == d and a == ("127.0.0.1", 7002)
print("udp echoed", ok)
u.connect(("127.0.0.1", 7002)); u.send(b"x" * 100)
select.select([u], [], [], 10)
print("udp peek", len(u.recv(10, socket.MSG_PEEK)), "then", len(u.recv(1000)))
# SO_RCVTIMEO / SO_SNDTIMEO set with setsockopt (no settimeout, so the
# calls block): each wait ends after about 0.3 s.
def tv(sec, usec):
    return struct.pack("ll", sec, usec)
def got(s, opt):
    return struct.unpack("ll", s.getsockopt(socket.SOL_SOCKET, opt, 16))
def waited(t0):
    return 0.2 <= time.monotonic() - t0 < 2
def timed(what, call):
    t0 = time.monotonic()
    try:
        print(what, "returned", call())
    except OSError as e:
        print(what, "timeout", name(e.errno), waited(t0))
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(0)
l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv(0, 300000))
l.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv(1, 500000))
print("timeouts", got(l, socket.SO_RCVTIMEO), got(l, socket.SO_SNDTIMEO))
timed("accept", l.accept)
c = socket.create_connection(l.getsockname())
a, _ = l.accept()
print("accepted inherits", got(a, socket.SO_RCVTIMEO), got(a, socket.SO_SNDTIMEO))
timed("recv", lambda: a.recv(10))
c.sendall(b"hello"); time.sleep(0.05)
t0 = time.monotonic()
print("waitall partial", len(a.recv(100, socket.MSG_WAITALL)), waited(t0))
c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv(0, 300000))
t0 = time.monotonic()
n = c.send(b"x" * (64 << 20))
print("send partial", 0 < n < 64 << 20, waited(t0))
try:
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv(0, 1000000))
except OSError as e:
    print("usec out of range", name(e.errno))
c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv(-1, 0))
t0 = time.monotonic()
try:
    c.recv(10)
except OSError as e:
    print("negative timeout", name(e.errno), time.monotonic() - t0 < 0.15, got(c, socket.SO_RCVTIMEO))
d = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); d.bind(("127.0.0.1", 0))
d.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv(0, 300000))
timed("udp recvfrom", lambda: d.recvfrom(10))
w = socket.socket()
w.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv(0, 300000))
t0 = time.monotonic()
print("connect timeout", name(w.connect_ex(("10.9.9.2", 80))), waited(t0))
for s in (l, a, c, d, w):
    s.close()
# Blocking calls end with EINTR when a signal's handler (no SA_RESTART) runs.
class Alarm(Exception):
    pass
def ring(*a):
    raise Alarm()
signal.signal(signal.SIGALRM, ring)
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
c = socket.socket()
for what, call in (("accept", l.accept), ("recvfrom", lambda: u.recvfrom(10)),
                   ("connect", lambda: c.connect(("10.9.9.2", 80)))):
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        call()
        print(what, "returned")
    except Alarm:
        print(what, "interrupted")
try:
    socket.socket().bind(("203.0.113.9", 0))
except OSError as e:
    print("bind to a foreign address", name(e.errno))
"#;

/// Options that would reach beyond the socket, and raw and packet sockets,
/// stay refused even in host mode (natively root could have them: this runs
/// in the sandbox only).
const REFUSED_OPTIONS: &str = r#"
import errno, socket
for fam, ty, proto in ((socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
                       (socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6),
                       (socket.AF_PACKET, socket.SOCK_RAW, 0)):
    try:
        socket.socket(fam, ty, proto)
        print("raw", fam, "opened")
    except OSError as e:
        print("raw", fam, errno.errorcode.get(e.errno, str(e.errno)))
for opt, val in ((25, b"lo\0"), (36, b"\1\0\0\0")):
    try:
        socket.socket().setsockopt(socket.SOL_SOCKET, opt, val)
        print("option", opt, "set")
    except OSError as e:
        print("option", opt, errno.errorcode.get(e.errno, str(e.errno)))
"#;

#[test]
fn host_network_reaches_a_host_server_like_native_and_warns_once() {
    let o = in_private_netns(
        "hostnet-client",
        r#"echo "== native"
/usr/bin/python3 -I "$DIR/client.py"
echo "== sandbox"
"$FV" do --network host -- /usr/bin/python3 -I "$DIR/client.py"
echo "== status $?"
echo "log: $(grep -c 'tcp from' "$DIR/server.log")"
"$FV" do --network host -- /usr/bin/python3 -I -c "$REFUSED" 2>/dev/null
"#,
    );
    let (native, rest) = o
        .stdout
        .split_once("== sandbox\n")
        .unwrap_or_else(|| panic!("{}", show(&o)));
    let native = native.trim_start_matches("== native\n");
    let sandbox = rest.split("== status").next().unwrap_or_default();
    for must in [
        "127.0.0.1 fionread True reply True",
        "::1 fionread True reply True",
        "127.0.0.1 options True 1 77 True",
        "nonblocking connect True epoll True so_error 0",
        "to a closed port ECONNREFUSED",
        "udp echoed 10",
        "udp peek 10 then 100",
        "accept interrupted",
        "recvfrom interrupted",
        "connect interrupted",
        "bind to a foreign address EADDRNOTAVAIL",
        "timeouts (0, 300000) (1, 500000)",
        "accept timeout EAGAIN True",
        "accepted inherits (0, 300000) (1, 500000)",
        "recv timeout EAGAIN True",
        "waitall partial 5 True",
        "send partial True True",
        "usec out of range EDOM",
        "negative timeout EAGAIN True (0, 0)",
        "udp recvfrom timeout EAGAIN True",
        "connect timeout EINPROGRESS True",
    ] {
        assert!(
            native.contains(must),
            "the NATIVE run lacks {must:?}, so the test is wrong\n{}",
            show(&o)
        );
    }
    assert_eq!(native, sandbox, "sandbox differs from native\n{}", show(&o));
    assert!(o.stdout.contains("== status 0"), "{}", show(&o));
    // Both runs reached the host's server: two TCP connections each
    // (v4 and v6) plus the non-blocking one.
    assert!(o.stdout.contains("log: 6"), "{}", show(&o));
    // Raw and packet sockets, SO_BINDTODEVICE and SO_MARK never reach the host.
    assert!(
        o.stdout.contains(
            "raw 2 EPERM\nraw 10 EPERM\nraw 17 EPERM\noption 25 ENOPROTOOPT\noption 36 ENOPROTOOPT"
        ),
        "{}",
        show(&o)
    );
    let warnings: Vec<&str> = o
        .stderr
        .lines()
        .filter(|l| l.contains("shares the host's network"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", show(&o));
    assert!(
        o.stderr.lines().next() == Some(warnings[0])
            && warnings[0].starts_with("ferrovisor: warning: --network host"),
        "{}",
        show(&o)
    );
}

/// A guest server on 127.0.0.1: TCP port 7003 and UDP port 7004, waiting
/// with `selectors` (epoll) for one connection and one datagram, at most
/// ten seconds.
const GUEST_SERVER: &str = r#"
import selectors, socket, sys
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("127.0.0.1", 7003)); t.listen(8); t.setblocking(False)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 7004)); u.setblocking(False)
sel = selectors.DefaultSelector()
sel.register(t, selectors.EVENT_READ); sel.register(u, selectors.EVENT_READ)
print("listening", flush=True)
todo = {t, u}
while todo:
    ev = sel.select(10)
    if not ev:
        print("no client"); sys.exit(1)
    for key, _ in ev:
        if key.fileobj is t:
            c, a = t.accept()
            c.setblocking(True)
            d = c.recv(100)
            c.sendall(b"guest saw " + d + b" from " + a[0].encode())
            c.close()
        else:
            d, a = u.recvfrom(100)
            u.sendto(b"guest echo " + d, a)
        sel.unregister(key.fileobj); todo.discard(key.fileobj)
print("served")
"#;

/// `--network host` shows the guest the interfaces, addresses and routes
/// of the network it shares: those of a namespace the test makes (with
/// `dummy0` holding 192.0.2.5/24 and 192.0.2.6/24 and a route through a
/// gateway), as the native commands there print them, through rtnetlink
/// (`ip`), the interface ioctls (`ifconfig`, `SIOCGIFCONF`: an entry per
/// address), `/proc/net` and `/sys/class/net`. (The
/// runtime reads them before the Sentry is confined; where the kernel has
/// no dummy driver, `dummy0` is one end of a veth pair.)
#[test]
fn host_network_shows_the_interfaces_of_the_namespace() {
    let script = r#"set -e
ip link set lo up
if ! ip link add dummy0 type dummy 2>/dev/null; then
  ip link add dummy0 type veth peer name dummy0p
  ip link set dummy0p addrgenmode none
  ip link set dummy0p up
fi
# No IPv6 link-local address: its DAD state would change while the test
# runs, and the sandbox's view is the one taken at its start.
ip link set dummy0 addrgenmode none
ip addr add 192.0.2.5/24 dev dummy0
ip addr add 192.0.2.6/24 dev dummy0
ip link set dummy0 up
ip route add 198.51.100.0/24 via 192.0.2.1
set +e
S='PATH=/usr/sbin:/usr/bin:/sbin:/bin
busybox ip addr; echo --; busybox ip route; echo --; ip route show table all; echo --
ip -o link | sed "s/ *link\/.*//"; echo --
cut -d: -f1 /proc/net/dev; echo --; cat /proc/net/route; echo --; cat /proc/net/if_inet6; echo --
busybox ifconfig dummy0 | grep -E "inet|HWaddr|MTU"; echo --
python3 -c "
import array, fcntl, socket, struct
b = array.array(\"B\", bytes(40 * 32))
r = fcntl.ioctl(socket.socket(), 0x8912, struct.pack(\"iL\", len(b), b.buffer_info()[0]))
n = struct.unpack(\"iL\", r)[0]
d = b.tobytes()[:n]
for i in range(0, n, 40):
    print(d[i:i + 16].split(bytes(1))[0].decode(), socket.inet_ntoa(d[i + 20:i + 24]))
"'
echo "== native"; sh -c "$S"
echo "== sandbox"; $FV do --network host -- sh -c "$S" 2>/dev/null
echo "== status $?"
$FV do --network host -- sh -c 'ls /sys/class/net; cat /sys/class/net/dummy0/mtu /sys/class/net/dummy0/address' 2>/dev/null
ip -o link show dummy0 | sed 's/.*link\/ether \([^ ]*\).*/\1/'
"#;
    let mut cmd = command("unshare", &[("FV", FERROVISOR)]);
    cmd.args(["-n", "sh", "-c", script]);
    let o = run(cmd, None, TIMEOUT);
    let (native, rest) = o
        .stdout
        .split_once("== native\n")
        .and_then(|(_, r)| r.split_once("== sandbox\n"))
        .unwrap_or_default();
    let (sandbox, sys) = rest.split_once("== status 0\n").unwrap_or_default();
    assert!(
        native.contains("dummy0") && native.contains("inet 192.0.2.5/24 scope global dummy0"),
        "the NATIVE run is wrong\n{}",
        show(&o)
    );
    assert_eq!(native, sandbox, "sandbox differs from native\n{}", show(&o));
    // The names, then dummy0's MTU and address, then the native address.
    let sys: Vec<&str> = sys.lines().collect();
    let n = sys.len();
    assert!(
        n >= 4
            && sys[..n - 3].contains(&"dummy0")
            && sys[n - 3] == "1500"
            && sys[n - 2] == sys[n - 1],
        "/sys/class/net differs\n{}",
        show(&o)
    );
}

/// The host side: connects to the guest server (retrying while it starts)
/// and prints what it answered, or that it was refused throughout.
const REACH_GUEST: &str = r#"
import socket, time
for i in range(60):
    try:
        c = socket.create_connection(("127.0.0.1", 7003), timeout=5)
        break
    except ConnectionRefusedError:
        time.sleep(0.1)
else:
    print("host: refused"); raise SystemExit
c.sendall(b"hello"); print("host got", c.recv(100).decode())
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(5)
u.sendto(b"ping", ("127.0.0.1", 7004)); print("host got", u.recv(100).decode())
"#;

#[test]
fn host_network_guest_server_is_reached_from_the_host() {
    let o = in_private_netns(
        "hostnet-server",
        r#""$FV" do --network host -- /usr/bin/python3 -I "$DIR/guest_server.py" > "$DIR/guest.out" &
GUEST=$!
/usr/bin/python3 -I "$DIR/reach_guest.py"
wait $GUEST
echo "guest exit $?"
cat "$DIR/guest.out"
"#,
    );
    for must in [
        "host got guest saw hello from 127.0.0.1",
        "host got guest echo ping",
        "guest exit 0",
        "listening\nserved",
    ] {
        assert!(o.stdout.contains(must), "missing {must:?}\n{}", show(&o));
    }
}

/// Control messages on UDP sockets, printed as facts: `IP_PKTINFO`,
/// `IP_RECVTTL` and `IP_RECVTOS` (the sender sets TTL 33 and TOS 0x10),
/// `SO_TIMESTAMPNS` then `SO_TIMESTAMP` (within the send and the receive),
/// `IPV6_RECVPKTINFO` and `IPV6_RECVHOPLIMIT` (hop limit 7), `MSG_CTRUNC`
/// with short buffers, and getsockopt of the options.
const CONTROL_MESSAGES: &str = r#"import socket, struct, time
SOL_IP, SOL_IPV6 = 0, 41
IP_TOS, IP_TTL, IP_PKTINFO, IP_RECVTTL, IP_RECVTOS = 1, 2, 8, 12, 13
IPV6_RECVPKTINFO, IPV6_PKTINFO, IPV6_RECVHOPLIMIT, IPV6_HOPLIMIT = 49, 50, 51, 52
SO_TIMESTAMP, SO_TIMESTAMPNS = 29, 35
MSG_CTRUNC = 8

def show(what, r, before, after):
    data, anc, flags, addr = r
    print(what, data, "ctrunc" if flags & MSG_CTRUNC else "-")
    for level, ty, d in anc:
        if (level, ty) == (socket.SOL_SOCKET, SO_TIMESTAMPNS) and len(d) == 16:
            s, ns = struct.unpack("qq", d)
            t = s + ns / 1e9
            v = "between" if before - 1e-6 <= t <= after + 1e-6 else "outside"
        elif (level, ty) == (socket.SOL_SOCKET, SO_TIMESTAMP) and len(d) == 16:
            s, us = struct.unpack("qq", d)
            t = s + us / 1e6
            v = "between" if before - 1e-5 <= t <= after + 1e-5 else "outside"
        elif (level, ty) == (SOL_IP, IP_PKTINFO) and len(d) == 12:
            idx = struct.unpack("i", d[:4])[0]
            v = "ifindex-is-lo=%s %s %s" % (idx == socket.if_nametoindex("lo"),
                socket.inet_ntop(socket.AF_INET, d[4:8]), socket.inet_ntop(socket.AF_INET, d[8:12]))
        elif (level, ty) == (SOL_IPV6, IPV6_PKTINFO) and len(d) == 20:
            idx = struct.unpack("i", d[16:])[0]
            v = "%s ifindex-is-lo=%s" % (socket.inet_ntop(socket.AF_INET6, d[:16]), idx == socket.if_nametoindex("lo"))
        else:
            v = d.hex()
        print("  ", level, ty, len(d), v)

def opt(s, level, name):
    return s.getsockopt(level, name)

rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.bind(("127.0.0.1", 0))
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
tx.setsockopt(SOL_IP, IP_TOS, 0x10)
tx.setsockopt(SOL_IP, IP_TTL, 33)
for level, name in [(SOL_IP, IP_PKTINFO), (SOL_IP, IP_RECVTTL), (SOL_IP, IP_RECVTOS), (socket.SOL_SOCKET, SO_TIMESTAMPNS)]:
    rx.setsockopt(level, name, 1)
print("options", [opt(rx, l, n) for l, n in [(SOL_IP, IP_PKTINFO), (SOL_IP, IP_RECVTTL), (SOL_IP, IP_RECVTOS), (socket.SOL_SOCKET, SO_TIMESTAMPNS), (socket.SOL_SOCKET, SO_TIMESTAMP)]])
for room in (1024, 52, 10):
    before = time.time()
    tx.sendto(b"hi", rx.getsockname())
    r = rx.recvmsg(16, room)
    show("v4 room %d" % room, r, before, time.time())
rx.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMP, 1)
print("after SO_TIMESTAMP", opt(rx, socket.SOL_SOCKET, SO_TIMESTAMPNS), opt(rx, socket.SOL_SOCKET, SO_TIMESTAMP))
before = time.time()
tx.sendto(b"hi", rx.getsockname())
show("v4 timeval", rx.recvmsg(16, 1024), before, time.time())

rx6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
rx6.bind(("::1", 0))
tx6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
tx6.setsockopt(SOL_IPV6, 16, 7)  # IPV6_UNICAST_HOPS
rx6.setsockopt(SOL_IPV6, IPV6_RECVPKTINFO, 1)
rx6.setsockopt(SOL_IPV6, IPV6_RECVHOPLIMIT, 1)
print("v6 options", opt(rx6, SOL_IPV6, IPV6_RECVPKTINFO), opt(rx6, SOL_IPV6, IPV6_RECVHOPLIMIT))
before = time.time()
tx6.sendto(b"hi6", rx6.getsockname())
show("v6", rx6.recvmsg(16, 1024), before, time.time())
"#;

#[test]
fn host_network_control_messages_match_native() {
    // The host's messages reach the guest only after the Sentry checked
    // and rebuilt them: what the guest sees must be what Linux gives a
    // program run natively in the same network namespace.
    let o = in_private_netns(
        "hostnet-cmsg",
        r#"echo "=== native"
/usr/bin/python3 -I "$DIR/cmsg.py"
echo "=== sandbox"
"$FV" do --network host -- /usr/bin/python3 -I "$DIR/cmsg.py" 2>/dev/null
echo "=== end $?"
"#,
    );
    let part = |from: &str, to: &str| {
        let a = o.stdout.find(from).map(|i| i + from.len());
        let b = o.stdout.find(to);
        match (a, b) {
            (Some(a), Some(b)) if a <= b => o.stdout[a..b].to_string(),
            _ => String::new(),
        }
    };
    let native = part("=== native\n", "=== sandbox\n");
    let sandbox = part("=== sandbox\n", "=== end");
    assert!(
        native.contains("   0 2 4 21000000") && native.contains("   41 52 4 07000000"),
        "native run incomplete\n{}",
        show(&o)
    );
    assert_eq!(native, sandbox, "\n{}", show(&o));
    assert!(o.stdout.contains("=== end 0"), "{}", show(&o));
}

/// A guest connection to the host's server, printing the outcome.
const TRY_HOST: &str = r#"
import errno, socket
try:
    socket.create_connection(("127.0.0.1", 7001), timeout=10).close()
    print("connected")
except OSError as e:
    print("connect", errno.errorcode.get(e.errno, str(e.errno)))
"#;

#[test]
fn without_network_host_the_same_connections_are_refused() {
    let o = in_private_netns(
        "hostnet-refused",
        &format!(
            r#"cat > "$DIR/try_host.py" <<'PY'
{TRY_HOST}
PY
for mode in "" "--network none" "--network sandbox --allow-cidr 192.0.2.0/24"; do
  echo "mode [$mode]: $("$FV" do $mode -- /usr/bin/python3 -I "$DIR/try_host.py")"
done
echo "log: $(grep -c 'tcp from' "$DIR/server.log")"
echo "host mode: $("$FV" do --network host -- /usr/bin/python3 -I "$DIR/try_host.py" 2>/dev/null)"
# A guest server without host networking is out of the host's reach.
"$FV" do -- /usr/bin/python3 -I "$DIR/guest_server.py" > "$DIR/guest.out" &
GUEST=$!
/usr/bin/python3 -I "$DIR/reach_guest.py"
wait $GUEST
echo "guest exit $?"
cat "$DIR/guest.out"
"#
        ),
    );
    for mode in [
        "mode []: connect ECONNREFUSED",
        "mode [--network none]: connect ECONNREFUSED",
        "mode [--network sandbox --allow-cidr 192.0.2.0/24]: connect ECONNREFUSED",
        // Nothing reached the host's server before host mode was asked for,
        // and then it did: the refusals are the sandbox's, not the server's.
        "log: 0",
        "host mode: connected",
        "host: refused",
        "guest exit 1",
        "no client",
    ] {
        assert!(o.stdout.contains(mode), "missing {mode:?}\n{}", show(&o));
    }
    // Only --network host warns (its stderr went to /dev/null above).
    assert!(
        !o.stderr.contains("shares the host's network"),
        "{}",
        show(&o)
    );
}

/// 100 MB from busybox nc in the sandbox to a busybox nc listening on the
/// (private) host loopback, outside the sandbox.
const NC_100MB_TO_HOST: &str = r#"
set -e
ip link set lo up
d=$(mktemp -d)
trap 'rm -rf $d' EXIT
head -c 100000000 /dev/urandom > $d/in
/bin/busybox nc -l -p 7200 -e /bin/busybox sh -c "cat > $d/out" &
listener=$!
i=0
until "$FV" do --network host -- /bin/busybox nc 127.0.0.1 7200 < $d/in 2>/dev/null; do
  i=$((i + 1)); [ $i -lt 100 ] || { echo "never connected"; exit 1; }
  sleep 0.05
done
wait $listener
echo "listener exit $?"
a=$(sha256sum < $d/in); b=$(sha256sum < $d/out)
[ "$a" = "$b" ] && echo "checksum unchanged" || echo "checksum CHANGED"
wc -c < $d/out
"#;

#[test]
fn host_network_busybox_nc_pipes_100mb_to_a_host_listener() {
    let mut cmd = command("unshare", &[("FV", FERROVISOR)]);
    cmd.args(["-n", "sh", "-c", NC_100MB_TO_HOST]);
    let o = run(cmd, None, TIMEOUT);
    assert_eq!(
        (o.status, o.stdout.as_str()),
        (0, "listener exit 0\nchecksum unchanged\n100000000\n"),
        "{}",
        show(&o)
    );
}
