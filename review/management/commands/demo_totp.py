import time

from allauth.mfa import app_settings
from allauth.mfa.models import Authenticator
from allauth.mfa.utils import decrypt
from django.core.management.base import BaseCommand, CommandError, CommandParser

from review.allauth_compat import format_hotp_value, hotp_value
from review.demo.accounts import DEMO_DOMAIN


class Command(BaseCommand):
    help = "Print the current TOTP code of a demo account (demo accounts only)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("email")

    def handle(self, *args: object, **options: object) -> None:
        email = str(options["email"]).strip().lower()
        # Only the demo accounts: for a real account this would be a second-factor bypass.
        if not email.endswith("@" + DEMO_DOMAIN):
            raise CommandError(f"Only demo accounts (@{DEMO_DOMAIN}) are supported.")
        authenticator = Authenticator.objects.filter(
            user__email=email, type=Authenticator.Type.TOTP
        ).first()
        if authenticator is None:
            raise CommandError(f"{email} has no TOTP authenticator: run `load_demo` first.")
        secret = decrypt(authenticator.data["secret"])
        now = int(time.time())
        counter = now // app_settings.TOTP_PERIOD
        remaining = app_settings.TOTP_PERIOD - now % app_settings.TOTP_PERIOD
        code = format_hotp_value(hotp_value(secret, counter))
        self.stdout.write(f"{code}  (valid for about {remaining} more seconds)")
