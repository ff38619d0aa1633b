#!/usr/bin/env bash
# Wait until gunicorn answers /health and its workers have finished importing Label Studio
# (each worker loads the app itself, no --preload: seconds of CPU each on 2 cores), i.e. the
# workers' CPU time stops growing.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
pidfile="$LS_BENCH_DIR/gunicorn.pid"
ticks() { local t=0; for p in $(pgrep -P "$(cat "$pidfile")"); do
  t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo $t; }
for i in $(seq 1 300); do
  if curl -fsS -o /dev/null "http://127.0.0.1:${LS_PORT}/health"; then
    prev=$(ticks)
    for _ in $(seq 1 120); do sleep 1; now=$(ticks); [ $((now - prev)) -le 3 ] && break; prev=$now; done
    echo "ready after ${SECONDS}s: $(pgrep -c -P "$(cat "$pidfile")") workers idle"; exit 0
  fi
  sleep 1
done
echo "not ready after 300 s"; exit 1
