//! Real programs with processes, threads and signals (issue 3, point 6):
//! busybox `sh` and `bash` scripts (pipelines, command substitution,
//! subshells, `while read`, here-docs, background jobs, traps, `xargs -P`)
//! and `python3` programs (threads, pools, subprocesses, fork, alarm, epoll,
//! sleep), each run natively and under `ferrovisor do`: stdout and exit
//! status must agree.
//!
//! Scripts print relations between PIDs ("distinct", "same"), never the PIDs
//! themselves, and sort the output of concurrent jobs.

mod common;

use std::time::Duration;

use common::{command, run};

const FERROVISOR: &str = env!("CARGO_BIN_EXE_ferrovisor");
const TIMEOUT: Duration = Duration::from_secs(60);
const BUSYBOX_SH: &[&str] = &["/bin/busybox", "sh", "-c"];
const BASH: &[&str] = &["/bin/bash", "-c"];
const PYTHON: &[&str] = &["/usr/bin/python3", "-I", "-c"];

/// Runs `interp + [script]` natively (which must exit `native_status` and
/// print `must_contain`, or the test is wrong) and in the sandbox, and
/// asserts equal stdout and status.
fn compare(label: &str, interp: &[&str], script: &str, native_status: i32, must_contain: &str) {
    let mut nat_cmd = command(interp[0], &[]);
    nat_cmd.args(&interp[1..]).arg(script);
    let nat = run(nat_cmd, None, TIMEOUT);
    assert_eq!(
        nat.status, native_status,
        "{label}: the NATIVE run exited {} (stderr: {}), so the test is wrong\nstdout:\n{}",
        nat.status, nat.stderr, nat.stdout
    );
    assert!(
        nat.stdout.contains(must_contain),
        "{label}: the NATIVE output lacks {must_contain:?}, so the test is wrong:\n{}",
        nat.stdout
    );
    let mut sb_cmd = command(FERROVISOR, &[]);
    sb_cmd.arg("do").arg("--").args(interp).arg(script);
    let sb = run(sb_cmd, None, TIMEOUT);
    if nat.stdout != sb.stdout || nat.status != sb.status {
        panic!(
            "{label}: sandbox differs from native\nexit status: native {} / sandbox {}\n\
             --- native stdout ---\n{}--- sandbox stdout ---\n{}--- sandbox stderr ---\n{}",
            nat.status, sb.status, nat.stdout, sb.stdout, sb.stderr
        );
    }
}

// ---- shell scripts, run by busybox sh and by bash ----------------------------

/// Five commands in a pipeline, and a pipeline's status (the last command's).
const PIPELINE: &str = r#"
seq 1 300 | grep 7 | sort -r | head -n 12 | tr 0-9 a-j
printf 'b\na\nc\na\nb\na\n' | sort | uniq -c | sort -rn | awk '{print $2 "=" $1}'
echo hello | cat | cat | cat | wc -c
false | true; echo "status $?"
true | false; echo "status $?"
seq 1 100000 | head -n 1
echo done
"#;

/// `$(...)`, nested, in arithmetic and in here-strings of words.
const COMMAND_SUBSTITUTION: &str = r#"
x=$(echo a; echo b | tr a-z A-Z)
echo "x=[$x]"
n=$(( $(seq 1 10 | wc -l) * 2 ))
echo "n=$n"
echo "nested $(echo $(echo deep $(echo deeper)))"
lines=$(printf 'one\ntwo\n\n\n')
echo "trailing newlines stripped: [$lines]"
st=$(exit 3); echo "status of substitution $?"
count=0
for w in $(echo w1 w2 w3); do count=$((count + 1)); done
echo "words $count"
me=$$
inner=$(echo $$)
[ "$me" = "$inner" ] && echo "\$\$ is the same in a substitution"
"#;

/// `( ... )` runs in a copy of the shell: variables, cwd and exit stay inside.
const SUBSHELLS: &str = r#"
a=outer
(a=inner; echo "in $a"; cd /etc; pwd; exit 3)
echo "status $? a=$a pwd=$(pwd)"
( ( (echo three deep; exit 4) ); echo "inner status $?" )
{ echo group1; echo group2; } | wc -l
(trap 'echo subshell exit trap' EXIT; echo in subshell)
{ (sleep 0.1; echo slow) & (echo fast); wait; } | sort
v=$( (echo sub; echo shell) | tr '\n' ' ')
echo "v=$v"
"#;

/// `while read` over a pipe, a file and a here-doc, with IFS splitting.
const WHILE_READ: &str = r#"
printf 'a 1\nb 2\nc 3\n' | while read k v; do echo "$v=$k"; done
while IFS=: read user x uid rest; do
  [ "$uid" = 0 ] && echo "uid 0 is $user"
