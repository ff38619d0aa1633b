# MedAlign Review — the two commands: `make demo` and `make test`. Each sets itself up.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXTRAS ?= [dev]

.PHONY: install demo run worker test test-fast test-e2e test-django-next lint format migrate check-deploy lock browser xmlsec wordnet icu nginx drill-deploy drill-restore clean

install: $(STAMP) wordnet

$(STAMP): pyproject.toml requirements.lock | icu
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=24"
	# requirements.lock pins the whole resolve. torch==2.13.0 is satisfied by the CPU build
	# where the index offers one (PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu;
	# PyPI alone gives Linux the CUDA build and its nvidia wheels). EXTRAS= leaves out the
	# test tools on a server (docs/operating/deploy.md).
	$(PY) -m pip install --quiet -c requirements.lock -e ".$(EXTRAS)"
	touch $(STAMP)

# DEBUG is opt-in (off unless set): the local targets below ask for it; a deployment sets
# SECRET_KEY and MFA_ENCRYPTION_KEY instead (README, "Settings").
migrate: install
	DEBUG=$${DEBUG:-true} $(PY) manage.py migrate --noinput

# Loads the synthetic demo (once) and serves http://127.0.0.1:8000 with a Celery worker;
# Ctrl-C stops both.
demo: migrate
	DEBUG=true $(PY) manage.py rundemo

# Serves what the database holds (DATA_DIR or DATABASE_URL) on http://127.0.0.1:8000 with a Celery
# worker; Ctrl-C stops both. DEBUG unless DEBUG=false, which real data needs: a database of its
# own, SECRET_KEY and MFA_ENCRYPTION_KEY set (README, "Bringing the real MedAlign data").
run: migrate
	DEBUG=$${DEBUG:-true} $(PY) manage.py runlocal

worker: install
	DEBUG=$${DEBUG:-true} TORCH_NUM_THREADS=$${TORCH_NUM_THREADS:-1} $(VENV)/bin/celery -A medalign_site worker -Q cpu,gpu --concurrency 2 --loglevel INFO

# Debian's Chromium for the browser tests (a test tool's own browser download fails offline).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null; \
	  else echo "chromium not installed: browser tests will be skipped (apt-get install chromium)"; fi; }

# Debian's xmlsec1 for the SSO tests' SAML identity provider (pysaml2 signs with it); the app
# itself checks SAML with the xmlsec wheel. Without it those tests are skipped, with the reason.
xmlsec:
	@command -v xmlsec1 >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && apt-get install -y -qq xmlsec1) >/dev/null; \
	  else echo "xmlsec1 not installed: the SAML sign-in tests will be skipped (apt-get install xmlsec1)"; fi; }

# Debian's nginx and openssl for the deployment drill (deploy/nginx), installed as `browser`
# installs Chromium. Debian starts no service here when a policy-rc.d forbids it (containers);
# on a plain host it starts the distribution's default site, which the drill does not use.
nginx:
	@{ test -x /usr/sbin/nginx && command -v openssl >/dev/null 2>&1; } || { \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && apt-get install -y -qq --no-install-recommends nginx openssl) >/dev/null; \
	  else echo "nginx missing: apt-get install nginx openssl (make drill-deploy needs them)" >&2; fi; }

# The deployment recipe (deploy/) on loopback: nginx with TLS before two gunicorns and the
# workers, driven through HTTPS by a clinician (tests/drills/deploy.py; as root, ~2 min).
drill-deploy: install nginx
	$(PY) -m tests.drills.deploy

# A scripted study backed up, restored into a new database and storage, compared row by row
# and file by file, then signed into (tests/drills/restore.py; ~2 min).
drill-restore: install
	$(PY) -m tests.drills.restore

# METEOR's WordNet: Debian's wordnet-base (WordNet 3.0, Princeton's licence) in /usr/share/wordnet;
# NLTK's own download needs the network. Pinned; a release without that version gets its own, and
# the sha256 of the files every METEOR score used is in its provenance. Without root: METEOR is
# unavailable (with the reason) and its tests are skipped.
WORDNET_DEB ?= 1:3.0-37
wordnet:
	@test -f /usr/share/wordnet/data.noun || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq >/dev/null && \
	    { apt-get install -y -qq --no-install-recommends "wordnet-base=$(WORDNET_DEB)" >/dev/null || \
	      { echo "wordnet-base $(WORDNET_DEB) is not offered here: installing this release's" >&2; \
	        apt-get install -y -qq --no-install-recommends wordnet-base >/dev/null; }; }; \
	  else echo "WordNet not installed: METEOR unavailable, its tests skipped (apt-get install wordnet-base)"; fi; }

# PyICU (masking folds look-alike letters with ICU's TR39 skeletons) builds against Debian's ICU.
icu:
	@pkg-config --exists icu-i18n 2>/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && apt-get install -y -qq --no-install-recommends libicu-dev pkg-config) >/dev/null; \
	  else echo "ICU headers missing: apt-get install libicu-dev pkg-config (PyICU builds against them)" >&2; fi; }

test: install browser xmlsec nginx
	$(PY) -m pytest -n 2 --dist loadgroup

test-fast: install
	$(PY) -m pytest -m "not e2e and not worker and not slow"

# medalign_site/prepared.py (Django's private API, docs/decisions/prepared-statements.md) against
# Django's next release, installed beside the venv in var/django-next (.ci/django-next).
test-django-next: install
	PY=$(PY) .ci/django-next

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	DEBUG=true $(VENV)/bin/mypy
	DEBUG=true $(VENV)/bin/lint-imports

format: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

check-deploy: install
	DEBUG=false SECRET_KEY=$$(head -c 48 /dev/urandom | base64) ALLOWED_HOSTS=review.example.org \
	  MFA_ENCRYPTION_KEY=$$(head -c 32 /dev/urandom | base64 | tr '+/' '-_') \
	  $(PY) manage.py check --deploy --fail-level WARNING

lock:
	$(PY) -m pip freeze --exclude-editable | sed 's/^torch==2.13.0+cpu/torch==2.13.0/' \
	  | (echo "# Full resolve of pyproject.toml's dependencies + [dev], used as pip constraints by 'make install'."; echo "# Regenerate: make lock"; cat) > requirements.lock

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache
