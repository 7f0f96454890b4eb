#!/usr/bin/env python3
"""Reproduces the attacks of issue 28 against an imrelay binary and prints what the server
held: its resident memory (VmRSS from /proc), what it answered and when it closed.

Every run starts its own server on 127.0.0.1 (a free port, the memory store unless said
otherwise, a config file in a temporary directory), sends a bounded number of requests for
a bounded time, and stops the server. Standard library only.

    python3 benches/hardening.py bodies --imrelay target/release/imrelay
    python3 benches/hardening.py pending --imrelay target/release/imrelay
    python3 benches/hardening.py pending --imrelay target/release/imrelay --store sqlite \
        --count 4000 --budget-bytes 8589934592 --connections 4
    # the same, then a server started on the same database: its start-up
    python3 benches/hardening.py pending --imrelay target/release/imrelay --store sqlite \
        --count 4000 --budget-bytes 8589934592 --connections 4 --restart
    python3 benches/hardening.py choices --imrelay target/release/imrelay

See BENCHMARKS.md ("Hardening, round 2") for the figures and the machine they came from.
"""

import argparse
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

WEBHOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Server:
    """An imrelay server on a free loopback port, stopped with SIGTERM on exit."""

    def __init__(self, binary, extra_toml="", env=None, directory=None, on_spawn=None):
        # A directory of an earlier server (its database) is reused, and left for it to clean.
        self.dir = directory or tempfile.TemporaryDirectory()
        self.owns_dir = directory is None
        self.port = free_port()
        config = os.path.join(self.dir.name, "config.toml")
        with open(config, "w") as f:
            f.write(extra_toml)
        full_env = dict(os.environ)
        full_env.update(
            {
                "IMRELAY__SERVER__LISTEN": f"127.0.0.1:{self.port}",
                "IMRELAY__STORE__BACKEND": "memory",
                "IMRELAY__STORE__PATH": os.path.join(self.dir.name, "imrelay.db"),
                "IMRELAY__LOG__LEVEL": "warn",
            }
        )
        full_env.update(env or {})

        def limits():
            resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))

        self.proc = subprocess.Popen(
            [binary, "--config", config, "serve"],
            env=full_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=limits,
        )
        if on_spawn:
            on_spawn(self.proc)
        deadline = time.time() + 600
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.url("/livez"), timeout=2):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the server did not start")

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def rss(self):
        return rss_mb(self.proc.pid)

    def __enter__(self):
        return self

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __exit__(self, *exc):
        self.stop()
        if self.owns_dir:
            self.dir.cleanup()


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def head(path, length, extra=""):
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n{extra}\r\n"
    ).encode()