done < /etc/passwd
total=0
while read n; do total=$((total + n)); done <<EOF
10
20
30
EOF
echo "total $total"
seq 1 5 | while read i; do [ $i -eq 3 ] && break; echo "i=$i"; done
printf 'no newline at end' | { read line; echo "read status $? line=[$line]"; }
"#;

/// Here-docs: expanding, quoted (literal), tab-stripping, several at once.
const HEREDOCS: &str = "
name=world
cat <<EOF
hello $name
sum $((2 + 3))
cmd $(echo substituted)
EOF
cat <<'EOF'
literal $name $(echo not run)
EOF
cat <<-EOF
\tleading tabs stripped $name
\t\tall of them
\tEOF
cat <<A; cat <<B
first doc
A
second doc
B
wc -l <<EOF
1
2
3
EOF
";

/// Background jobs: `$!`, `wait PID` with its status, `wait` for all,
/// `kill -0`, and the order of concurrent output fixed by sorting.
const BACKGROUND: &str = r#"
sleep 1 & p1=$!
(sleep 0.1; exit 7) & p2=$!
[ "$p1" != "$p2" ] && echo "distinct pids"
[ "$p1" != "$$" ] && echo "not the shell's pid"
wait $p2; echo "p2 status $?"
kill -0 $p1 && echo "p1 still running"
wait $p1; echo "p1 status $?"
kill -0 $p1 2>/dev/null || echo "p1 gone"
{
  for i in 1 2 3 4 5; do (sleep 0.0$i; echo "job $i") & done
  wait
} | sort
(exit 5) & wait $!; echo "last status $?"
sleep 5 & p3=$!
kill $p3; wait $p3; echo "killed status $?"
echo done
"#;

/// Traps on INT, TERM and EXIT; `kill` to the shell itself and to a child
/// shell that traps TERM (readiness through a file, not a sleep).
const TRAPS: &str = r#"
d=$(mktemp -d)
trap 'echo "got TERM"' TERM
trap 'echo "got INT"' INT
trap 'echo "exit trap"; rm -rf "$d"' EXIT
kill -TERM $$
kill -INT $$
echo "after self-signals"
$SH -c 'trap "echo child got TERM; exit 4" TERM; touch "$1/ready"; while :; do sleep 0.02; done' sh "$d" &
c=$!
while [ ! -e "$d/ready" ]; do sleep 0.01; done
kill -TERM $c
wait $c; echo "child status $?"
$SH -c 'kill -USR1 $$; echo not reached' ; echo "USR1 default status $?"
$SH -c 'trap "" TERM; kill -TERM $$; echo ignored TERM'
trap - INT
trap 'echo "second INT trap"' INT
kill -INT $$
exit 3
"#;

/// `xargs -P 2` running jobs in parallel, `-n`, `-I`, and a failing job.
const XARGS: &str = r#"
seq 1 12 | xargs -P 2 -n 1 sh -c 'sleep 0.0$(( $0 % 3 )); echo item $0' | sort -k2 -n
seq 1 9 | xargs -n 4 echo
printf 'a\nb\nc\n' | xargs -I{} -P 2 sh -c 'echo "<{}>"' | sort
seq 1 4 | xargs -P 2 -n 1 sh -c 'exit $(( $0 == 3 ))'; echo "xargs status $?"
echo done
"#;

fn busybox(label: &str, script: &str, status: i32, must: &str) {
    let script = format!("SH='/bin/busybox sh'\n{script}");
    // busybox sh finds its own applets first; make xargs and friends busybox's too.
    let script = script
        .replace("| xargs", "| /bin/busybox xargs")
        .replace(" sh -c", " /bin/busybox sh -c");
    compare(label, BUSYBOX_SH, &script, status, must);
}

fn bash(label: &str, script: &str, status: i32, must: &str) {
    let script = format!("SH=/bin/bash\n{script}");
    compare(label, BASH, &script, status, must);
}

/// fifo(7): each blocking open waits for the other end, whichever comes
/// first; a non-blocking writer with no reader fails; `O_RDWR` does not wait.
const FIFO: &str = r#"
d=$(mktemp -d); mkfifo $d/f
(read x <$d/f; echo "reader got $x") & sleep 0.3; echo ping >$d/f; wait
(echo pong >$d/f; echo "writer done") & sleep 0.3; read y <$d/f; wait; echo "read $y"
exec 3<>$d/f; echo "rdwr opened"; exec 3<&-
python3 -c "import os,sys
try: os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)
except OSError as e: print('nonblocking writer:', e.strerror)" $d/f
rm -r $d; echo done
"#;

#[test]
fn bash_fifo_opens_wait_for_the_other_end() {
    compare("fifo", BASH, FIFO, 0, "No such device or address");
}

