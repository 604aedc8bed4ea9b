"""Drives an interactive bash through a pseudo-terminal, as a person at a
terminal would: job control, ^C, ^Z, tty, window size, and the terminal
put back at the end. Run by tests/terminal.rs, natively and under
`ferrovisor do`; the command to run is argv[1:]."""
import fcntl
import os
import pty
import re
import select
import struct
import sys
import termios
import time

TIMEOUT = 30


def main():
    cmd = sys.argv[1:]
    env = dict(os.environ, PS1="PROMPT> ", TERM="xterm", HISTFILE="/dev/null")
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(cmd[0], cmd, env)
    seen = b""

    def expect(pattern, what):
        nonlocal seen
        rx = re.compile(pattern.encode())
        end = time.time() + TIMEOUT
        while True:
            m = rx.search(seen)
            if m:
                seen = seen[m.end():]
                return m
            left = end - time.time()
            if left <= 0:
                sys.exit(f"{what}: no {pattern!r} in {seen[-400:]!r}")
            r, _, _ = select.select([fd], [], [], left)
            if r:
                try:
                    data = os.read(fd, 4096)
                except OSError:
                    data = b""
                if not data:
                    sys.exit(f"{what}: the terminal closed; had {seen[-400:]!r}")
                seen += data

    def send(text):
        os.write(fd, text.encode())

    def lflag():
        return termios.tcgetattr(fd)[3]

    def run(line, pattern, what):
        send(line + "\r")
        expect(pattern, what)

    expect("PROMPT> ", "the first prompt")
    if b"no job control" in seen:
        sys.exit("bash says it has no job control")
    print("prompt")
    run("tty", r"/dev/pts/\d+\r\n", "tty names a pty")
    print("tty names a pty")
    run("sleep 30 &", r"\[1\] \d+", "a background job")
    run("jobs", r"\[1\]\+\s+Running\s+sleep 30 &", "jobs lists it")
    print("jobs")
    send("fg\r")
    expect("sleep 30", "fg")
    time.sleep(0.5)
    send("\x1a")
    expect(r"\[1\]\+\s+Stopped\s+sleep 30", "^Z stops it")
    print("^Z")
    run("bg", r"\[1\]\+ sleep 30 &", "bg")
    run("jobs", r"\[1\]\+\s+Running", "running again")
    run("kill %1; wait; echo killed", r"killed\r\n", "kill %1")
    print("fg, bg, kill")
    send("python3 -c 'import time; print(\"ready\", flush=True); time.sleep(30)'\r")
    expect(r"ready\r\n", "python3 starts")
    time.sleep(0.3)
    send("\x03")
    expect("KeyboardInterrupt", "^C interrupts python3")
    expect("PROMPT> ", "the prompt after ^C")
    send("\x03")
    run("echo alive", r"alive\r\n", "^C at the prompt ends nothing")
    print("^C")
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
    time.sleep(0.5)
    run("stty size", r"33 101\r\n", "the new size")
    print("window size")
    send("read -n 1 -s k; echo \"key [$k]\"\r")
    time.sleep(0.5)
    send("x")
    expect(r"key \[x\]", "a key without Enter")
    print("one key")
    send("exit\r")
    _, status = os.waitpid(pid, 0)
    print("status", os.waitstatus_to_exitcode(status))
    # The terminal as bash leaves it: cooked, with echo.
    print("cooked", bool(lflag() & termios.ICANON and lflag() & termios.ECHO))


def killed():
    """`ferrovisor do` whose Sentry is killed: the terminal, raw while it
    ran, is put back."""
    cmd = sys.argv[2:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(cmd[0], cmd)
    lflag = lambda: termios.tcgetattr(fd)[3]
    end = time.time() + TIMEOUT
    while lflag() & termios.ICANON and time.time() < end:
        time.sleep(0.05)
    print("raw while it runs", not lflag() & termios.ICANON)
    time.sleep(1)
    # The Sentry: the child of `ferrovisor do` that runs the same program
    # (the gofers run `ferrovisor gofer`).
    for child in os.listdir("/proc"):
        try:
            with open(f"/proc/{child}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{child}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"do" in args[1:2]:
            os.kill(int(child), 9)
    _, status = os.waitpid(pid, 0)
    print("status", os.waitstatus_to_exitcode(status))
    print("cooked after", bool(lflag() & termios.ICANON and lflag() & termios.ECHO))


if sys.argv[1] == "--killed":
    killed()
else:
    main()
