#!/bin/bash
# Reproduces BENCHMARKS.md, "The resolution in the notification" (item 12).
# A/B of the cross-replica hop: before and after replicas side by side (each pair on a schema
# of its own), 1 agent, 2 ms think, runs alternating before/after in the same time window.
# usage: ab.sh <before-bin> <after-bin> <loadgen> <rounds> <secs> <outdir>
set -u
B=$1; A=$2; LG=$3; N=$4; SECS=$5; OUT=$6
URL=postgres://postgres@127.0.0.1:5432/test
mkdir -p "$OUT"
ports=(18101 18102 18201 18202)
pids=()
start() { # bin schema port
  env -i IMRELAY__SERVER__LISTEN=127.0.0.1:$3 IMRELAY__INTERACTIONS__MAX_TIMEOUT_SECS=7200 \
    IMRELAY__STORE__BACKEND=postgres IMRELAY__STORE__URL=$URL IMRELAY__STORE__SCHEMA=$2 \
    "$1" serve >/dev/null 2>&1 &
  pids+=($!)
}
start "$B" ab_before 18101; sleep 1; start "$B" ab_before 18102
start "$A" ab_after 18201; sleep 1; start "$A" ab_after 18202
for p in "${ports[@]}"; do
  for i in $(seq 600); do curl -sf http://127.0.0.1:$p/healthz >/dev/null && break; sleep 0.1; done
done
echo "pids ${pids[*]}"
run() { # label url respond pids
  local f="$OUT/$1-$(date +%s%N).json"
  "$LG" cycle --url "$2" ${3:+--respond-url "$3"} --agents 1 --think-us 2000 --duration "$SECS" \
     --pid "$4" --db-cpu --json "$f" >/dev/null 2>&1
  python3 - "$f" "$1" <<'PY'
import json,sys
r=json.load(open(sys.argv[1]))
def f(k):
  return r.get(k)
print(sys.argv[2], json.dumps({k:v for k,v in r.items() if not isinstance(v,(dict,list))}))
PY
}
for i in $(seq $N); do
  if (( i % 2 )); then order="before after"; else order="after before"; fi
  for w in $order; do
    if [ $w = before ]; then a=18101; b=18102; pp="${pids[0]},${pids[1]}"; else a=18201; b=18202; pp="${pids[2]},${pids[3]}"; fi
    run "cross-$w" http://127.0.0.1:$a http://127.0.0.1:$b "$pp"
    run "one-$w" http://127.0.0.1:$a "" "${pp%%,*}"
  done
done
kill "${pids[@]}"
wait
psql -q postgres://postgres@127.0.0.1:5432/test -c 'DROP SCHEMA IF EXISTS ab_before CASCADE; DROP SCHEMA IF EXISTS ab_after CASCADE' 2>&1 | tail -1