#[test]
fn busybox_sh_pipeline_of_five() {
    busybox("busybox pipeline", PIPELINE, 0, "done");
}

#[test]
fn busybox_sh_command_substitution() {
    busybox("busybox $(...)", COMMAND_SUBSTITUTION, 0, "is the same");
}

#[test]
fn busybox_sh_subshells() {
    busybox("busybox subshells", SUBSHELLS, 0, "v=sub shell");
}

#[test]
fn busybox_sh_while_read() {
    busybox("busybox while read", WHILE_READ, 0, "total 60");
}

#[test]
fn busybox_sh_heredocs() {
    busybox("busybox here-docs", HEREDOCS, 0, "second doc");
}

#[test]
fn busybox_sh_background_jobs() {
    busybox("busybox background", BACKGROUND, 0, "job 5");
}

#[test]
fn busybox_sh_traps_and_kill() {
    busybox("busybox traps", TRAPS, 3, "child status 4");
}

#[test]
fn busybox_xargs_parallel() {
    busybox("busybox xargs -P 2", XARGS, 0, "item 12");
}

#[test]
fn bash_pipeline_of_five() {
    bash("bash pipeline", PIPELINE, 0, "done");
}

#[test]
fn bash_command_substitution() {
    bash("bash $(...)", COMMAND_SUBSTITUTION, 0, "is the same");
}

#[test]
fn bash_subshells() {
    bash("bash subshells", SUBSHELLS, 0, "v=sub shell");
}

#[test]
fn bash_while_read() {
    bash("bash while read", WHILE_READ, 0, "total 60");
}

#[test]
fn bash_heredocs() {
    bash("bash here-docs", HEREDOCS, 0, "second doc");
}

#[test]
fn bash_background_jobs() {
    bash("bash background", BACKGROUND, 0, "job 5");
}

#[test]
fn bash_traps_and_kill() {
    bash("bash traps", TRAPS, 3, "child status 4");
}

#[test]
fn bash_xargs_parallel() {
    bash("bash xargs -P 2", XARGS, 0, "item 12");
}

/// What bash has beyond POSIX sh: process substitution, `wait -n`,
/// `$BASHPID` in subshells, PIPESTATUS, coprocesses.
#[test]
fn bash_extras() {
    let script = r#"
diff <(seq 1 5) <(seq 1 5) && echo "process substitution equal"
cat <(echo from) <(echo two) <(echo fds)
(sleep 0.2; exit 2) & (sleep 0.05; exit 1) &
wait -n; echo "first to finish $?"
wait -n; echo "second to finish $?"
[ "$BASHPID" = "$$" ] && echo "BASHPID is \$\$ at top"
( [ "$BASHPID" != "$$" ] && echo "BASHPID differs in a subshell" )
true | false | true; echo "PIPESTATUS ${PIPESTATUS[*]}"
coproc UPPER { tr a-z A-Z; }
echo shout >&"${UPPER[1]}"
exec {UPPER[1]}>&-
read -r got <&"${UPPER[0]}"; echo "coproc said $got"
wait $UPPER_PID 2>/dev/null
arr=(); for i in {1..20}; do arr+=($((i * i))); done; echo "${#arr[@]} ${arr[19]}"
echo done
"#;
    compare("bash extras", BASH, script, 0, "coproc said SHOUT");
}

// ---- python3 ----------------------------------------------------------------

#[test]
fn python_threading_eight_threads_and_locks() {
    let script = r#"
import threading, queue
N = 8
lock = threading.Lock()
counter = 0
go = threading.Event()
def work(n):
    global counter
    go.wait()
    for _ in range(20000):
        with lock:
            counter += 1
threads = [threading.Thread(target=work, args=(i,)) for i in range(N)]
for t in threads: t.start()
print("active while waiting", threading.active_count())
go.set()
for t in threads: t.join()
print("counter", counter)

# Condition: a producer and 8 consumers.
cond = threading.Condition()
items, done = [], False
got = []
def consume():
    while True:
        with cond:
            while not items and not done:
                cond.wait()
            if not items and done:
                return
            got.append(items.pop())
cs = [threading.Thread(target=consume) for _ in range(N)]
for c in cs: c.start()
for i in range(1000):
    with cond:
        items.append(i)
        cond.notify()
with cond:
    done = True
    cond.notify_all()
for c in cs: c.join()
print("consumed", len(got), sum(got))

# Barrier, Event, Semaphore, RLock, thread-local, queue.
barrier = threading.Barrier(N)
ev = threading.Event()
sem = threading.BoundedSemaphore(3)
inside, peak = 0, 0
plock = threading.RLock()
local = threading.local()
q = queue.Queue()
def party(i):
    global inside, peak
    local.me = i
    barrier.wait()
    ev.wait()
    with sem:
        with plock:
            with plock:
                inside += 1
                peak = max(peak, inside)
        threading.Event().wait(0.01)
        with plock:
            inside -= 1
    q.put(local.me)
ps = [threading.Thread(target=party, args=(i,)) for i in range(N)]
for p in ps: p.start()
ev.set()
for p in ps: p.join()
print("peak within semaphore", peak <= 3, "results", sorted(q.get() for _ in range(N)))
idents = set()
def ident(): idents.add((threading.get_ident(), threading.get_native_id()))
ts = [threading.Thread(target=ident) for _ in range(N)]
for t in ts: t.start()
for t in ts: t.join()
print("distinct native ids", len({n for _, n in idents}) == N)
print("main thread alone", threading.active_count())
t = threading.Timer(0.05, lambda: print("timer fired"))
t.start(); t.join()
"#;
    compare("python threading", PYTHON, script, 0, "counter 160000");
}

