"""Static URLs from the manifest computed once per process (medalign_site/storage.py): each must
be exactly what Django's manifest storage gives, and a miss must never be cached."""

import json
from unittest import mock

import pytest

from medalign_site.storage import StaticStorage


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
