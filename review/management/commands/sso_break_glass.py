"""Print a one-time link letting one account sign in with its password while local passwords are
off (LOCAL_PASSWORDS=false): the operator's way in when the identity provider is down, or for
the first admin before anyone signs in through it. See docs/operating/sso.md, "Break-glass".

The link works once, in the browser that opens it, for SSO_BREAK_GLASS_MINUTES; the account
still needs its password and its TOTP. Issuing, opening and refusing it are audited.
"""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse

from review.models import User
from review.services.sso import BreakGlassRefused, break_glass_issue
from review.site import absolute


class Command(BaseCommand):
    help = "Print a one-time password sign-in link for one account (local passwords off)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("email")

    def handle(self, *args: object, **options: object) -> None:
        email = str(options["email"]).strip()
        user = User.objects.filter(email__iexact=email).first()
        if user is None:
            raise CommandError(f"no account {email}")
        if not user.has_usable_password():
            raise CommandError(
                f"{user.email} has no password here: set one first "
                f"(manage.py changepassword {user.email})"
            )
        try:
            token = break_glass_issue(user=user)
        except BreakGlassRefused as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(absolute(reverse("sso_break_glass", args=[token])))
        self.stderr.write(
            f"Good once, for {settings.SSO_BREAK_GLASS_MINUTES} minutes, in the browser that "
            f"opens it: {user.email} then signs in with its password and TOTP."
        )