#[test]
fn python_concurrent_futures_thread_and_process_pools() {
    let script = r#"
import concurrent.futures as cf, os, time
def square(x):
    return x * x
def pid_of(_):
    time.sleep(0.01)
    return os.getpid()
with cf.ThreadPoolExecutor(max_workers=4) as ex:
    print("threads", sum(ex.map(square, range(1000))))
    futs = [ex.submit(square, i) for i in range(10)]
    print("as_completed", sorted(f.result() for f in cf.as_completed(futs)))
    bad = ex.submit(lambda: 1 / 0)
    try:
        bad.result()
    except ZeroDivisionError:
        print("exception propagated")
with cf.ProcessPoolExecutor(max_workers=2) as ex:
    print("processes", sum(ex.map(square, range(200), chunksize=10)))
    pids = set(ex.map(pid_of, range(20)))
    print("worker pids not ours", os.getpid() not in pids, "at most 2", 1 <= len(pids) <= 2)
import multiprocessing as mp
ctx = mp.get_context("fork")
with ctx.Pool(2) as pool:
    print("mp pool", pool.map(square, range(8)))
q = ctx.Queue()
p = ctx.Process(target=q.put, args=("from child",))
p.start(); print(q.get()); p.join(); print("exitcode", p.exitcode)
"#;
    compare("python concurrent.futures", PYTHON, script, 0, "exitcode 0");
}

