//! Helpers shared by the integration tests: a stack with a notifier that
//! tests can wait on, the way the Sentry's wait queues will.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use netstack::{Domain, Errno, Socket, SocketType, Stack, StackConfig};

/// Counts notifications so a test can sleep until the next one.
#[derive(Default)]
pub struct Waiter {
    count: Mutex<u64>,
    cond: Condvar,
}

impl Waiter {
    pub fn bump(&self) {
        *self.count.lock().expect("lock") += 1;
        self.cond.notify_all();
    }

    pub fn generation(&self) -> u64 {
        *self.count.lock().expect("lock")
    }

    /// Sleeps until a notification newer than `gen`, or `timeout`.
    pub fn wait(&self, gen: u64, timeout: Duration) {
        let g = self.count.lock().expect("lock");
        let _ = self
            .cond
            .wait_timeout_while(g, timeout, |c| *c == gen)
            .expect("lock");
    }
}

pub fn stack() -> (Arc<Stack>, Arc<Waiter>) {
    let stack = Stack::new(StackConfig::default());
    let waiter = Arc::new(Waiter::default());
    let w = waiter.clone();
    stack.set_notifier(Arc::new(move |_ids| w.bump()));
    (stack, waiter)
}

pub fn tcp(stack: &Arc<Stack>, v6: bool) -> Socket {
    let d = if v6 { Domain::Inet6 } else { Domain::Inet };
    stack.socket(d, SocketType::Stream).expect("socket")
}

pub fn udp(stack: &Arc<Stack>, v6: bool) -> Socket {
    let d = if v6 { Domain::Inet6 } else { Domain::Inet };
    stack.socket(d, SocketType::Datagram).expect("socket")
}

pub fn addr(s: &str) -> SocketAddr {
    s.parse().expect("address")
}

/// Retries `f` while it says `EAGAIN`, sleeping on the notifier, for at most
/// `timeout`: a blocking call as the Sentry builds it.
pub fn blocking<T>(
    w: &Waiter,
    timeout: Duration,
    mut f: impl FnMut() -> Result<T, Errno>,
) -> Result<T, Errno> {
    let end = Instant::now() + timeout;
    loop {
        let gen = w.generation();
        match f() {
            Err(Errno::EAGAIN) if Instant::now() < end => {
                w.wait(gen, Duration::from_millis(50));
            }
            r => return r,
        }
    }
}

/// A listener on `ip`, port chosen by the stack.
pub fn listener(stack: &Arc<Stack>, ip: &str, backlog: i32) -> (Socket, SocketAddr) {
    let v6 = ip.contains(':');
    let l = tcp(stack, v6);
    let a = if v6 {
        addr(&format!("[{ip}]:0"))
    } else {
        addr(&format!("{ip}:0"))
    };
    l.bind(a).expect("bind");
    l.listen(backlog).expect("listen");
    let local = l.local_addr().expect("local addr");
    assert_ne!(local.port(), 0);
    (l, local)
}

/// Connects and waits for the outcome, as a blocking connect(2) does.
pub fn connect(w: &Waiter, s: &Socket, to: SocketAddr) -> Result<(), Errno> {
    match s.connect(to) {
        Err(Errno::EINPROGRESS) => {}
        r => return r,
    }
    blocking(w, Duration::from_secs(10), || {
        let r = s.readiness()?;
        if r.writable || r.error {
            Ok(())
        } else {
            Err(Errno::EAGAIN)
        }
    })?;
    match s.take_error()? {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Sends all of `data`.
pub fn send_all(w: &Waiter, s: &Socket, mut data: &[u8]) {
    while !data.is_empty() {
        let n = blocking(w, Duration::from_secs(10), || s.send(data)).expect("send");
        data = &data[n..];
    }
}

/// Reads until EOF.
pub fn read_to_end(w: &Waiter, s: &Socket) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = blocking(w, Duration::from_secs(10), || s.recv(&mut buf, false)).expect("recv");
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// Reads exactly `n` bytes.
pub fn read_exact(w: &Waiter, s: &Socket, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    let mut got = 0;
    while got < n {
        let k = blocking(w, Duration::from_secs(10), || {
            s.recv(&mut out[got..], false)
        })
        .expect("recv");
        assert!(k > 0, "unexpected EOF after {got} of {n} bytes");
        got += k;
    }
    out
}
