from django.http import HttpRequest

from review import access
from review.selectors.accounts import applications_pending_count


def navigation(request: HttpRequest) -> dict[str, object]:
    """What the navigation bar needs: the signed-in user's effective roles."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"nav_roles": frozenset()}
    roles = access.user_access(user).roles
    context: dict[str, object] = {"nav_roles": roles}
    if "admin" in roles:
        # Admins see how many applications wait for them on every page (one COUNT on an
        # indexed column), not only once they open the queue.
        context["nav_pending_applications"] = applications_pending_count()
    return context
