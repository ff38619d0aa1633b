#!/usr/bin/env bash
# Stop the gunicorn started by serve.sh (by its pidfile) and wait until it has exited.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
pidfile="$LS_BENCH_DIR/gunicorn.pid"
[ -f "$pidfile" ] || { echo "no $pidfile: not running"; exit 0; }
pid=$(cat "$pidfile")
kill -TERM "$pid" 2>/dev/null || { echo "pid $pid not running"; rm -f "$pidfile"; exit 0; }
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || { echo "stopped $pid"; exit 0; }; sleep 0.2; done
echo "pid $pid still running after 20 s"; exit 1