def closed_by_server(s):
    """Whether the server closed `s` (or answered on it): readable without blocking."""
    p = select.poll()
    p.register(s, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(p.poll(0))


def answer_of(s):
    try:
        s.settimeout(2)
        data = s.recv(4096)
    except OSError:
        return "reset"
    if not data:
        return "closed"
    return data.split(b"\r\n", 1)[0].decode(errors="replace")


def packets(server, conns, per_conn, path="/v1/interactions", extra=""):
    """`conns` connections each declare a 1 MiB body and send `per_conn` one-byte packets,
    round-robin; the server's RSS at its peak and once they are closed."""
    before = server.rss()
    socks = [connect(server.port) for _ in range(conns)]
    for s in socks:
        s.sendall(head(path, 1_048_576, extra))
    peak = before
    started = time.time()
    sent = 0
    cut = set()
    for i in range(per_conn):
        for n, s in enumerate(socks):
            if n in cut:
                continue
            try:
                s.send(b" ")
                sent += 1
            except OSError:
                cut.add(n)
        if i % 200 == 0:
            peak = max(peak, server.rss())
    peak = max(peak, server.rss())
    held = server.rss()
    answers = {}
    for n, s in enumerate(socks):
        if n in cut or closed_by_server(s):
            a = answer_of(s)
            answers[a] = answers.get(a, 0) + 1
    for s in socks:
        s.close()
    time.sleep(2)
    return {
        "connections": conns,
        "packets_per_connection": per_conn,
        "bytes_sent": sent,
        "send_seconds": round(time.time() - started - 2, 1),
        "rss_before_mb": round(before, 1),
        "rss_peak_mb": round(peak, 1),
        "rss_held_mb": round(held, 1),
        "rss_after_close_mb": round(server.rss(), 1),
        "answered_while_sending": answers,
    }


def hold(server, conns, seconds, path="/v1/interactions"):
    """`conns` connections send a head declaring 1 MiB and one byte of body, then hold; every
    second the API is asked for one pending interaction on a new connection. When the server
    closed them, and how the API fared."""
    socks = [connect(server.port) for _ in range(conns)]
    started = time.time()
    for s in socks:
        s.sendall(head(path, 1_048_576) + b" ")
    closed_at = {}
    probes = {}
    peak = server.rss()
    while time.time() - started < seconds and len(closed_at) < conns:
        for n, s in enumerate(socks):
            if n not in closed_at and closed_by_server(s):
                closed_at[n] = time.time() - started
        try:
            with urllib.request.urlopen(
                server.url("/v1/interactions?status=pending&limit=1"), timeout=5
            ) as r:
                key = str(r.status)
        except urllib.error.HTTPError as e:
            key = str(e.code)
        except OSError:
            key = "error"
        probes[key] = probes.get(key, 0) + 1
        peak = max(peak, server.rss())
        time.sleep(1)
    answers = {}
    for n in closed_at:
        a = answer_of(socks[n])
        answers[a] = answers.get(a, 0) + 1
    for s in socks:
        s.close()
    times = sorted(closed_at.values())
    return {
        "connections": conns,
        "held_for_seconds": seconds,
        "closed_by_server": len(closed_at),
        "closed_after_s_min_max": [round(times[0], 1), round(times[-1], 1)] if times else None,
        "answers": answers,
        "api_probes": probes,
        "rss_peak_mb": round(peak, 1),
    }


def run_bodies(args):
    webhook = (
        "[[webhooks]]\nname = \"ci\"\nurl = \"http://127.0.0.1:9/hook\"\n"
        f"secret = \"{WEBHOOK_SECRET}\"\nevents = [\"interaction.resolved\"]\n"
    )
    unbounded = {
        "IMRELAY__SERVER__BODY_TIMEOUT_SECS": "3600",
        "IMRELAY__SERVER__BODY_MIN_BYTES_PER_SEC": "0",
    }
    report = {}
    cases = [
        ("one connection, 50,000 one-byte packets", 1, 50_000, {}),
        ("500 connections x 2,000 one-byte packets", 500, 2_000, {}),
    ]
    if args.unbounded:
        # The memory effect alone: time bounds off (settings the old binary does not have).
        cases = [(name + ", time bounds off", c, p, unbounded) for name, c, p, _ in cases]
    wanted = set(args.cases.split(","))
    if "packets" not in wanted:
        cases = []
    for name, conns, per_conn, env in cases:
        with Server(args.imrelay, env=env) as server:
            report[name] = packets(server, conns, per_conn)
            print(name, json.dumps(report[name]), flush=True)
    if "webhook" in wanted:
        with Server(args.imrelay, extra_toml=webhook) as server:
            name = "webhook answer, no signature headers, 20,000 one-byte packets"
            report[name] = packets(server, 1, 20_000, path="/v1/webhooks/ci/respond")
            print(name, json.dumps(report[name]), flush=True)
            now = int(time.time())
            extra = (
                f"webhook-id: msg_1\r\nwebhook-timestamp: {now}\r\n"
                f"webhook-signature: v1,{'A' * 43}=\r\n"
            )
            name = "webhook answer, well-formed headers, 20,000 one-byte packets"
            report[name] = packets(server, 1, 20_000, path="/v1/webhooks/ci/respond", extra=extra)
            print(name, json.dumps(report[name]), flush=True)
    if not args.unbounded and "hold" in wanted:
        with Server(args.imrelay) as server:
            name = f"{args.hold} connections holding a slow body for {args.hold_secs} s"
            report[name] = hold(server, args.hold, args.hold_secs)
            print(name, json.dumps(report[name]), flush=True)
    return report


def post_json(server, path, body, timeout=300):
    """POSTs `body`: (status, seconds, response bytes)."""
    data = json.dumps(body).encode()
    req = urllib.request.Request(
        server.url(path), data=data, headers={"Content-Type": "application/json"}
    )
    started = time.time()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, time.time() - started, r.read()
    except urllib.error.HTTPError as e:
        return e.code, time.time() - started, e.read()


def run_choices(args):
    """Forms with many choice options: how long the refusal takes, alone and four at once
    (with /livez asked meanwhile)."""
    report = {}
    options = [f"o{k}" for k in range(args.options)]
    form = {"kind": "form", "message": "m",
            "schema": {"type": "object", "properties": {"a": {"type": "string", "enum": options}}}}
    with Server(args.imrelay) as server:
        status, took, body = post_json(server, "/v1/interactions", form)
        report["one"] = {"options": args.options, "status": status, "seconds": round(took, 3),
                         "error": json.loads(body or b"{}").get("error", {}).get("message")}
        print("one", json.dumps(report["one"]), flush=True)
        results = []
        threads = [threading.Thread(target=lambda: results.append(
            post_json(server, "/v1/interactions", form))) for _ in range(4)]
        started = time.time()
        for t in threads:
            t.start()
        time.sleep(0.05)
        live_started = time.time()
        with urllib.request.urlopen(server.url("/livez"), timeout=300) as r:
            live = (r.status, round(time.time() - live_started, 3))
        for t in threads:
            t.join()
        report["four_at_once"] = {"statuses": sorted(r[0] for r in results),
                                  "slowest_seconds": round(max(r[1] for r in results), 3),
                                  "livez_meanwhile": live,
                                  "all_seconds": round(time.time() - started, 3)}
        print("four at once", json.dumps(report["four_at_once"]), flush=True)
    return report


def run_pending(args):
    """Pending interactions with big inputs: how many were created, the server's RSS, and
    one listing of 500: its bytes, its items, and the server's RSS while it was made (sampled
    every 20 ms) and after."""
    report = {}
    env = {"IMRELAY__STORE__BACKEND": args.store}
    if args.budget_bytes:
        env["IMRELAY__INTERACTIONS__MAX_PENDING_BYTES"] = str(args.budget_bytes)
        env["IMRELAY__INTERACTIONS__MAX_PENDING_BYTES_PER_TOKEN"] = str(args.budget_bytes)
    with Server(args.imrelay, env=env) as server:
        before = server.rss()
        statuses = {}
        lock = threading.Lock()
        started = time.time()

        def create(n):
            # An hour's deadline (the most allowed): none expires while the others are made.
            body = {"id": f"big-{n}", "tool_name": "Bash", "timeout_secs": 3600,
                    "input": {"command": f"{n} " + "x" * args.input_bytes}}
            status, _, reply = post_json(server, "/v1/interactions", body)
            with lock:
                statuses[status] = statuses.get(status, 0) + 1
                if status != 201 and "refusal" not in report:
                    report["refused_first_at"] = n
                    report["refusal"] = json.loads(reply).get("error")

        def worker(k):
            for n in range(k, args.count, args.connections):
                create(n)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        report["store"] = args.store
        report["created"] = statuses
        report["create_seconds"] = round(time.time() - started, 1)
        report["rss_before_mb"] = round(before, 1)
        time.sleep(2)
        report["rss_pending_mb"] = round(server.rss(), 1)
        peak = [server.rss()]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], server.rss())
                time.sleep(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        started = time.time()
        with urllib.request.urlopen(
            server.url("/v1/interactions?status=pending&limit=500"), timeout=300
        ) as r:
            listing = r.read()
        report["listing_seconds"] = round(time.time() - started, 2)
        done.set()
        sampler.join()
        page = json.loads(listing)
        report["listing_bytes"] = len(listing)
        report["listing_items"] = len(page["interactions"])
        report["listing_next_cursor"] = page.get("next_cursor") is not None
        report["rss_peak_during_listing_mb"] = round(peak[0], 1)
        report["rss_after_listing_mb"] = round(server.rss(), 1)
        print(json.dumps(report), flush=True)
        if args.restart:
            server.stop()
            report["restart"] = restart(args, env, server.dir)
            print("restart", json.dumps(report["restart"]), flush=True)
    return report


def restart(args, env, directory):
    """A server started on the database the pending interactions are in: how long until it
    answers, its VmRSS at its peak (sampled every 20 ms from its start) and 2 s after."""
    peak = [0.0]
    done = threading.Event()

    def sample(proc):
        def run():
            while not done.is_set() and proc.poll() is None:
                peak[0] = max(peak[0], rss_mb(proc.pid))
                time.sleep(0.02)
        threading.Thread(target=run, daemon=True).start()

    started = time.time()
    with Server(args.imrelay, env=env, directory=directory, on_spawn=sample) as again:
        ready = time.time() - started
        time.sleep(2)
        done.set()
        with urllib.request.urlopen(
            again.url("/v1/interactions?status=pending&limit=1"), timeout=300
        ) as r:
            listed = json.loads(r.read())
        return {"ready_seconds": round(ready, 2), "rss_peak_mb": round(peak[0], 1),
                "rss_settled_mb": round(again.rss(), 1),
                "pending_listed": len(listed["interactions"])}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bodies", help="slow and fragmented request bodies (item 1)")
    b.add_argument("--imrelay", required=True)
    b.add_argument("--hold", type=int, default=1100)
    b.add_argument("--hold-secs", type=int, default=60)
    b.add_argument("--unbounded", action="store_true", help="time bounds off: memory alone")
    b.add_argument("--cases", default="packets,webhook,hold", help="which, comma-separated")
    b.add_argument("--json")
    c = sub.add_parser("choices", help="a form with many choice options (item 5)")
    c.add_argument("--imrelay", required=True)
    c.add_argument("--options", type=int, default=100_000)
    c.add_argument("--json")
    d = sub.add_parser("pending", help="pending interactions with big inputs (item 7)")
    d.add_argument("--imrelay", required=True)
    d.add_argument("--count", type=int, default=1000)
    d.add_argument("--input-bytes", type=int, default=900_000)
    d.add_argument("--store", default="memory", choices=["memory", "sqlite"])
    d.add_argument("--budget-bytes", type=int, default=0,
                   help="interactions.max_pending_bytes and _per_token (0: the defaults)")
    d.add_argument("--connections", type=int, default=1)
    d.add_argument("--restart", action="store_true",
                   help="then start a server on the same database and measure its start-up")
    d.add_argument("--json")
    args = p.parse_args()
    # One descriptor per connection held.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 20000), hard), hard))
    report = {"bodies": run_bodies, "choices": run_choices, "pending": run_pending}[args.cmd](args)
    with open("/proc/loadavg") as f:
        report["loadavg"] = f.read().split()[:3]
    print("load average:", " ".join(report["loadavg"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
