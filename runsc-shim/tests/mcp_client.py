"""Drives `ferrovisor mcp` with the official MCP Python SDK (its client
session validates every message against the protocol's types), then with
raw JSON-RPC lines checked with the SDK's own message models.

Usage: mcp_client.py FERROVISOR STATE_ROOT
"""

import asyncio
import json
import os
import subprocess
import sys

import mcp_types as t
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

FERROVISOR, ROOT = sys.argv[1], sys.argv[2]
ARGS = ["--root", ROOT, "mcp", "--name", "mcp-test", "--overlay"]


def text(result):
    assert isinstance(result, t.CallToolResult), result
    return "".join(c.text for c in result.content if c.type == "text")


async def session():
    params = StdioServerParameters(command=FERROVISOR, args=ARGS)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            assert init.server_info.name == "ferrovisor", init
            assert init.capabilities.tools is not None
            tools = await s.list_tools()
            names = sorted(tool.name for tool in tools.tools)
            assert names == ["fork", "list_directory", "read_file", "run_command",
                             "snapshot", "write_file"], names
            r = await s.call_tool("write_file", {"path": "/work/hello.py",
                                                 "content": "print('hello', 6 * 7)\n"})
            assert not r.is_error and "wrote 22 bytes" in text(r), r
            r = await s.call_tool("run_command", {"command": "cd /work && python3 hello.py && echo err >&2"})
            assert not r.is_error, r
            assert r.structured_content == {"status": 0, "stdout": "hello 42\n",
                                            "stderr": "err\n", "timed_out": False}, r
            r = await s.call_tool("read_file", {"path": "/work/hello.py"})
            assert text(r) == "print('hello', 6 * 7)\n", r
            r = await s.call_tool("list_directory", {"path": "/work"})
            assert "hello.py" in text(r) and "file" in text(r), r
            # State persists between calls: a background process, a file.
            await s.call_tool("run_command", {"command": "sleep 300 >/dev/null 2>&1 &"})
            r = await s.call_tool("run_command", {"command": "ps -eo comm= | grep -c '^sleep$'"})
            assert r.structured_content["stdout"] == "1\n", r
            r = await s.call_tool("run_command", {"command": "exit 3"})
            assert r.structured_content["status"] == 3 and "[exit status 3]" in text(r), r
            r = await s.call_tool("run_command", {"command": "sleep 30", "timeout": 0.5})
            assert r.is_error and r.structured_content["timed_out"], r
            r = await s.call_tool("read_file", {"path": "/work/none"})
            assert r.is_error and "no such file" in text(r), r
            # Files written over an --overlay root are not saved yet: both
            # tools say so, and the sandbox runs on.
            image = os.path.join(ROOT, "mcp-snap")
            r = await s.call_tool("snapshot", {"image": image})
            assert r.is_error and "--overlay" in text(r), r
            r = await s.call_tool("fork", {"name": "mcp-fork"})
            assert r.is_error and "--overlay" in text(r), r
            r = await s.call_tool("run_command", {"command": "echo alive"})
            assert r.structured_content["stdout"] == "alive\n", r
    print("sdk session ok")


def raw():
    """Messages the SDK's client never sends wrong, sent wrong."""
    p = subprocess.Popen([FERROVISOR, "--root", ROOT, "mcp", "--name", "mcp-raw"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(line):
        p.stdin.write(line + "\n")
        p.stdin.flush()
        return json.loads(p.stdout.readline())

    old = ask(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}))
    t.JSONRPCResponse.model_validate(old)
    t.InitializeResult.model_validate(old["result"])
    assert old["result"]["protocolVersion"] == "2024-11-05", old
    # A notification gets no answer: the next answer is the ping's.
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    pong = ask(json.dumps({"jsonrpc": "2.0", "id": "p", "method": "ping"}))
    assert pong == {"jsonrpc": "2.0", "id": "p", "result": {}}, pong
    listed = ask(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
    for tool in t.ListToolsResult.model_validate(listed["result"]).tools:
        assert tool.input_schema["type"] == "object"
    for line, code in [("not json", -32700),
                       (json.dumps({"jsonrpc": "2.0", "id": 3, "method": "no/such"}), -32601),
                       (json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                                    "params": {"name": "no_such_tool"}}), -32602),
                       (json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                                    "params": {"name": "read_file", "arguments": {}}}), -32602),
                       (json.dumps({"id": 6, "method": "ping"}), -32600)]:
        e = ask(line)
        t.JSONRPCError.model_validate(e)
        assert e["error"]["code"] == code, (line, e)
    newer = ask(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
        "protocolVersion": "2099-01-01", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}))
    assert newer["result"]["protocolVersion"] == "2025-11-25", newer
    p.stdin.close()
    assert p.wait(timeout=60) == 0
    print("raw messages ok")


asyncio.run(session())
raw()
left = subprocess.run([FERROVISOR, "--root", ROOT, "sandbox", "ls", "--json"],
                      capture_output=True, text=True)
assert left.stdout.strip() == "[]", left.stdout
print("no sandbox left")
