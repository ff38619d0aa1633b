"""gunicorn settings of MedAlign Review's web processes (deploy/systemd/medalign-web@.service).

One file for every web host; what differs comes from the environment (the unit, the
environment file): GUNICORN_HOST (default 127.0.0.1; the address nginx reaches this host on
when nginx runs elsewhere), GUNICORN_PORT (the unit's instance, e.g. 8001), GUNICORN_WORKERS
(default 2 per core plus 1, at most 9) and GUNICORN_THREADS (4). ``make drill-deploy`` starts
its two web processes with this file.
"""

import multiprocessing
import os

bind = [f"{os.environ.get('GUNICORN_HOST', '127.0.0.1')}:{os.environ.get('GUNICORN_PORT', '8001')}"]
workers = int(os.environ.get("GUNICORN_WORKERS") or min(2 * multiprocessing.cpu_count() + 1, 9))
# Threads, not only processes: a request waiting on the database or Redis holds a thread, not
# a whole worker.
worker_class = "gthread"
threads = int(os.environ.get("GUNICORN_THREADS") or 4)
# The app is imported once, before the workers fork (medalign_site/wsgi.py freezes what it
# loaded for the workers to share).
preload_app = True
timeout = 60
graceful_timeout = 30
# Longer than nginx's upstream keepalive_timeout (20 s, deploy/nginx/medalign.conf).
keepalive = 30
# X-Forwarded-* are believed from the proxy's address only (nginx on this host by default).
forwarded_allow_ips = os.environ.get("GUNICORN_FORWARDED_ALLOW_IPS", "127.0.0.1")
# No control socket (gunicorn >= 24): its default, $HOME/.gunicorn/gunicorn.ctl, is one path for
# every web process of the host (the second replaces the first's) and lies in the service's home,
# which the unit makes read-only. systemctl reload/restart do what it would.
control_socket_disable = True
# nginx logs every request (without query strings); gunicorn logs errors to the journal.
accesslog = None
errorlog = "-"
loglevel = "info"
