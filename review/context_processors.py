from django.http import HttpRequest

from review import access


def navigation(request: HttpRequest) -> dict[str, object]:
    """What the navigation bar needs: the signed-in user's effective roles."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"nav_roles": frozenset()}
    return {"nav_roles": access.user_access(user).roles}
