#!/usr/bin/env bash
# Put ls_bench back to the state setup_ls.py left (no annotations, drafts or task locks), from the
# template ls_bench_tpl made right after setup. The server must be stopped (no connections).
# Full rebuild instead:  dropdb ls_bench; createdb ls_bench; migrate; setup_ls.py (see README.md).
set -euo pipefail
P="psql -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1 -q"
$P -c "DROP DATABASE IF EXISTS ls_bench" -c "CREATE DATABASE ls_bench TEMPLATE ls_bench_tpl"
$P -d ls_bench -Atc "select 'ls_bench reset: ' || (select count(*) from task) || ' tasks, ' || (select count(*) from task_completion) || ' annotations, ' || (select count(*) from authtoken_token) || ' tokens'"
