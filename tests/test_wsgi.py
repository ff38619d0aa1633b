"""The WSGI entry point gunicorn loads (medalign_site/wsgi.py)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_loading_the_app_freezes_what_it_loaded_out_of_the_cyclic_gc(tmp_path) -> None:
    # In a process of its own: freezing is for the life of the process.
    script = (
        "import gc; import medalign_site.wsgi as w; "
        "print(callable(w.application), gc.get_freeze_count() > 50_000, gc.isenabled())"
    )
    env = {**os.environ, "DEBUG": "true", "DATA_DIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["True", "True", "True"]
