//! `exec` of `/bin/true` in a running sandbox through the API of
//! `ferrovisor serve` (an HTTP request on its Unix socket, kept open,
//! answered with the program's streamed end), against `fork`+`exec`+`wait`
//! of `/bin/true` natively, in the same run. The issue's goal: 2 ms.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use benches::{criterion, ferrovisor_bin};
use criterion::SamplingMode;

fn fail(message: &str) -> ! {
    eprintln!("error: agent_exec: {message}");
    std::process::exit(1);
}

/// One kept-open connection to the API.
struct Api {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Api {
    fn connect(path: &Path) -> Api {
        let s =
            UnixStream::connect(path).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
        Api {
            reader: BufReader::new(s.try_clone().unwrap_or_else(|e| fail(&e.to_string()))),
            writer: s,
        }
    }

    /// Sends a request; returns the status and the body (chunks joined).
    fn post(&mut self, path: &str, body: &str) -> (u16, String) {
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.writer
            .write_all(req.as_bytes())
            .unwrap_or_else(|e| fail(&e.to_string()));
        let mut line = String::new();
        self.reader
            .read_line(&mut line)
            .unwrap_or_else(|e| fail(&e.to_string()));
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let (mut len, mut chunked) = (0usize, false);
        loop {
            line.clear();
            self.reader
                .read_line(&mut line)
                .unwrap_or_else(|e| fail(&e.to_string()));
            let l = line.trim_end().to_ascii_lowercase();
            if l.is_empty() {
                break;
            }
            if let Some(v) = l.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
            if l == "transfer-encoding: chunked" {
                chunked = true;
            }
        }
        let mut out = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.reader
                    .read_line(&mut line)
                    .unwrap_or_else(|e| fail(&e.to_string()));
                let n = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
                let mut chunk = vec![0; n + 2];
                self.reader
                    .read_exact(&mut chunk)
                    .unwrap_or_else(|e| fail(&e.to_string()));
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&chunk[..n]);
            }
        } else {
            out.resize(len, 0);
            self.reader
                .read_exact(&mut out)
                .unwrap_or_else(|e| fail(&e.to_string()));
        }
        (status, String::from_utf8_lossy(&out).into_owned())
    }
}

fn median_ms(calls: &[Vec<f64>]) -> Option<f64> {
    let tail = calls.len().checked_sub(10)?;
    let mut ms: Vec<f64> = calls[tail..].concat();
    ms.sort_by(f64::total_cmp);
    ms.get(ms.len() / 2).copied()
}

fn main() {
    let bin = ferrovisor_bin();
    if !bin.is_file() {
        fail(&format!(
            "{} not found (cargo build --release -p runsc-shim)",
            bin.display()
        ));
    }
    let work: PathBuf =
        std::env::temp_dir().join(format!("bench-agent-exec-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap_or_else(|e| fail(&e.to_string()));
    let socket = work.join("api.sock");
    let mut serve = Command::new(&bin)
        .arg("--root")
        .arg(&work)
        .arg("serve")
        .arg("--listen")
        .arg(format!("unix:{}", socket.display()))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| fail(&e.to_string()));
    let mut line = String::new();
    let _ = BufReader::new(serve.stderr.take().unwrap_or_else(|| fail("no stderr")))
        .read_line(&mut line);
    let mut api = Api::connect(&socket);
    let (status, body) = api.post("/v1/sandboxes", r#"{"name":"bench"}"#);
    if status != 201 {
        fail(&format!("create: {status} {body}"));
    }
    let exec = r#"{"args":["/bin/true"]}"#;
    let (status, body) = api.post("/v1/sandboxes/bench/exec", exec);
    if status != 200 || !body.contains(r#""exit":{"status":0"#) {
        fail(&format!("exec: {status} {body}"));
    }

    let mut c = criterion();
    let mut group = c.benchmark_group("agent_exec");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sampling_mode(SamplingMode::Flat);
    let mut native_calls: Vec<Vec<f64>> = Vec::new();
    group.bench_function("native fork+exec+wait /bin/true", |b| {
        b.iter_custom(|iters| {
            let mut runs = Vec::new();
            for _ in 0..iters {
                let t = Instant::now();
                let ok = Command::new("/bin/true")
                    .status()
                    .is_ok_and(|s| s.success());
                runs.push(t.elapsed());
                if !ok {
                    fail("/bin/true failed natively");
                }
            }
            native_calls.push(runs.iter().map(|d| d.as_secs_f64() * 1e3).collect());
            runs.iter().sum()
        });
    });
    let mut api_calls: Vec<Vec<f64>> = Vec::new();
    group.bench_function("api exec /bin/true", |b| {
        b.iter_custom(|iters| {
            let mut runs = Vec::new();
            for _ in 0..iters {
                let t = Instant::now();
                let (status, body) = api.post("/v1/sandboxes/bench/exec", exec);
                runs.push(t.elapsed());
                if status != 200 || !body.contains(r#""status":0"#) {
                    fail(&format!("exec: {status} {body}"));
                }
            }
            api_calls.push(runs.iter().map(|d| d.as_secs_f64() * 1e3).collect());
            runs.iter().sum()
        });
    });
    group.finish();
    let _ = Command::new("kill").arg(serve.id().to_string()).status();
    let _ = serve.wait();
    let _ = std::fs::remove_dir_all(&work);
    if let (Some(n), Some(a)) = (median_ms(&native_calls), median_ms(&api_calls)) {
        println!(
            "agent_exec: native {n:.3} ms, through the API {a:.3} ms, ratio {:.1}x (goal: 2 ms)",
            a / n
        );
    }
}