/// Pseudo-terminals from Python: `os.openpty()` (isatty, ttyname, termios
/// canonical and raw mode, window size) and `pty.fork()` (a child session
/// with the slave as controlling terminal and standard streams: its output
/// through ONLCR, a line typed at the master, ^C as SIGINT, EIO at the
/// master once the child is gone).
#[test]
fn python_pty_openpty_and_fork() {
    let script = r#"
import os, pty, termios, tty, signal, select, sys, fcntl, struct

def read_until(fd, marker, n=1 << 16):
    buf = b""
    while marker not in buf and len(buf) < n:
        r, _, _ = select.select([fd], [], [], 5)
        if not r:
            break
        try:
            d = os.read(fd, 1024)
        except OSError as e:
            buf += b"<%s>" % os.strerror(e.errno).encode()
            break
        if not d:
            break
        buf += d
    return buf

m, s = os.openpty()
print("isatty", os.isatty(m), os.isatty(s))
print("ttyname ok", os.ttyname(s).startswith("/dev/pts/"))
attrs = termios.tcgetattr(s)
print("icanon", bool(attrs[3] & termios.ICANON), "echo", bool(attrs[3] & termios.ECHO))
os.write(m, b"hello\n")
print("slave read", os.read(s, 100))
print("echo", read_until(m, b"\n"))
tty.setraw(s)
os.write(m, b"raw\x03")
print("raw read", read_until(s, b"\x03"))
termios.tcsetattr(s, termios.TCSANOW, attrs)
fcntl.ioctl(m, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
print("winsize", struct.unpack("HHHH", fcntl.ioctl(s, termios.TIOCGWINSZ, b"\0" * 8))[:2])
os.close(s)
os.close(m)

sys.stdout.flush()
pid, fd = pty.fork()
if pid == 0:
    # stdout's buffering was chosen when it was not a terminal
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    print("child tty", os.isatty(0), os.ttyname(0).startswith("/dev/pts/"))
    print("child sid is pid", os.getsid(0) == os.getpid())
    print("fg is me", os.tcgetpgrp(0) == os.getpgrp())
    print("ctty", os.ttyname(os.open("/dev/tty", os.O_RDWR)))
    line = sys.stdin.readline()
    print("got", repr(line))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    print("waiting", flush=True)
    print("signal", signal.sigwait({signal.SIGINT}) == signal.SIGINT, flush=True)
    os._exit(7)
out = read_until(fd, b"ctty /dev/tty\r\n")
os.write(fd, b"typed\n")
out += read_until(fd, b"waiting")
os.write(fd, b"\x03")
out += read_until(fd, b"signal")
_, st = os.waitpid(pid, 0)
out += read_until(fd, b"never")
print(out.decode().replace("\r\n", "\n"), end="")
print("exit", os.waitstatus_to_exitcode(st))
"#;
    compare("python pty", PYTHON, script, 0, "exit 7");
}

/// Interactive `bash` job control on a pseudo-terminal, driven from the
/// master by Python: ^Z stops the foreground job (SIGTSTP to its group,
/// bash sees the stop and takes the terminal back), `jobs` lists it, `fg`
/// hands it the terminal again and continues it, it reads a line typed at
/// the master, ^C kills it (status 130), and `exit` ends the session.
#[test]
fn bash_job_control_on_a_pty() {
    let script = r#"
import os, pty, select, sys

def read_until(fd, marker):
    buf = b""
    while marker not in buf:
        r, _, _ = select.select([fd], [], [], 10)
        if not r:
            buf += b"<timeout>"
            break
        try:
            d = os.read(fd, 4096)
        except OSError as e:
            buf += b"<%s>" % os.strerror(e.errno).encode()
            break
        if not d:
            break
        buf += d
    return buf

pid, fd = pty.fork()
if pid == 0:
    os.execve("/bin/bash", ["bash", "--norc", "--noprofile", "--noediting", "-i"],
              {"PS1": "$ ", "PATH": "/usr/bin:/bin", "TERM": "dumb", "LC_ALL": "C"})
out = read_until(fd, b"$ ")
os.write(fd, b"sh -c 'echo ready; read x; echo got $x; read y; echo not reached'\n")
out += read_until(fd, b"ready\r\n")
os.write(fd, b"\x1a")
out += read_until(fd, b"$ ")
os.write(fd, b"jobs\n")
out += read_until(fd, b"$ ")
os.write(fd, b"fg\n")
out += read_until(fd, b"not reached'\r\n")
os.write(fd, b"line\n")
out += read_until(fd, b"got line\r\n")
os.write(fd, b"\x03")
out += read_until(fd, b"$ ")
os.write(fd, b"echo status $?\n")
out += read_until(fd, b"$ ")
os.write(fd, b"exit 3\n")
out += read_until(fd, b"<never>")
_, st = os.waitpid(pid, 0)
sys.stdout.write(out.decode().replace("\r\n", "\n"))
print("\nbash exit", os.waitstatus_to_exitcode(st))
"#;
    compare("bash job control", PYTHON, script, 0, "status 130");
}

#[test]
fn python_subprocess_with_pipes() {
    let script = r#"
import subprocess, sys
r = subprocess.run(["/bin/busybox", "tr", "a-z", "A-Z"], input=b"hello pipes\n", capture_output=True)
print(r.returncode, r.stdout)
r = subprocess.run("echo out; echo err >&2; exit 3", shell=True, capture_output=True, text=True)
print(r.returncode, repr(r.stdout), repr(r.stderr))
p1 = subprocess.Popen(["/usr/bin/seq", "1", "1000"], stdout=subprocess.PIPE)
p2 = subprocess.Popen(["/bin/busybox", "grep", "7"], stdin=p1.stdout, stdout=subprocess.PIPE)
p3 = subprocess.Popen(["/usr/bin/wc", "-l"], stdin=p2.stdout, stdout=subprocess.PIPE)
p1.stdout.close(); p2.stdout.close()
print("pipeline", p3.communicate()[0].decode().strip(), p1.wait(), p2.wait(), p3.returncode)
big = subprocess.run(["/bin/cat"], input=b"x" * 1000000, capture_output=True)
print("big round trip", len(big.stdout))
try:
    subprocess.run(["/bin/sleep", "5"], timeout=0.3)
except subprocess.TimeoutExpired:
    print("timeout expired")
p = subprocess.Popen(["/bin/sleep", "5"])
p.terminate(); print("terminated", p.wait())
print(subprocess.check_output(["/bin/echo", "check_output"]).decode().strip())
try:
    subprocess.check_call(["/bin/false"])
except subprocess.CalledProcessError as e:
    print("CalledProcessError", e.returncode)
try:
    subprocess.run(["/nonexistent/program"])
except FileNotFoundError:
    print("FileNotFoundError")
r = subprocess.run([sys.executable, "-I", "-c", "import os; print(os.getppid() > 0)"], capture_output=True, text=True)
print("python child", r.stdout.strip())
"#;
    compare("python subprocess", PYTHON, script, 0, "python child True");
}

#[test]
fn python_fork_and_waitpid() {
    let script = r#"
import os, signal, time
parent = os.getpid()
kids = {}
for i in range(5):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, b"%d %d" % (os.getppid() == parent, os.getpid() != parent))
        os._exit(10 + i)
    os.close(w)
    kids[pid] = (i, r)
for pid, (i, r) in sorted(kids.items(), key=lambda kv: kv[1][0]):
    msg = os.read(r, 100).decode()
    wpid, status = os.waitpid(pid, 0)
    print(i, "child says", msg, "same pid", wpid == pid, "exit", os.WEXITSTATUS(status))
pid = os.fork()
if pid == 0:
    time.sleep(0.3)
    os._exit(0)
print("WNOHANG while running", os.waitpid(pid, os.WNOHANG))
os.kill(pid, signal.SIGKILL)
_, status = os.waitpid(pid, 0)
print("killed", os.WIFSIGNALED(status), os.WTERMSIG(status))
try:
    os.waitpid(-1, 0)
except ChildProcessError:
    print("no more children")
pid = os.fork()
if pid == 0:
    os.execv("/bin/busybox", ["busybox", "sh", "-c", "exit 42"])
print("exec'd child", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w)
    os.kill(os.getpid(), signal.SIGSTOP)
    os.read(r, 1)  # stay alive until the parent has seen the continue
    os._exit(1)
os.close(r)
_, status = os.waitpid(pid, os.WUNTRACED)
print("stopped", os.WIFSTOPPED(status), os.WSTOPSIG(status) == signal.SIGSTOP)
os.kill(pid, signal.SIGCONT)
_, status = os.waitpid(pid, os.WCONTINUED)
print("continued", os.WIFCONTINUED(status))
os.close(w)
_, status = os.waitpid(pid, 0)
print("exit after continue", os.WEXITSTATUS(status))
"#;
    compare("python fork", PYTHON, script, 0, "exit after continue 1");
}

