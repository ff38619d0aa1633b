from django.conf import settings
from django.http import HttpRequest

from review import access, sso
from review.selectors.accounts import applications_pending_count


def navigation(request: HttpRequest) -> dict[str, object]:
    """What the navigation bar needs: the signed-in user's effective roles."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        # The sign-in page shows the password form only where local passwords are on, or an
        # operator's break-glass link was opened in this browser.
        return {
            "nav_roles": frozenset(),
            "local_passwords_open": settings.LOCAL_PASSWORDS
            or bool(sso.break_glass_email(request)),
            "local_signup_open": settings.LOCAL_PASSWORDS,
        }
    roles = access.user_access(user).roles
    context: dict[str, object] = {"nav_roles": roles}
    if "admin" in roles:
        # Admins see how many applications wait for them on every page (one COUNT on an
        # indexed column), not only once they open the queue.
        context["nav_pending_applications"] = applications_pending_count()
    return context
