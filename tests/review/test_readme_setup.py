"""The README's set-up for a newcomer is true: `rundemo --addr` serves on another address, and
the TOTP one-liner it gives (standard library only, no demo command) prints the code the sign-in
accepts."""

import re
import subprocess
import sys
import time
from pathlib import Path

from django.core.management import load_command_class

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
DEMO_SECRET = "XTAEEFENFXVORKM2MTSDETKMORLXQDQN"  # clinician1's, public in the README


def test_the_readme_says_how_to_serve_on_another_address_and_rundemo_takes_it():
    assert "manage.py rundemo --addr 0.0.0.0:8080" in README
    parser = load_command_class("review", "rundemo").create_parser("manage.py", "rundemo")
    assert parser.parse_args(["--addr", "0.0.0.0:8080"]).addr == "0.0.0.0:8080"
    assert parser.parse_args([]).addr == "127.0.0.1:8000"


def test_the_readmes_totp_one_liner_prints_the_code_the_sign_in_accepts():
    from review.allauth_compat import format_hotp_value, hotp_value

    match = re.search(r"python3 -c '(import base64[^']+)' (\w+)", README)
    assert match, "the README gives no standard-library TOTP command"
    snippet, secret = match.groups()
    assert secret == DEMO_SECRET
    for _ in range(3):  # a 30-second window may turn between the two computations
        window = int(time.time()) // 30
        printed = subprocess.run(  # noqa: S603 - fixed interpreter, the README's own snippet
            [sys.executable, "-c", snippet, secret], capture_output=True, text=True, check=True
        ).stdout.strip()
        if int(time.time()) // 30 == window:
            break
    assert printed == format_hotp_value(hotp_value(secret, window))
    assert "any authenticator app" in README and "pyotp" in README
