#!/usr/bin/env python3
"""What one large event, one event that is not UTF-8, or one large listing costs
`imrelay bridge opencode` (issue 42, item 8): its CPU time (utime + stime from
/proc/<pid>/stat) and its peak resident memory (VmHWM), until it has read past them.

A fake OpenCode server on a free loopback port (standard library only) serves:

- `GET /event`: `server.connected`, then the case's event(s), then `{not json` (a marker the
  bridge reports as "ignored an event it could not read"), in pieces of `--chunk` bytes, and
  keeps the stream open;
- `GET /permission`, `GET /question`: `[]`, or for `listing` a list of `--mb` MB of
  whitespace-padded requests.

The bridge is pointed at an imrelay that is not there (it needs none for this). The run ends
when the marker (or, for `listing`, the listing's end) shows on the bridge's standard error,
or after `--limit` seconds.

    python3 benches/bridge_events.py line --imrelay target/debug/imrelay --mb 16
    python3 benches/bridge_events.py utf8 --imrelay target/debug/imrelay
    python3 benches/bridge_events.py listing --imrelay target/debug/imrelay --mb 150

See BENCHMARKS.md ("Hardening, round 3") for the figures.
"""

import argparse
import http.server
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time

MARKER = b"data: {not json\n\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def peak_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def events(case, mb):
    """The frames the event stream sends after `server.connected`."""
    if case == "line":
        text = "a" * int(mb * 1_000_000)
        event = json.dumps({"type": "message.part.updated", "properties": {"text": text}})
        return [f"data: {event}\n\n".encode(), MARKER]
    if case == "utf8":
        bad = b'data: {"type":"message.updated","x":"\xff\xfe"}\n\n'
        return [bad, MARKER]
    return [MARKER]


def handler(case, mb, chunk):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def send_chunked(self, content_type, pieces, end=True):
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for piece in pieces:
                for k in range(0, len(piece), chunk):
                    part = piece[k : k + chunk]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            if end:
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def do_GET(self):
            try:
                if self.path == "/event":
                    connected = b'data: {"type":"server.connected","properties":{}}\n\n'
                    frames = [connected] + events(case, mb)
                    self.send_chunked("text/event-stream", frames, end=False)
                    time.sleep(3600)
                elif self.path == "/permission" and case == "listing":
                    item = json.dumps({"id": "per_x", "sessionID": "ses_x", "permission": "bash"})
                    pad = " " * 1000
                    count = int(mb * 1_000_000) // (len(item) + len(pad) + 1)
                    body = "[" + ",".join(item + pad for _ in range(count)) + "]"
                    self.send_chunked("application/json", [body.encode()])
                else:
                    self.send_chunked("application/json", [b"[]"])
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=["line", "utf8", "listing"])
    p.add_argument("--imrelay", required=True)
    p.add_argument("--mb", type=float, default=16)
    p.add_argument("--chunk", type=int, default=64 * 1024)
    p.add_argument("--limit", type=float, default=120)
    a = p.parse_args()
    port = free_port()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", port), handler(a.case, a.mb, a.chunk)
    )
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    bridge = subprocess.Popen(
        [a.imrelay, "bridge", "opencode", "--url", "http://127.0.0.1:9",
         "--opencode", f"http://127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={"PATH": os.environ.get("PATH", "")},
    )
    start = time.monotonic()
    seen = b""
    # What ends the run: the marker event read, or the listing read (or refused).
    done = [b"ignored an event it could not read"]
    if a.case == "listing":
        done = [b"GET /permission", b"/permission with", b"imrelay:"]
    ended = None
    while time.monotonic() - start < a.limit:
        ready, _, _ = select.select([bridge.stderr], [], [], 0.05)
        if ready:
            data = os.read(bridge.stderr.fileno(), 65536)
            if not data:
                break
            seen += data
            if any(d in seen for d in done):
                ended = time.monotonic() - start
                break
    cpu, peak = cpu_seconds(bridge.pid), peak_mb(bridge.pid)
    bridge.kill()
    bridge.wait()
    server.shutdown()
    print(json.dumps({
        "case": a.case, "mb": a.mb, "chunk": a.chunk,
        "read_past_it_after_s": None if ended is None else round(ended, 2),
        "cpu_s": round(cpu, 2), "peak_rss_mb": round(peak, 1),
        "stderr": seen.decode("utf-8", "replace")[-600:],
    }, indent=1))


if __name__ == "__main__":
    sys.exit(main())
