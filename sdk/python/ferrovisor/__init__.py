"""A client of `ferrovisor serve`: long-lived sandboxes for agents.

    from ferrovisor import Sandbox
    with Sandbox.create(volumes=["/srv/project:/work"]) as sb:
        r = sb.exec(["python3", "-c", "print(6 * 7)"])
        print(r.stdout)            # "42\\n"
        sb.files.write("/work/hello.txt", b"hi")

The standard library only: HTTP/1.1 over the server's Unix socket (or
loopback TCP with a token). See docs/agents.md and docs/openapi.json.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import urllib.parse
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

__all__ = [
    "Client",
    "Sandbox",
    "ExecResult",
    "Entry",
    "Files",
    "FerrovisorError",
    "NotFoundError",
    "NotSupportedError",
    "DEFAULT_SOCKET",
]

#: Where `ferrovisor serve` listens when not told otherwise.
DEFAULT_SOCKET = "/run/ferrovisor/api.sock"


class FerrovisorError(Exception):
    """The server refused a request; `status` is the HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class NotFoundError(FerrovisorError):
    """No such sandbox, or no such file in it."""


class NotSupportedError(FerrovisorError):
    """Something ferrovisor does not do yet."""


def _error(status: int, body: bytes) -> FerrovisorError:
    try:
        message = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        message = body.decode("utf-8", "replace") or f"HTTP {status}"
    cls = {404: NotFoundError, 501: NotSupportedError}.get(status, FerrovisorError)
    return cls(status, message)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


class Client:
    """A connection to `ferrovisor serve`.

    `address` is a Unix socket path (default: `$FERROVISOR_SOCKET`, else
    `/run/ferrovisor/api.sock`) or `http://127.0.0.1:PORT` with `token`.
    """

    def __init__(self, address: Optional[str] = None, token: Optional[str] = None,
                 timeout: Optional[float] = None) -> None:
        self.address = address or os.environ.get("FERROVISOR_SOCKET", DEFAULT_SOCKET)
        self.token = token if token is not None else os.environ.get("FERROVISOR_TOKEN")
        self.timeout = timeout
        self._conn: Optional[http.client.HTTPConnection] = None

    def _connect(self) -> http.client.HTTPConnection:
        if self.address.startswith("http://"):
            u = urllib.parse.urlsplit(self.address)
            return http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80,
                                              timeout=self.timeout)
        return _UnixConnection(self.address, self.timeout)

    def _send(self, method: str, path: str, body: Optional[bytes], ctype: str,
              query: Optional[Dict[str, str]]) -> http.client.HTTPResponse:
        if query:
            path += "?" + urllib.parse.urlencode(query)
        headers = {"Content-Type": ctype}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        # One kept-open connection; a new one if the server closed it.
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = self._connect()
            try:
                self._conn.request(method, path, body=body, headers=headers)
                return self._conn.getresponse()
            except (ConnectionError, http.client.BadStatusLine, http.client.CannotSendRequest):
                self._conn.close()
                self._conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def request(self, method: str, path: str, body: Any = None,
                query: Optional[Dict[str, str]] = None, raw: bool = False) -> Any:
        """One request; the answer's JSON (bytes with `raw`), or `None` for 204."""
        if isinstance(body, (bytes, bytearray)):
            data, ctype = bytes(body), "application/octet-stream"
        elif body is None:
            data, ctype = None, "application/json"
        else:
            data, ctype = json.dumps(body).encode(), "application/json"
        r = self._send(method, path, data, ctype, query)
        payload = r.read()
        if r.status >= 400:
            raise _error(r.status, payload)
        if r.status == 204:
            return None
        return payload if raw else json.loads(payload)

    def stream(self, path: str, body: Any) -> Iterator[Dict[str, Any]]:
        """A request whose answer is JSON lines, each as it comes."""
        r = self._send("POST", path, json.dumps(body).encode(), "application/json", None)
        # Held by the stream, so that calls meanwhile (`signal`, `resize`)
        # take another; kept after if the answer was read to its end.
        conn, self._conn = self._conn, None

        def lines() -> Iterator[Dict[str, Any]]:
            try:
                yield from self._lines(r)
            finally:
                if conn is not None and r.isclosed() and self._conn is None:
                    self._conn = conn
                elif conn is not None:
                    conn.close()
        return lines()

    def watch(self, path: str, query: Dict[str, str]) -> Iterator[Dict[str, Any]]:
        """A GET whose answer streams for as long as it lasts, on a
        connection of its own (so that other calls go on meanwhile); it
        returns once the server has answered, so nothing after is missed."""
        conn = self._connect()
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        conn.request("GET", path + "?" + urllib.parse.urlencode(query), headers=headers)
        r = conn.getresponse()
        if r.status >= 400:
            payload = r.read()
            conn.close()
            raise _error(r.status, payload)

        def lines() -> Iterator[Dict[str, Any]]:
            try:
                yield from self._lines(r)
            finally:
                conn.close()
        return lines()

    @staticmethod
    def _lines(r: http.client.HTTPResponse) -> Iterator[Dict[str, Any]]:
        if r.status >= 400:
            raise _error(r.status, r.read())
        while True:
            line = r.readline()
            if not line:
                return
            yield json.loads(line)

    def health(self) -> Dict[str, Any]:
        return self.request("GET", "/v1/health")

    def list(self) -> List[Dict[str, Any]]:
        """Every sandbox the server's state root holds."""
        return self.request("GET", "/v1/sandboxes")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


