# Label Studio 1.23.2 benchmark environment (source this file; the other scripts do).
# Work folder (accounts.json, gunicorn pid/log, run outputs) and LS venv, both overridable:
export LS_BENCH_DIR=${LS_BENCH_DIR:-/tmp/ls-bench}
export LS_VENV=${LS_VENV:-/tmp/lsvenv}
export LS_PKG=${LS_PKG:-$LS_VENV/lib/python3.11/site-packages/label_studio}
export DJANGO_SETTINGS_MODULE=core.settings.label_studio   # as label_studio/manage.py and the Docker image
# (no PYTHONPATH: LS ships a sitecustomize.py in its package dir that imports coverage; run from $LS_PKG / gunicorn --chdir instead)
export DJANGO_DB=default                                    # 'default' -> postgresql in LS settings
export LS_DB=${LS_DB:-ls_bench}             # its template: ${LS_DB}_tpl (reset_db.sh)
export POSTGRE_NAME=$LS_DB
export POSTGRE_USER=postgres
export POSTGRE_PASSWORD=
export POSTGRE_HOST=127.0.0.1
export POSTGRE_PORT=5432
export LABEL_STUDIO_BASE_DATA_DIR=${LABEL_STUDIO_BASE_DATA_DIR:-/tmp/ls-data}
export DEBUG=false
export LOG_LEVEL=WARNING
export JSON_LOG=false
export SENTRY_DSN=                 # LS defaults to its public Sentry DSN (2% trace sampling): keep it out of the measurement
export FRONTEND_SENTRY_DSN=
export COLLECT_ANALYTICS=false
export LATEST_VERSION_CHECK=false  # else every process start GETs pypi.org/pypi/label-studio/json
export LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN=true   # new orgs get legacy 'Token' auth enabled
export LS_PORT=${LS_PORT:-8765}
