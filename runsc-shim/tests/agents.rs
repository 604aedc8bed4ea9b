//! The agent-facing surfaces end to end: the Python SDK's own tests
//! (`sdk/python/tests`, pytest) against a real `ferrovisor serve`, the SDK
//! installed with pip, and the API's answers to bad requests.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Stdio;
use std::time::Duration;

use common::{command, run, TempDir};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sdk/python");

#[test]
fn the_python_sdk_passes_its_tests_against_serve() {
    let mut cmd = command(
        "/usr/bin/python3",
        &[
            ("FERROVISOR_BIN", FERROVISOR),
            ("PYTHONDONTWRITEBYTECODE", "1"),
        ],
    );
    cmd.args([
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        &format!("{SDK}/tests"),
    ]);
    let o = run(cmd, None, Duration::from_secs(600));
    assert_eq!(o.status, 0, "{}", common::show(&o));
    assert!(o.stdout.contains("6 passed"), "{}", o.stdout);
}

#[test]
fn the_sdk_installs_with_pip() {
    let dir = TempDir::new("sdk-pip");
    let venv = dir.path().join("venv");
    // (from a copy: building writes into the source folder)
    let script = format!(
        "cp -r {SDK} {d}/sdk && python3 -m venv --system-site-packages {v} && {v}/bin/pip install -q --no-build-isolation --no-deps --no-index {d}/sdk \
         && cd / && {v}/bin/python -c 'import ferrovisor, inspect; print(sorted(n for n in ferrovisor.__all__)); print(inspect.signature(ferrovisor.Sandbox.exec))'",
        v = venv.display(),
        d = dir.path().display()
    );
    let mut cmd = command("sh", &[]);
    cmd.args(["-c", &script]);
    let o = run(cmd, None, Duration::from_secs(300));
    assert_eq!(o.status, 0, "{}", common::show(&o));
    assert!(
        o.stdout.contains("'Sandbox'") && o.stdout.contains("on_stdout"),
        "{}",
        o.stdout
    );
}

/// A running `serve` on a socket of its own, ended (SIGTERM) on drop.
struct Serve {
    child: std::process::Child,
    socket: std::path::PathBuf,
    _dir: TempDir,
}

impl Serve {
    fn start(extra: &[&str]) -> Serve {
        let dir = TempDir::new("serve");
        let socket = dir.path().join("api.sock");
        let mut cmd = command(FERROVISOR, &[]);
        cmd.arg("--root").arg(dir.path()).arg("serve").args(extra);
        if !extra.iter().any(|a| a.starts_with("--listen")) {
            cmd.arg("--listen")
                .arg(format!("unix:{}", socket.display()));
        }
        let mut child = cmd.stderr(Stdio::piped()).spawn().expect("serve");
        let mut line = String::new();
        BufReader::new(child.stderr.take().expect("stderr"))
            .read_line(&mut line)
            .expect("serve's first line");
        assert!(line.contains("serving the sandbox API"), "{line}");
        Serve {
            child,
            socket,
            _dir: dir,
        }
    }

    /// One request on a fresh connection; the whole answer as text.
    fn ask(&self, raw: &str) -> String {
        let mut s = UnixStream::connect(&self.socket).expect("connect");
        s.write_all(raw.as_bytes()).expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("answer");
        out
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // SIGTERM: serve ends its sandboxes before it exits.
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

#[test]
fn the_api_answers_bad_requests_with_their_status() {
    let s = Serve::start(&[]);
    let status = |raw: &str| {
        let a = s.ask(raw);
        a.split(' ').nth(1).unwrap_or_default().to_string()
            + " "
            + a.rsplit('\n').next().unwrap_or_default()
    };
    let c = "Connection: close\r\n";
    assert!(status(&format!("GET /v1/nothing HTTP/1.1\r\n{c}\r\n"))
        .starts_with("404 {\"error\":\"no route"));
    assert!(status(&format!("PUT /v1/sandboxes HTTP/1.1\r\n{c}\r\n")).starts_with("405 "));
    let bad_json = format!("POST /v1/sandboxes HTTP/1.1\r\n{c}Content-Length: 5\r\n\r\n{{nope");
    assert!(
        status(&bad_json).starts_with("400 "),
        "{}",
        status(&bad_json)
    );
    let unknown = r#"{"name":"x","options":{"overlayy":true}}"#;
    let a = status(&format!(
        "POST /v1/sandboxes HTTP/1.1\r\n{c}Content-Length: {}\r\n\r\n{unknown}",
        unknown.len()
    ));
    assert!(a.starts_with("400 ") && a.contains("overlayy"), "{a}");
    let bad_name = r#"{"name":"a/b"}"#;
    let a = status(&format!(
        "POST /v1/sandboxes HTTP/1.1\r\n{c}Content-Length: {}\r\n\r\n{bad_name}",
        bad_name.len()
    ));
    assert!(a.starts_with("400 ") && a.contains("sandbox name"), "{a}");
    let args = r#"{"args":["x"]}"#;
    let a = status(&format!(
        "POST /v1/sandboxes/none/exec HTTP/1.1\r\n{c}Content-Length: {}\r\n\r\n{args}",
        args.len()
    ));
    assert!(a.starts_with("404 "), "{a}");
    assert!(status("GET / HTTP/2\r\n\r\n").starts_with("505 "));
    // The socket is the owner's only.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&s.socket)
        .expect("socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn tcp_needs_loopback_and_a_token() {
    let dir = TempDir::new("serve-tcp");
    let o = run(
        {
            let mut c = command(FERROVISOR, &[]);
            c.arg("--root")
                .arg(dir.path())
                .args(["serve", "--listen", "tcp:0.0.0.0:0"]);
            c
        },
        None,
        Duration::from_secs(30),
    );
    assert_eq!(o.status, 2);
    assert!(o.stderr.contains("loopback only"), "{}", o.stderr);
    let o = run(
        {
            let mut c = command(FERROVISOR, &[]);
            c.arg("--root")
                .arg(dir.path())
                .args(["serve", "--listen", "tcp:127.0.0.1:0"]);
            c
        },
        None,
        Duration::from_secs(30),
    );
    assert_eq!(o.status, 1);
    assert!(o.stderr.contains("--token-file"), "{}", o.stderr);
    // With a token: refused without it, answered with it.
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret-token\n").expect("token");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        l.local_addr().expect("addr").port()
    };
    let listen = format!("--listen=tcp:127.0.0.1:{port}");
    let tok = format!("--token-file={}", token.display());
    let _s = Serve::start(&[&listen, &tok]);
    let ask = |auth: &str| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        write!(
            s,
            "GET /v1/health HTTP/1.1\r\nConnection: close\r\n{auth}\r\n"
        )
        .expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("answer");
        out
    };
    assert!(ask("").starts_with("HTTP/1.1 401"), "{}", ask(""));
    assert!(ask("Authorization: Bearer wrong\r\n").starts_with("HTTP/1.1 401"));
    let ok = ask("Authorization: Bearer s3cret-token\r\n");
    assert!(
        ok.starts_with("HTTP/1.1 200") && ok.contains("\"ok\":true"),
        "{ok}"
    );
}
