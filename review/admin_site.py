"""Django's admin, for approved admins only, signed in through allauth (so with TOTP)."""

from urllib.parse import urlencode

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from review.access import second_factor_satisfied, user_access


class MedAlignAdminSite(admin.AdminSite):
    site_header = "MedAlign Review administration"
    site_title = "MedAlign Review admin"
    index_title = "Administration"

    def has_permission(self, request: HttpRequest) -> bool:
        # is_staff alone is not enough: access ends at once when the admin approval or the
        # training certificate expires, a new DUA is unsigned, or TOTP is not set up; and this
        # session must have passed TOTP (a password-only session never reaches the admin).
        user = request.user
        if not (user.is_active and user.is_staff):
            return False
        access = user_access(user)
        return access.is_admin and second_factor_satisfied(request, access)

    def login(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        # Django's own login form would skip allauth's TOTP step: always sign in through allauth.
        next_url = request.GET.get("next") or reverse("admin:index")
        if request.user.is_authenticated:
            # Signed in but not allowed here: the home page explains what is missing (or asks
            # for the TOTP step this session has not passed).
            allowed = self.has_permission(request)
            return HttpResponseRedirect(reverse("admin:index" if allowed else "home"))
        return HttpResponseRedirect(f"{reverse('account_login')}?{urlencode({'next': next_url})}")
