"""Single sign-on endpoints of the app's own: the OpenID Connect callback that checks the ID
token's signature, the providers' back-channel logout, and the operator's break-glass link.

The sign-in pages themselves are allauth's (``/accounts/oidc/<id>/login/``,
``/accounts/saml/<id>/…``); review.adapters applies the app's rules to them.
"""

from allauth.socialaccount.models import SocialApp
from allauth.socialaccount.providers.oauth2.views import OAuth2CallbackView
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from review.services.sso import BreakGlassRefused, break_glass_open, sso_backchannel_logout
from review.sso import LogoutTokenInvalid, SignedIDTokenAdapter


def oidc_callback(request: HttpRequest, provider_id: str) -> HttpResponse:
    """allauth's OpenID Connect callback, with the ID token's signature always checked."""
    try:
        view = OAuth2CallbackView.adapter_view(SignedIDTokenAdapter(request, provider_id))
        response: HttpResponse = view(request)
    except SocialApp.DoesNotExist:
        raise Http404 from None
    return response


@csrf_exempt  # the provider's server calls it, with a signed token instead of a cookie
@require_POST
def oidc_backchannel_logout(request: HttpRequest, provider_id: str) -> HttpResponse:
    """OpenID Connect Back-Channel Logout: the provider says a person signed out there (or was
    disabled); every session of theirs here ends. 200 once done, 400 naming why otherwise."""
    token = request.POST.get("logout_token", "")
    try:
        sso_backchannel_logout(request=request, provider_id=provider_id, logout_token=token)
    except LogoutTokenInvalid as exc:
        response: HttpResponse = JsonResponse(
            {"error": "invalid_request", "error_description": str(exc)}, status=400
        )
    else:
        response = HttpResponse(status=200)
    response["Cache-Control"] = "no-store"
    return response


@require_GET
def break_glass(request: HttpRequest, token: str) -> HttpResponse:
    """An operator's one-time link (manage.py sso_break_glass): this browser may then sign in
    with the account's password, and TOTP, while local passwords are off."""
    try:
        user = break_glass_open(request=request, token=token)
    except BreakGlassRefused as exc:
        return render(request, "account/break_glass.html", {"refusal": str(exc)}, status=400)
    messages.info(
        request,
        f"Break-glass sign-in for {user.email}: sign in with its password, then TOTP.",
    )
    return redirect("account_login")
