"""Static files storage: WhiteNoise's compressed manifest storage, each URL computed once.

With DEBUG off every ``{% static %}`` goes through the manifest: the name cleaned and split, the
hashed name looked up, the URL quoted and joined to STATIC_URL. That is work on every tag, and the
answer never changes while the process runs (the manifest is read once, when the storage is
made), so it is kept. A name the manifest lacks still raises every time, and ``collectstatic``
in the same process (which rewrites the manifest) starts the cache afresh.
"""

from collections.abc import Iterator
from typing import Any

from whitenoise.storage import CompressedManifestStaticFilesStorage

_MAX_NAMES = 2048  # the templates name a few dozen; a bound in case a template builds names


class StaticStorage(CompressedManifestStaticFilesStorage):  # type: ignore[misc]  # untyped
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._urls: dict[str, str] = {}

    def url(self, name: str | None, force: bool = False) -> str:
        if force or name is None:
            return str(super().url(name, force))
        cached = self._urls.get(name)
        if cached is None:
            cached = str(super().url(name))
            if len(self._urls) < _MAX_NAMES:
                self._urls[name] = cached
        return cached

    def post_process(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        self._urls = {}
        yield from super().post_process(*args, **kwargs)
        self._urls = {}
