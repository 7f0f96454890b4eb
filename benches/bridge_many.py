#!/usr/bin/env python3
"""One `imrelay bridge opencode` with many waiting OpenCode requests (issue 42, items 4 and
5): what it holds of imrelay's connections, whether operators can still list, and whether
every answer reaches OpenCode when OpenCode fails each request's first reply with a 500.

A fake OpenCode server on a free loopback port (standard library only) lists `--count`
permission requests (`GET /permission`), knows their session, keeps its event stream open
with a heartbeat, and answers the first reply to each request `500` (with `--fail-first`),
later ones `true`. An imrelay server (the memory store, its defaults, an agent token for the
bridge and an operator token for the probes) and the bridge run beside it.

1. Until the number of pending interactions stops growing: the bridge asks.
2. `--probes` operator listings (`GET /v1/interactions?status=pending&limit=1`), each on a
   connection of its own, one after another: their statuses.
3. Everything pending answered `allow` in bulk, again and again, until OpenCode took a reply
   to every request or `--limit` seconds passed: how many it took.

    python3 benches/bridge_many.py --imrelay target/debug/imrelay --count 3000 --fail-first

See BENCHMARKS.md ("Hardening, round 3") for the figures.
"""

import argparse
import collections
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hardening import Server, free_port  # noqa: E402

AGENT = "bench-agent-token-0123456789abcdef"
OPERATOR = "bench-operator-token-0123456789abc"


class OpenCode:
    """The fake OpenCode's state."""

    def __init__(self, count, fail_first):
        self.requests = {
            f"per_bench{n:05d}": {"id": f"per_bench{n:05d}", "sessionID": "ses_bench",
                                  "permission": "bash", "patterns": ["true"],
                                  "metadata": {"command": f"true {n}"}, "always": []}
            for n in range(count)
        }
        self.fail_first = fail_first
        self.tried = collections.Counter()
        self.refused = 0
        self.lock = threading.Lock()

    def handler(self):
        oc = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def send_json(self, status, value):
                body = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                try:
                    if self.path == "/event":
                        self.send_response(200)
                        self.send_header("content-type", "text/event-stream")
                        self.end_headers()
                        while True:
                            self.wfile.write(b'data: {"type":"server.heartbeat","properties":{}}\n\n')
                            self.wfile.flush()
                            time.sleep(5)
                    elif self.path == "/permission":
                        with oc.lock:
                            self.send_json(200, list(oc.requests.values()))
                    elif self.path.startswith("/session/"):
                        self.send_json(200, {"id": "ses_bench", "directory": "/bench"})
                    else:
                        self.send_json(200, [])
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self):
                length = int(self.headers.get("content-length", "0"))
                self.rfile.read(length)
                m = re.match(r"^/permission/([^/]+)/reply$", self.path)
                with oc.lock:
                    request = m and m.group(1)
                    oc.tried[request] += 1
                    if oc.fail_first and oc.tried[request] == 1:
                        oc.refused += 1
                        return self.send_json(500, {"name": "UnknownError"})
                    oc.requests.pop(request, None)
                self.send_json(200, True)

        return Handler


def get(server, path, token=OPERATOR, timeout=30):
    req = urllib.request.Request(server.url(path), headers={"authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
    except OSError as e:
        return str(e), None


def post(server, path, body):
    req = urllib.request.Request(
        server.url(path), data=json.dumps(body).encode(), method="POST",
        headers={"authorization": f"Bearer {OPERATOR}", "content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError as e:
        return str(e)


def pending(server):
    status, body = get(server, "/healthz")
    return body.get("pending", 0) if isinstance(body, dict) else 0


def metric(server, name):
    try:
        with urllib.request.urlopen(server.url("/metrics"), timeout=30) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--imrelay", required=True)
    p.add_argument("--count", type=int, default=3000)
    p.add_argument("--probes", type=int, default=120)
    p.add_argument("--fail-first", action="store_true")
    p.add_argument("--limit", type=float, default=300)
    a = p.parse_args()
    oc = OpenCode(a.count, a.fail_first)
    port = free_port()
    fake = http.server.ThreadingHTTPServer(("127.0.0.1", port), oc.handler())
    fake.daemon_threads = True
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    env = {"IMRELAY__AUTH__AGENT_TOKENS": AGENT, "IMRELAY__AUTH__OPERATOR_TOKENS": OPERATOR}
    out = {"count": a.count, "fail_first": a.fail_first}
    with Server(a.imrelay, env=env) as server:
        bridge = subprocess.Popen(
            [a.imrelay, "bridge", "opencode", "--url", server.url(""),
             "--opencode", f"http://127.0.0.1:{port}", "--token", AGENT],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", "")},
        )
        start = time.monotonic()
        last, steady = -1, time.monotonic()
        while time.monotonic() - start < 180:
            n = pending(server)
            if n != last:
                last, steady = n, time.monotonic()
            elif n > 0 and time.monotonic() - steady > 10:
                break
            time.sleep(0.5)
        out["pending_once_steady"] = last
        out["connections_open"] = metric(server, "imrelay_http_connections")
        statuses = collections.Counter()
        t = time.monotonic()
        for _ in range(a.probes):
            statuses[str(get(server, "/v1/interactions?status=pending&limit=1")[0])] += 1
        out["probe_statuses"] = dict(statuses)
        out["probes_took_s"] = round(time.monotonic() - t, 1)
        out["token_refusals"] = metric(server, "imrelay_http_token_connections_refused_total")
        out["over_cap_refusals"] = metric(server, "imrelay_http_connections_refused_total")
        start = time.monotonic()
        answered = 0
        while time.monotonic() - start < a.limit:
            with oc.lock:
                if not oc.requests:
                    break
            status, body = get(server, "/v1/interactions?status=pending&limit=500")
            ids = [i["id"] for i in (body or {}).get("interactions", [])] if status == 200 else []
            if ids and post(server, "/v1/respond", {"ids": ids, "decision": "allow"}) == 200:
                answered += len(ids)
            else:
                time.sleep(1)
        with oc.lock:
            out["answered_in_imrelay"] = answered
            out["opencode_took_a_reply"] = a.count - len(oc.requests)
            out["opencode_refused_replies"] = oc.refused
        out["reply_phase_s"] = round(time.monotonic() - start, 1)
        bridge.kill()
        bridge.wait()
    fake.shutdown()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(main())
