#!/usr/bin/env python3
"""Milliseconds from `initialize` to the first non-empty `publishDiagnostics`
for one file, from `trellis lsp` over stdio. Usage: TRELLIS ROOT REL_PATH."""
import json
import os
import subprocess
import sys
import time


def send(proc, message):
    body = json.dumps(message).encode()
    proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    proc.stdin.flush()


def receive(proc):
    length = None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("trellis lsp exited before publishing diagnostics")
        line = line.strip()
        if not line:
            break
        key, _, value = line.partition(b":")
        if key.lower() == b"content-length":
            length = int(value)
    return json.loads(proc.stdout.read(length))


def main():
    trellis, root, rel = sys.argv[1:4]
    root = os.path.abspath(root)
    uri = "file://" + os.path.join(root, rel)
    proc = subprocess.Popen([trellis, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    started = time.monotonic()
    send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": os.getpid(), "rootUri": "file://" + root,
        "workspaceFolders": [{"uri": "file://" + root, "name": "bench"}],
        "capabilities": {}}})
    while receive(proc).get("id") != 1:
        pass
    send(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
    with open(os.path.join(root, rel)) as source:
        text = source.read()
    send(proc, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": uri, "languageId": "rust", "version": 1, "text": text}}})
    while True:
        message = receive(proc)
        if (message.get("method") == "textDocument/publishDiagnostics"
                and message["params"]["uri"] == uri and message["params"]["diagnostics"]):
            break
    elapsed = (time.monotonic() - started) * 1000
    send(proc, {"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    send(proc, {"jsonrpc": "2.0", "method": "exit"})
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    print(f"{elapsed:.1f}")


main()
