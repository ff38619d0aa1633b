#!/usr/bin/env bash
# Put $LS_DB (env.sh; default ls_bench) back to the state setup_ls.py left (no annotations, drafts
# or task locks), from the template ${LS_DB}_tpl made right after setup. The server must be stopped (no connections).
# Full rebuild instead:  dropdb ls_bench; createdb ls_bench; migrate; setup_ls.py (see README.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
P="psql -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1 -q"
$P -c "DROP DATABASE IF EXISTS $LS_DB" -c "CREATE DATABASE $LS_DB TEMPLATE ${LS_DB}_tpl"
$P -d "$LS_DB" -Atc "select '$LS_DB reset: ' || (select count(*) from task) || ' tasks, ' || (select count(*) from task_completion) || ' annotations, ' || (select count(*) from authtoken_token) || ' tokens'"