/// Process descriptors from Python (test_signal's `pidfd_send_signal`
/// case, and asyncio's `PidfdChildWatcher`): `os.pidfd_open`, poll
/// readiness when the child dies, `signal.pidfd_send_signal` (also through
/// a `/proc/[pid]` directory), `os.waitid(P_PIDFD)`, and an asyncio
/// subprocess watched through a pidfd in the event loop's epoll set.
#[test]
fn python_pidfd_and_asyncio_pidfd_child_watcher() {
    let script = r#"
import asyncio, os, select, signal, subprocess, sys
p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
fd = os.pidfd_open(p.pid)
po = select.poll()
po.register(fd, select.POLLIN)
print("ready while running", po.poll(0))
signal.pidfd_send_signal(fd, signal.SIGTERM)
print("ready after SIGTERM", [e for _, e in po.poll(5000)])
r = os.waitid(os.P_PIDFD, fd, os.WEXITED)
print("waitid", r.si_pid == p.pid, r.si_code == os.CLD_KILLED, r.si_status)
try:
    signal.pidfd_send_signal(fd, signal.SIGTERM)
except ProcessLookupError:
    print("reaped: ESRCH")
os.close(fd)
me = os.open(f"/proc/{os.getpid()}", os.O_DIRECTORY)
try:
    signal.pidfd_send_signal(me, signal.SIGINT)
except KeyboardInterrupt:
    print("SIGINT through /proc/pid")
async def main():
    watcher = asyncio.PidfdChildWatcher()
    asyncio.set_child_watcher(watcher)
    watcher.attach_loop(asyncio.get_running_loop())
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "print('child')", stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    print("asyncio child", out, "exit", await proc.wait())
asyncio.run(main())
"#;
    compare(
        "python pidfd",
        PYTHON,
        script,
        0,
        "asyncio child b'child\\n' exit 0",
    );
}

