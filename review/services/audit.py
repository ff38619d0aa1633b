"""Writing the append-only audit trail. Never pass patient text in ``details``.

Rows are only ever inserted, one statement per request (``insert_rows``: the INSERT as
bulk_create sends it, its SQL made once), so the trail costs every audited request little.
"""

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest

from medalign_site.prepared import insert_rows
from review.allauth_compat import get_client_ip
from review.models import AuditEvent, User


def client_ip(request: HttpRequest | None) -> str | None:
    """The client's address, as allauth's rate limits see it.

    ``X-Forwarded-For`` is believed only for TRUSTED_PROXY_COUNT proxies (settings): with none,
    anyone could write any address into the audit trail. A request that reached the app
    without passing through the configured proxies is recorded by its socket address.
    """
    if request is None:
        return None
    return _origin(request)[0]


def _origin(request: HttpRequest) -> tuple[str | None, str]:
    """The address and user agent the trail records for a request, read once per request: the
    review page writes two events, and allauth's reading of the proxy settings is most of what
    an event costs to build. Neither can change while the request is served (the user can, at
    sign-in and sign-out, so it is not kept here)."""
    found: tuple[str | None, str] | None = getattr(request, "_audit_origin", None)
    if found is None:
        try:
            ip = get_client_ip(request) or None
        except ImproperlyConfigured:
            ip = request.META.get("REMOTE_ADDR") or None
        found = (ip, request.META.get("HTTP_USER_AGENT", "")[:300])
        request._audit_origin = found  # type: ignore[attr-defined]
    return found


def audit_event(
    *,
    action: str,
    actor: User | None,
    request: HttpRequest | None,
    obj: Any,
    person_id: str,
    instruction_id: str,
    actor_email: str = "",
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """An unsaved audit row: who (the request's user unless given), what, which object, where.

    For a service that writes it in the statement of the change it records
    (``medalign_site.prepared.update_then_insert``); ``audit_record`` writes one by itself.
    """
    if actor is None and request is not None and request.user.is_authenticated:
        actor = request.user
    ip, user_agent = _origin(request) if request is not None else (None, "")
    return AuditEvent(
        action=action,
        actor=actor,
        actor_email=actor_email or (actor.email if actor is not None else ""),
        object_type=type(obj).__name__ if obj is not None else "",
        object_id=str(getattr(obj, "pk", "") or "") if obj is not None else "",
        person_id=person_id,
        instruction_id=instruction_id,
        ip_address=ip,
        user_agent=user_agent,
        details=details or {},
    )


def audit_record(
    *,
    action: str,
    actor: User | None = None,
    request: HttpRequest | None = None,
    obj: Any = None,
    person_id: str = "",
    instruction_id: str = "",
    actor_email: str = "",
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    event = audit_event(
        action=action,
        actor=actor,
        request=request,
        obj=obj,
        person_id=person_id,
        instruction_id=instruction_id,
        actor_email=actor_email,
        details=details,
    )
    insert_rows([event], return_pk=True)
    return event


def audit_record_many(
    *,
    actions: list[str],
    request: HttpRequest,
    obj: Any = None,
    person_id: str = "",
    instruction_id: str = "",
) -> None:
    """Several events of one request (e.g. instruction and record viewed) in one INSERT."""
    insert_rows(
        [
            audit_event(
                action=action,
                actor=None,
                request=request,
                obj=obj,
                person_id=person_id,
                instruction_id=instruction_id,
            )
            for action in actions
        ],
        return_pk=True,
    )
