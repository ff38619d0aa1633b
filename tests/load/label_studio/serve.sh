#!/usr/bin/env bash
# Serve Label Studio 1.23.2 (PostgreSQL ls_bench) with gunicorn: 4 workers x 4 gthread threads,
# DEBUG off, 127.0.0.1:$LS_PORT (default 8765). Foreground; extra args go to gunicorn
# (e.g. `serve.sh --daemon`). Master pid in $LS_BENCH_DIR/gunicorn.pid, log in $LS_BENCH_DIR/gunicorn.log.
# WSGI module: label_studio/core/wsgi.py (core.wsgi:application), imported with the LS package
# dir as cwd/sys.path like label_studio/manage.py and LS's uwsgi.ini (chdir=label_studio).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
mkdir -p "$LS_BENCH_DIR"
exec "$LS_VENV/bin/gunicorn" core.wsgi:application \
  --chdir "$LS_PKG" \
  --bind "127.0.0.1:${LS_PORT}" \
  --workers "${LS_WORKERS:-4}" --worker-class gthread --threads "${LS_THREADS:-4}" \
  --keep-alive 30 --timeout 120 --graceful-timeout 10 \
  --pid "$LS_BENCH_DIR/gunicorn.pid" \
  --error-logfile "$LS_BENCH_DIR/gunicorn.log" --capture-output \
  --name ls-bench \
  "$@"