#[test]
fn python_signal_alarm_with_handler() {
    let script = r#"
import signal, time, os
hits = []
class Alarm(Exception):
    pass
def on_alarm(sig, frame):
    hits.append(sig)
    raise Alarm()
signal.signal(signal.SIGALRM, on_alarm)
signal.alarm(1)
t0 = time.monotonic()
try:
    time.sleep(10)
except Alarm:
    print("interrupted by alarm", 0.9 < time.monotonic() - t0 < 5)
print("alarm left", signal.alarm(0))
# A handler that does not raise: the sleep resumes (PEP 475).
def count(sig, frame):
    hits.append(sig)
signal.signal(signal.SIGALRM, count)
signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
t0 = time.monotonic()
time.sleep(0.4)
signal.setitimer(signal.ITIMER_REAL, 0)
print("sleep completed", time.monotonic() - t0 >= 0.39, "ticks", len(hits) >= 4)
signal.signal(signal.SIGUSR1, lambda s, f: print("USR1 handled"))
os.kill(os.getpid(), signal.SIGUSR1)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
os.kill(os.getpid(), signal.SIGUSR2)
print("pending", signal.SIGUSR2 in signal.sigpending())
print("sigwait", signal.sigwait({signal.SIGUSR2}) == signal.SIGUSR2)
info = signal.sigtimedwait({signal.SIGUSR2}, 0.1)
print("sigtimedwait timeout", info)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
print("getsignal default", signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
"#;
    compare("python signal.alarm", PYTHON, script, 0, "sigwait True");
}

#[test]
fn python_select_epoll() {
    let script = r#"
import select, os, socket, threading, time
ep = select.epoll()
r, w = os.pipe()
ep.register(r, select.EPOLLIN)
print("empty", ep.poll(0.1))
os.write(w, b"abc")
print("level", [(fd == r, ev) for fd, ev in ep.poll(1)])
print("level again", len(ep.poll(0)))
os.read(r, 3)
ep.modify(r, select.EPOLLIN | select.EPOLLET)
os.write(w, b"x")
print("edge once", len(ep.poll(0)), len(ep.poll(0)))
ep.modify(r, select.EPOLLIN | select.EPOLLONESHOT)
print("oneshot", len(ep.poll(0)), len(ep.poll(0)))
ep.unregister(r)
a, b = socket.socketpair()
ep.register(a.fileno(), select.EPOLLIN | select.EPOLLOUT)
print("socket writable", ep.poll(0)[0][1] & select.EPOLLOUT != 0)
ep.modify(a.fileno(), select.EPOLLIN)
def later():
    time.sleep(0.1)
    b.send(b"wake")
threading.Thread(target=later).start()
t0 = time.monotonic()
events = ep.poll(5)
print("woken by thread", len(events), a.recv(10), time.monotonic() - t0 < 4)
b.close()
print("hangup", ep.poll(1)[0][1] & (select.EPOLLIN | select.EPOLLHUP | select.EPOLLRDHUP) != 0)
ep.close()
p = select.poll()
p.register(w, select.POLLOUT)
print("poll", p.poll(0) == [(w, select.POLLOUT)])
print("select", select.select([r], [w], [], 0.05) == ([], [w], []))
"#;
    compare("python epoll", PYTHON, script, 0, "woken by thread 1");
}

#[test]
fn python_time_sleep() {
    let script = r#"
import time, threading
t0 = time.monotonic()
time.sleep(0.25)
dt = time.monotonic() - t0
print("slept at least 0.25", dt >= 0.25, "not too long", dt < 5)
w0 = time.time(); time.sleep(0.1); w1 = time.time()
print("wall clock advanced", 0.09 < w1 - w0 < 5)
c0 = time.process_time(); time.sleep(0.2); c1 = time.process_time()
print("sleep uses little cpu", c1 - c0 < 0.15)
n0 = time.monotonic_ns(); time.sleep(0); print("sleep(0) ok", time.monotonic_ns() >= n0)
res = []
def nap(i):
    time.sleep(0.2)
    res.append(i)
t0 = time.monotonic()
ts = [threading.Thread(target=nap, args=(i,)) for i in range(8)]
for t in ts: t.start()
for t in ts: t.join()
print("8 threads slept in parallel", time.monotonic() - t0 < 1.5, sorted(res))
print("perf_counter monotonic", time.perf_counter() > 0)
"#;
    compare(
        "python time.sleep",
        PYTHON,
        script,
        0,
        "slept at least 0.25 True",
    );
}

/// Starts `argv` (natively or under `ferrovisor do`), waits for it to print
/// `ready`, sends it host signal `sig`, and returns its stdout and status.
fn signalled(sandboxed: bool, argv: &[&str], sig: i32) -> (String, i32) {
    use std::io::{BufRead, Read};
    use std::os::unix::process::ExitStatusExt;
    let mut cmd = if sandboxed {
        let mut c = command(FERROVISOR, &[]);
        c.arg("do").arg("--").args(argv);
        c
    } else {
        let mut c = command(argv[0], &[]);
        c.args(&argv[1..]);
        c
    };
    cmd.stdout(std::process::Stdio::piped());
    cmd.stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("read ready");
    assert_eq!(first, "ready\n", "sandboxed={sandboxed}");
    // SAFETY: kill(2) of our own child, which has not been reaped.
    unsafe { libc::kill(child.id() as i32, sig) };
    let mut rest = String::new();
    out.read_to_string(&mut rest).expect("read rest");
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    eprintln!("stderr of {argv:?}: {err}");
    let st = child.wait().expect("wait");
    let code = st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0));
    (first + &rest, code)
}

