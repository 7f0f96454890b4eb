#!/usr/bin/env python3
"""What `imrelay acp` keeps of the tool calls an agent reports (issue 42, item 8): an agent
that sends `--count` `session/update` `tool_call` notifications of `--kb` KB each, then waits;
the proxy's resident memory (VmRSS) once every one has reached the editor's side.

The agent is a few lines of Python run by the proxy; the editor's side is this script, which
reads and drops what the proxy writes. imrelay is not needed (no permission is asked).

    python3 benches/acp_tool_calls.py --imrelay target/debug/imrelay --count 600 --kb 1000

See BENCHMARKS.md ("Hardening, round 3") for the figures.
"""

import argparse
import json
import os
import subprocess
import sys
import time

AGENT = r"""
import json, sys
count, kb = int(sys.argv[1]), int(sys.argv[2])
for n in range(count):
    text = "x" * (kb * 1000)
    m = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s",
         "update": {"sessionUpdate": "tool_call", "toolCallId": f"c{n}", "title": "Write",
                    "status": "pending",
                    "content": [{"type": "content", "content": {"type": "text", "text": text}}]}}}
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()
sys.stdin.read()
"""


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--imrelay", required=True)
    p.add_argument("--count", type=int, default=600)
    p.add_argument("--kb", type=int, default=1000)
    a = p.parse_args()
    proxy = subprocess.Popen(
        [a.imrelay, "acp", "--url", "http://127.0.0.1:9", "--",
         sys.executable, "-c", AGENT, str(a.count), str(a.kb)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env={"PATH": os.environ.get("PATH", "")},
    )
    start = time.monotonic()
    lines = 0
    while lines < a.count:
        line = proxy.stdout.readline()
        if not line:
            break
        lines += 1
    time.sleep(1)  # let the proxy finish with the last line
    rss = rss_mb(proxy.pid)
    proxy.kill()
    proxy.wait()
    print(json.dumps({"count": a.count, "kb": a.kb, "lines_passed": lines,
                      "seconds": round(time.monotonic() - start, 1),
                      "proxy_rss_mb": round(rss, 1)}))


if __name__ == "__main__":
    sys.exit(main())