@dataclass
class ExecResult:
    """How a program ended, with its whole output."""

    status: int
    stdout: str
    stderr: str
    timed_out: bool = False
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""

    @property
    def ok(self) -> bool:
        return self.status == 0


@dataclass
class Entry:
    """A file as `stat` shows it."""

    name: str
    path: str
    kind: str
    size: int
    mode: int
    mtime: int


def _q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


class Files:
    """A sandbox's files."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def _path(self, what: str) -> str:
        return f"/v1/sandboxes/{_q(self._sb.name)}/{what}"

    def read(self, path: str) -> bytes:
        return self._sb.client.request("GET", self._path("files"), query={"path": path}, raw=True)

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def write(self, path: str, data: Union[bytes, str], mode: Optional[int] = None) -> None:
        """Writes `data` to `path`, making the folders on its way."""
        if isinstance(data, str):
            data = data.encode()
        query = {"path": path}
        if mode is not None:
            query["mode"] = format(mode, "o")
        self._sb.client.request("PUT", self._path("files"), body=data, query=query)

    def list(self, path: str) -> List[Entry]:
        entries = self._sb.client.request("GET", self._path("dir"), query={"path": path})
        return [Entry(**e) for e in entries]

    def stat(self, path: str) -> Entry:
        return Entry(**self._sb.client.request("GET", self._path("stat"), query={"path": path}))

    def watch(self, path: str, recursive: bool = False) -> Iterator[Dict[str, Any]]:
        """The changes in folder `path` as they come: dicts with `kind`
        (create, write, remove, moved_from, moved_to, chmod, gone), `name`
        and, for a folder, `dir`. With `recursive`, the folders below it
        too, `name` a path from `path`. It ends when the folder goes
        (`gone`) or the sandbox ends; stop iterating to stop watching."""
        query = {"path": path}
        if recursive:
            query["recursive"] = "true"
        return self._sb.client.watch(self._path("watch"), query)

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except NotFoundError:
            return False


@dataclass
class Sandbox:
    """A long-lived sandbox: processes, /tmp and its overlay last until
    `close()` (or `serve` ends)."""

    name: str
    client: Client
    info: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(cls, name: Optional[str] = None, client: Optional[Client] = None,
               **options: Any) -> "Sandbox":
        """Makes a sandbox. `options` are `ferrovisor do`'s flags by their
        long names: `root` or `image`, `overlay`, `volumes`, `tmpfs`, `network`,
        `allow_host`, `allow_cidr`, `allow_http`, `secrets`, `env`, `pids`,
        `hostname`, `memory`, `cpus`, `idle_timeout`, `timeout`, `platform`,
        and `from_` (a snapshot's folder)."""
        client = client or Client()
        if "from_" in options:
            options["from"] = options.pop("from_")
        name = name or f"sb-{uuid.uuid4().hex[:12]}"
        info = client.request("POST", "/v1/sandboxes", {"name": name, "options": options})
        return cls(name, client, info)

    @classmethod
    def connect(cls, name: str, client: Optional[Client] = None) -> "Sandbox":
        """A sandbox that exists already."""
        client = client or Client()
        return cls(name, client, client.request("GET", f"/v1/sandboxes/{_q(name)}"))

    @property
    def files(self) -> Files:
        return Files(self)

    def refresh(self) -> Dict[str, Any]:
        self.info = self.client.request("GET", f"/v1/sandboxes/{_q(self.name)}")
        return self.info

    def exec(self, cmd: Union[str, Sequence[str]], *, on_stdout: Optional[Callable[[bytes], None]] = None,
             on_stderr: Optional[Callable[[bytes], None]] = None, timeout: Optional[float] = None,
             env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
             user: Optional[Union[int, str]] = None, stdin: Optional[Union[bytes, str]] = None,
             tty: bool = False, size: Optional[Tuple[int, int]] = None,
             on_start: Optional[Callable[[int], None]] = None, check: bool = False) -> ExecResult:
        """Runs `cmd` (a list, or a string for `sh -c`) and waits for its end;
        output reaches `on_stdout`/`on_stderr` as it comes, and its guest pid
        `on_start` (for `signal` and `resize`). With `tty`, it runs on a
        terminal of the sandbox's own (`size` rows and columns, default 24 by
        80), whose output is all stdout. With `check`, a non-zero status
        raises `FerrovisorError`."""
        args = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        body: Dict[str, Any] = {"args": args}
        if env:
            body["env"] = [f"{k}={v}" for k, v in env.items()]
        if cwd is not None:
            body["cwd"] = cwd
        if user is not None:
            body["user"] = str(user)
        if timeout is not None:
            body["timeout"] = timeout
        if stdin is not None:
            data = stdin.encode() if isinstance(stdin, str) else stdin
            body["stdin"] = base64.b64encode(data).decode()
        if tty:
            body["tty"] = True
        if size is not None:
            body["size"] = {"rows": size[0], "cols": size[1]}
        out, err = bytearray(), bytearray()
        end: Optional[Dict[str, Any]] = None
        for line in self.client.stream(f"/v1/sandboxes/{_q(self.name)}/exec", body):
            if "stdout" in line:
                chunk = base64.b64decode(line["stdout"])
                out += chunk
                if on_stdout:
                    on_stdout(chunk)
            elif "stderr" in line:
                chunk = base64.b64decode(line["stderr"])
                err += chunk
                if on_stderr:
                    on_stderr(chunk)
            elif "started" in line:
                if on_start:
                    on_start(line["started"]["pid"])
            elif "exit" in line:
                end = line["exit"]
            elif "error" in line:
                raise FerrovisorError(500, line["error"])
        if end is None:
            raise FerrovisorError(500, "the server did not say how the program ended")
        r = ExecResult(end["status"], out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                       end.get("timed_out", False), bytes(out), bytes(err))
        if check and not r.ok:
            raise FerrovisorError(422, f"{args!r} exited with status {r.status}: {r.stderr.strip()}")
        return r

    def signal(self, pid: int, sig: Union[int, str] = "TERM") -> None:
        """Sends `sig` (a number or a name) to a program `exec` runs now."""
        self.client.request("POST", f"/v1/sandboxes/{_q(self.name)}/processes/{pid}/signal",
                            {"signal": sig})

    def resize(self, pid: int, rows: int, cols: int) -> None:
        """Gives the terminal of a program `exec(tty=True)` runs now a new
        size; its foreground process group gets SIGWINCH."""
        self.client.request("POST", f"/v1/sandboxes/{_q(self.name)}/processes/{pid}/resize",
                            {"rows": rows, "cols": cols})

    def port(self, guest_port: int, host_port: int = 0) -> str:
        """Makes the guest's `127.0.0.1:guest_port` reachable on the host;
        returns where (`"127.0.0.1:PORT"`). It lasts as long as the sandbox."""
        r = self.client.request("POST", f"/v1/sandboxes/{_q(self.name)}/ports",
                                {"guest_port": guest_port, "host_port": host_port})
        return r["host"]

    def logs(self) -> str:
        return self.client.request("GET", f"/v1/sandboxes/{_q(self.name)}/logs", raw=True).decode()

    def update_egress(self, allow: Sequence[str] = (), deny: Sequence[str] = ()) -> None:
        """Opens (`allow`) or closes (`deny`) hosts for new connections."""
        self.client.request("POST", f"/v1/sandboxes/{_q(self.name)}/egress",
                            {"allow": list(allow), "deny": list(deny)})

    def snapshot(self, image: str) -> str:
        """Saves the running sandbox into host folder `image` (made when
        missing); it runs on. `Sandbox.create(..., from_=image)` with the
        same options starts a copy where it stood. Returns `image`."""
        r = self.client.request("POST", f"/v1/sandboxes/{_q(self.name)}/snapshot",
                                {"image": image})
        return r["image"]

    def fork(self, name: Optional[str] = None) -> "Sandbox":
        """A copy of this running sandbox, which goes on apart from it."""
        name = name or f"{self.name}-fork-{uuid.uuid4().hex[:8]}"
        info = self.client.request("POST", f"/v1/sandboxes/{_q(self.name)}/fork",
                                   {"name": name})
        return Sandbox(info["name"], self.client, info)

    def stop(self) -> None:
        self.client.request("POST", f"/v1/sandboxes/{_q(self.name)}/stop")

    def close(self) -> None:
        """Ends the sandbox and forgets it."""
        try:
            self.client.request("DELETE", f"/v1/sandboxes/{_q(self.name)}")
        except NotFoundError:
            pass

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