#[test]
fn host_sigterm_reaches_the_guests_handler() {
    // What `ferrovisor kill` and container engines send: the guest's own
    // handler runs, and its exit status is the sandbox's.
    // The handler writes with os.write: the signal may land while `print`
    // is still flushing "ready", and print is not reentrant.
    let script = "import os, signal, sys, time\n\
        def on_term(s, f):\n    os.write(1, b'got TERM %d\\n' % s)\n    sys.exit(3)\n\
        signal.signal(signal.SIGTERM, on_term)\n\
        print('ready', flush=True)\n\
        time.sleep(60)\n";
    let argv = [PYTHON[0], PYTHON[1], PYTHON[2], script];
    let native = signalled(false, &argv, libc::SIGTERM);
    assert_eq!(native, ("ready\ngot TERM 15\n".to_string(), 3), "native");
    assert_eq!(signalled(true, &argv, libc::SIGTERM), native, "sandbox");
}

#[test]
fn host_sigint_ends_a_guest_without_a_handler() {
    // ^C at the terminal: a guest with the default action dies of it, and
    // the sandbox reports it as the shell would (130). (Not dash: it
    // catches SIGINT and re-raises it, which the sandbox's init drops, as
    // Linux does for a PID namespace's init; a ^C landing before its
    // `exec` would then be lost.)
    let argv = [
        "/usr/bin/python3",
        "-c",
        "import signal, time\n\
         signal.signal(signal.SIGINT, signal.SIG_DFL)\n\
         print('ready', flush=True)\n\
         time.sleep(60)",
    ];
    let native = signalled(false, &argv, libc::SIGINT);
    assert_eq!(native, ("ready\n".to_string(), 130), "native");
    assert_eq!(signalled(true, &argv, libc::SIGINT), native, "sandbox");
}

/// Signals a PID namespace's init sends itself or gets from its own
/// processes: only the ones it has a handler for arrive, even SIGKILL and
/// SIGSTOP (pid_namespaces(7)); a child is an ordinary process.
const INIT_SIGNALS: &str = r#"echo "pid $$"
kill -TERM 1; echo "TERM: $?"
kill -KILL 1; echo "KILL: $?"
kill -STOP 1; echo "STOP: $?"
kill -USR1 1; echo "USR1: $?"
trap 'echo caught USR2' USR2
kill -USR2 1; echo "USR2 sent"
/bin/busybox sh -c 'kill -TERM $$; echo child survived'; echo "child status $?"
echo alive
"#;

#[test]
fn init_gets_only_the_signals_it_handles_from_inside() {
    // Natively the shell is PID 1 of a new PID namespace (needs root); in
    // the sandbox it is the guest's first process, PID 1 as well.
    let mut nat_cmd = command("/usr/bin/unshare", &[]);
    nat_cmd
        .args(["--pid", "--fork", "--mount-proc", "--"])
        .args(BUSYBOX_SH)
        .arg(INIT_SIGNALS);
    let nat = run(nat_cmd, None, TIMEOUT);
    let expected = "pid 1\nTERM: 0\nKILL: 0\nSTOP: 0\nUSR1: 0\ncaught USR2\nUSR2 sent\n\
                    child status 143\nalive\n";
    assert_eq!(
        (nat.stdout.as_str(), nat.status),
        (expected, 0),
        "the NATIVE run differs, so the test is wrong (stderr: {})",
        nat.stderr
    );
    let mut sb_cmd = command(FERROVISOR, &[]);
    sb_cmd
        .arg("do")
        .arg("--")
        .args(BUSYBOX_SH)
        .arg(INIT_SIGNALS);
    let sb = run(sb_cmd, None, TIMEOUT);
    assert_eq!(
        (sb.stdout.as_str(), sb.status),
        (expected, 0),
        "sandbox stderr: {}",
        sb.stderr
    );
}

#[test]
fn host_sigterm_ends_a_do_guest_that_ignores_it_only_as_init() {
    // `ferrovisor do` stands for the command: SIGTERM to it ends a guest
    // init that keeps the default action (it would drop the signal coming
    // from its own processes), and a trap still runs.
    let argv = [
        "/bin/busybox",
        "sh",
        "-c",
        "kill -TERM 1; echo ready; exec sleep 60",
    ];
    assert_eq!(
        signalled(true, &argv, libc::SIGTERM),
        ("ready\n".to_string(), 128 + libc::SIGTERM)
    );
}

#[test]
fn comm_is_the_name_the_program_was_started_by() {
    // Linux names a process after the path given to execve, symlinks not
    // followed (/bin/sh may link to dash; a link named kitty runs cat).
    let script = r#"cat /proc/$$/comm
d=$(mktemp -d)
ln -s /bin/cat "$d/kitty"
"$d/kitty" /proc/self/comm
printf '#!/bin/sh\ncat /proc/$$/comm\n' > "$d/a-script"
chmod +x "$d/a-script"
"$d/a-script"
rm -r "$d"
"#;
    compare("comm", &["/bin/sh", "-c"], script, 0, "kitty");
}
