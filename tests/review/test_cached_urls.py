"""URLs and static URLs built once per process (review/urlcache.py, the ``{% url %}`` builtin,
medalign_site/storage.py): each must give exactly what Django gives, and must stop asking
Django once it has the answer (a reverse() or a manifest lookup is a tenth of a millisecond,
and every page builds a dozen)."""

import json
from unittest import mock

import pytest
from django.template import Context, Engine, Template
from django.urls import NoReverseMatch, get_resolver, reverse, set_script_prefix

from medalign_site.storage import StaticStorage
from review import urlcache

DJANGO = Engine()  # Django's own {% url %}, without the project's builtin


def _render(source: str, engine: Engine | None = None, **context: object) -> str:
    template = engine.from_string(source) if engine else Template(source)
    return template.render(Context(context))


def _int_only_names() -> list[tuple[str, int]]:
    """Every named route of the project whose arguments are all <int:...>, with its arity."""
    found = []
    for name, entries in get_resolver().reverse_dict.lists():
        if not isinstance(name, str):
            continue
        for bits, _pattern, _defaults, converters in entries:
            params = bits[0][1]
            if set(params) == set(converters) and all(
                type(c).__name__ == "IntConverter" for c in converters.values()
            ):
                found.append((name, len(params)))
    return sorted(set(found))


@pytest.fixture(autouse=True)
def _fresh_caches():
    urlcache.clear()
    yield
    urlcache.clear()
    set_script_prefix("/")


def test_every_int_route_renders_as_djangos_url_tag() -> None:
    names = _int_only_names()
    assert len(names) > 20  # the project's own routes, allauth's and the admin's
    for name, arity in names:
        ids = [7 + i for i in range(arity)]
        source = "{% url name " + " ".join(f"a{i}" for i in range(arity)) + " %}"
        context = {"name": name} | {f"a{i}": v for i, v in enumerate(ids)}
        assert _render(source, **context) == _render(source, DJANGO, **context), name
        assert urlcache.url_for(name, *ids) == reverse(name, args=ids), name


def test_a_route_is_reversed_once_then_filled_in() -> None:
    with mock.patch.object(urlcache, "reverse", wraps=reverse) as spy:
        first = [_render("{% url 'clinician_review' i %}", i=i) for i in (1, 2, 3)]
        _render("{% url 'clinician_queue' %}{% url 'clinician_queue' %}")
    assert first == [reverse("clinician_review", args=[i]) for i in (1, 2, 3)]
    assert spy.call_count == 2  # one per route, none per call


def test_the_script_prefix_is_part_of_the_key() -> None:
    assert _render("{% url 'clinician_queue' %}") == "/queue/"
    set_script_prefix("/review-app/")
    assert _render("{% url 'clinician_queue' %}") == "/review-app/queue/"
    assert urlcache.url_for("clinician_review", 5) == "/review-app/instructions/5/review/"


@pytest.mark.parametrize(
    "source",
    [
        "{% url 'admin:index' %}",  # a namespace: Django resolves it with the current app
        "{% url 'clinician_review' '12' %}",  # a string argument
        "{% url 'clinician_review' instruction_id=12 %}",  # keyword arguments
        "{% url 'account_confirm_email' 'k3y' %}",  # a route that is not ids alone
        "{% url 'clinician_review' flag %}",  # True is an int to Python, not to a URL
    ],
)
def test_what_it_does_not_cache_goes_to_django(source: str) -> None:
    context = {"flag": True}
    try:
        expected = _render(source, DJANGO, **context)
    except NoReverseMatch:
        with pytest.raises(NoReverseMatch):
            _render(source, **context)
        return
    assert _render(source, **context) == expected


def test_unknown_names_fail_as_in_django() -> None:
    with pytest.raises(NoReverseMatch):
        _render("{% url 'no_such_route' %}")
    with pytest.raises(NoReverseMatch):
        urlcache.url_for("clinician_review")  # missing its id
    urlcache.url_for("review_save", 5)  # the route is known now
    with pytest.raises(NoReverseMatch):
        urlcache.url_for("review_save", -1)  # not an <int:> id, as reverse() says
    assert _render("{% url 'no_such_route' as u %}[{{ u }}]") == "[]"
    assert _render("{% url 'clinician_queue' as u %}[{{ u }}]") == "[/queue/]"


def test_static_urls_are_the_manifests_and_computed_once(tmp_path) -> None:
    (tmp_path / "staticfiles.json").write_text(
        json.dumps(
            {
                "version": "1.1",
                "hash": "0",
                "paths": {"review/app.css": "review/app.0123abcd.css"},
            }
        )
    )
    storage = StaticStorage(location=str(tmp_path), base_url="/static/")
    parent = type(storage).__mro__[1]
    with mock.patch.object(parent, "url", autospec=True, side_effect=parent.url) as spy:
        urls = [storage.url("review/app.css") for _ in range(3)]
        for _ in range(2):
            with pytest.raises(ValueError, match="Missing staticfiles manifest entry"):
                storage.url("review/missing.js")
    assert urls == ["/static/review/app.0123abcd.css"] * 3
    assert spy.call_count == 1 + 2  # the hit once; a miss is never cached
