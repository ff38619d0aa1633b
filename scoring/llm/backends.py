"""Model backends that generate text: a local causal LM, or an OpenAI-compatible endpoint.

Plain Python (no Django): the generation runs and the LLM jury metric (``scoring.metrics.jury``)
both use them. Nothing here downloads anything:

- ``TransformersBackend``: a causal language model from a local folder (``transformers``,
  ``local_files_only``), loaded once per worker process (``scoring.weights.cached_model``)
  on CUDA when there is one. Each prompt is generated alone (no padding), seeded, so an output
  never depends on what else was in the batch.
- ``OpenAIHttpBackend``: ``POST <base>/v1/completions`` on an institution's own server (vLLM,
  TGI, llama.cpp's server). The data use agreement forbids third-party services, so a base URL
  must be on the allowlist (``set_allowlist``; the app installs one that reads the admin's
  ``GenerationEndpoint`` rows, and the default allows nothing) and is refused *before* any
  connection is made; redirects are never followed. The allowlist names hosts, and a name can
  point anywhere: each request resolves the host once, refuses public addresses unless the
  admin allowed them for that endpoint (``ALLOW_PUBLIC``) and link-local, multicast or
  unspecified ones always (a cloud's metadata service), and connects to the address it checked
  (no second lookup for DNS rebinding to answer). Timeouts, connection errors and 5xx answers
  are retried with backoff; anything else fails with a message that names the endpoint and the
  problem but never quotes the prompt or the answer, which hold patient text.

Both count tokens with the model's own tokenizer (``ModelTokenizer``): the local folder's, or for
an endpoint a local copy of the served model's tokenizer files (no weights needed).
"""

from __future__ import annotations

import abc
import hashlib
import ipaddress
import json
import os
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import urllib3
import urllib3.exceptions

from scoring.weights import cached_model, file_sha256, library_versions, set_offline_env

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
)


class GenerationError(Exception):
    """A generation that failed for good; the message never quotes prompts or outputs."""


class EndpointRefused(GenerationError):
    """An endpoint that is not on the allowlist (checked before any connection)."""


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int = 256  # HELM's medalign generation_length
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.max_new_tokens <= 32_768:
            raise ValueError("max_new_tokens must be between 1 and 32768")
        if not 0.0 <= self.temperature <= 5.0:
            raise ValueError("temperature must be between 0 and 5")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError("top_p must be above 0 and at most 1")
        if not 0 <= self.seed < 2**32:
            raise ValueError("seed must be a whole number from 0 to 4294967295")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop" | "length" | what the server said
    seconds: float
    served_model: str = ""  # the model id an endpoint answered with


# --------------------------------------------------------------------------- tokenizer


class ModelTokenizer:
    """A model's own (fast) tokenizer, loaded from a local folder only."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise GenerationError(f"tokenizer folder not found: {self.folder}")
        self._tok = cached_model(("gen-tokenizer", str(self.folder.resolve())), self._load)

    def _load(self) -> Any:
        set_offline_env()
        import transformers

        lib: Any = transformers  # untyped library
        tok = lib.AutoTokenizer.from_pretrained(
            str(self.folder), local_files_only=True, use_fast=True
        )
        if not tok.is_fast:
            raise GenerationError(
                f"{self.folder.name}: a fast tokenizer (tokenizer.json) is needed"
            )
        # Counting a long record is the point here: silence the "longer than max length" warning.
        tok.model_max_length = 10**12
        return tok

    @property
    def hf(self) -> Any:
        return self._tok

    def count(self, text: str) -> int:
        return len(self._tok(text, add_special_tokens=True)["input_ids"])

    def offsets(self, text: str) -> list[tuple[int, int]]:
        enc = self._tok(text, add_special_tokens=False, return_offsets_mapping=True)
        return [(int(a), int(b)) for a, b in enc["offset_mapping"]]

    def sha256(self) -> str:
        return _files_sha256(self.folder, TOKENIZER_FILES)


# ``progress(bytes_done, bytes_total)`` while a model's weights are hashed (the worker shows it).
HashProgress = Callable[[int, int], None]


def _files_sha256(
    folder: Path, names: Iterable[str], *, progress: HashProgress | None = None
) -> str:
    digest = hashlib.sha256()
    paths = [(name, folder / name) for name in sorted(names) if (folder / name).is_file()]
    total = sum(path.stat().st_size for _, path in paths) if progress is not None else 0
    done = 0
    for name, path in paths:
        report = None
        if progress is not None:
            report = lambda read, before=done: progress(before + read, total)  # noqa: E731
        digest.update(f"{name}:{file_sha256(path, progress=report)}\n".encode())
        done += path.stat().st_size if progress is not None else 0
    if progress is not None:
        progress(total, total)
    return digest.hexdigest()


def check_tokenizer_files(folder: Path) -> None:
    """What the web request checks of a tokenizer without loading it (transformers takes
    seconds to import): the folder exists and holds a tokenizer's files. The worker loads it
    (``ModelTokenizer``, which needs a fast one) and fails the batch with the reason if it will
    not: a vocabulary alone may still convert to a fast tokenizer."""
    if not folder.is_dir():
        raise GenerationError(f"tokenizer folder not found: {folder}")
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise GenerationError(f"{folder.name}: no tokenizer files ({', '.join(TOKENIZER_FILES)})")


def _weight_names(folder: Path) -> list[str]:
    names = sorted(p.name for p in folder.iterdir() if p.suffix in WEIGHT_SUFFIXES and p.is_file())
    if not names:
        raise GenerationError(f"{folder.name}: no weight files ({', '.join(WEIGHT_SUFFIXES)})")
    return names


def weights_sha256(folder: Path, *, progress: HashProgress | None = None) -> str:
    """sha256 over the weight files of a model folder (name and content of each)."""
    return _files_sha256(folder, _weight_names(folder), progress=progress)


def weights_files(folder: Path) -> dict[str, list[int]]:
    """The weight files' names, sizes and modification times (ns): what tells, without reading
    gigabytes, that a folder's weights are the ones seen before (``file_sha256`` caches on
    the same)."""
    out = {}
    for name in _weight_names(folder):
        st = os.stat(os.path.realpath(folder / name))
        out[name] = [st.st_size, st.st_mtime_ns]
    return out


# --------------------------------------------------------------------------- backends


class GenerationBackend(abc.ABC):
    kind: str

    @abc.abstractmethod
    def tokenizer(self) -> ModelTokenizer: ...

    @abc.abstractmethod
    def identity(self, *, progress: HashProgress | None = None) -> dict[str, Any]:
        """What produced the text: weights hash, or endpoint + model name; tokenizer hash.
        ``progress`` follows the hashing of a local model's weights."""

    def quick_identity(self) -> dict[str, Any]:
        """``identity()`` without reading the weights nor loading the tokenizer (a web request
        takes this one)."""
        return self.identity()

    def check_tokenizer(self) -> None:
        """The tokenizer's files are there, checked without loading it."""
        check_tokenizer_files(self.tokenizer_folder())

    @abc.abstractmethod
    def tokenizer_folder(self) -> Path: ...

    @abc.abstractmethod
    def generate(self, prompt: str, params: GenerationParams) -> Generation: ...

    def label(self) -> str:
        return str(self.identity().get("model", self.kind))

    def max_positions(self) -> tuple[int, str] | None:
        """The longest context the model holds, and where that was read; None if unknown."""
        return None


# Where a model's config says how many positions it has, in the order transformers' own
# configs use them (GPT-2 "n_positions", Llama "max_position_embeddings", MPT "max_seq_len"…).
_POSITION_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "max_sequence_length",
    "seq_length",
    "n_ctx",
)


def model_max_positions(folder: Path) -> tuple[int, str] | None:
    """From ``config.json`` (the model's positions), else ``tokenizer_config.json``'s
    ``model_max_length`` when it is a real limit (transformers writes 1e30 for "none")."""
    for name, keys in (("config.json", _POSITION_KEYS), ("tokenizer_config.json", ())):
        path = folder / name
        if not path.is_file():
            continue
        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(config, dict):
            continue
        for key in keys or ("model_max_length",):
            value = config.get(key)
            if isinstance(value, int) and 0 < value < 10_000_000:
                return value, f"{name} {key}"
    return None


class TransformersBackend(GenerationBackend):
    """A causal LM from a local folder, on CUDA when present, loaded once per process."""

    kind = "transformers"

    def __init__(self, path: str | os.PathLike[str], *, device: str | None = None) -> None:
        self.path = Path(path)
        if not (self.path / "config.json").is_file():
            raise GenerationError(f"not a local model folder (no config.json): {self.path}")
        self._device = device

    def tokenizer(self) -> ModelTokenizer:
        return ModelTokenizer(self.path)

    def tokenizer_folder(self) -> Path:
        return self.path

    def max_positions(self) -> tuple[int, str] | None:
        return model_max_positions(self.path)

    def identity(self, *, progress: HashProgress | None = None) -> dict[str, Any]:
        return {
            **self.quick_identity(),
            "weights_sha256": weights_sha256(self.path, progress=progress),
        }

    def quick_identity(self) -> dict[str, Any]:
        # Sizes and times of the weights, hashes of the small files only: no weights read, and
        # the tokenizer hashed from its files (``ModelTokenizer.sha256``) without loading it.
        return {
            "backend": self.kind,
            "model": self.path.name,
            "weights_files": weights_files(self.path),
            "config_sha256": file_sha256(self.path / "config.json"),
            "tokenizer_sha256": _files_sha256(self.path, TOKENIZER_FILES),
            "versions": library_versions("torch", "transformers"),
        }

    def _load(self) -> tuple[Any, str]:
        set_offline_env()
        import torch
        import transformers

        lib: Any = transformers  # untyped library
        device = self._device or ("cuda" if torch.cuda.is_available() else "cpu")
        model = lib.AutoModelForCausalLM.from_pretrained(
            str(self.path), local_files_only=True, trust_remote_code=False
        )
        model.to(device)
        model.eval()
        return model, device

    def model(self) -> tuple[Any, str]:
        return cached_model(("gen-causal-lm", str(self.path.resolve()), self._device), self._load)  # type: ignore[no-any-return]

    def generate(self, prompt: str, params: GenerationParams) -> Generation:
        import torch

        model, device = self.model()
        tok = self.tokenizer().hf
        started = time.perf_counter()
        enc = tok(prompt, return_tensors="pt", add_special_tokens=True)
        input_ids = enc["input_ids"].to(device)
        n_prompt = int(input_ids.shape[1])
        limit = getattr(model.config, "max_position_embeddings", None)
        if limit is not None and n_prompt + params.max_new_tokens > limit:
            raise GenerationError(
                f"{self.path.name}: {n_prompt} prompt tokens + {params.max_new_tokens} new tokens "
                f"exceed the model's {limit} positions"
            )
        eos = tok.eos_token_id if tok.eos_token_id is not None else tok.sep_token_id
        pad = tok.pad_token_id if tok.pad_token_id is not None else eos
        sample = params.temperature > 0
        kwargs: dict[str, Any] = {
            "max_new_tokens": params.max_new_tokens,
            "do_sample": sample,
            "pad_token_id": pad,
            "eos_token_id": eos,
        }
        if sample:
            kwargs.update(temperature=params.temperature, top_p=params.top_p)
        torch.manual_seed(params.seed)  # each prompt alone, seeded: batch-independent output
        with torch.inference_mode():
            out = model.generate(
                input_ids=input_ids,
                attention_mask=enc["attention_mask"].to(device),
                **kwargs,
            )
        new = out[0, n_prompt:]
        n_new = int(new.shape[0])
        finished = eos is not None and n_new > 0 and int(new[-1]) == eos
        text = tok.decode(new, skip_special_tokens=True)
        return Generation(
            text=text,
            prompt_tokens=n_prompt,
            completion_tokens=n_new,
            finish_reason="stop" if finished or n_new < params.max_new_tokens else "length",
            seconds=time.perf_counter() - started,
        )


# --------------------------------------------------------------------------- endpoints


def normalize_endpoint(url: str) -> str:
    """``scheme://host:port/path`` (no trailing slash, default port written out, host lowered).

    ValueError for anything that is not a plain http(s) URL: credentials, a query or a fragment
    in an endpoint URL are refused rather than guessed at.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https"):
        raise ValueError("an endpoint URL starts with http:// or https://")
    if not parts.hostname:
        raise ValueError("an endpoint URL needs a host")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError("an endpoint URL carries no credentials, query or fragment")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{host}:{port}{path}"


# The allowlist: a callable answering "may this normalized endpoint be used?": False, True (at
# private addresses only) or ALLOW_PUBLIC (an admin's explicit choice: public addresses too). The
# default allows nothing; the Django app installs one that reads the admin's rows
# (scoring.apps).
ALLOW_PUBLIC = "public"
_ALLOWED: Callable[[str], Any] = lambda endpoint: False  # noqa: E731


def set_allowlist(check: Callable[[str], Any]) -> Callable[[str], Any]:
    """Install the allowlist check; returns the one it replaces (tests put it back)."""
    global _ALLOWED
    previous, _ALLOWED = _ALLOWED, check
    return previous


def check_endpoint(url: str) -> str:
    """The normalized endpoint if it is allowed; ``EndpointRefused`` otherwise (no connection)."""
    try:
        endpoint = normalize_endpoint(url)
    except ValueError as exc:
        raise EndpointRefused(f"endpoint refused: {exc}") from None
    if not _ALLOWED(endpoint):
        raise EndpointRefused(
            f"endpoint refused: {endpoint} is not on the allowlist of institution-run model "
            "servers. The data use agreement forbids sending records to third-party services; "
            "an admin adds the institution's own servers under Admin → Generation endpoints."
        )
    return endpoint


def address_refusal(ip: str, *, allow_public: bool) -> str | None:
    """Why a model server may not be reached at ``ip``, or None if it may."""
    address = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    if (
        address.is_link_local
        or address.is_multicast
        or address.is_unspecified
        or address.is_reserved
    ):
        return f"{address} is a link-local, multicast, reserved or unspecified address"
    if address.is_global and not allow_public:
        return (
            f"{address} is a public address; the allowlist is for servers inside the "
            "institution (an admin can allow public addresses for this endpoint explicitly)"
        )
    return None


def resolve_endpoint(endpoint: str) -> tuple[str, int]:
    """The address to connect to for an allowed ``endpoint``: its host resolved once, every
    address it resolves to checked (``address_refusal``); ``EndpointRefused`` otherwise."""
    permit = _ALLOWED(endpoint)
    if not permit:
        check_endpoint(endpoint)  # raises with the allowlist's message
    parts = urlsplit(endpoint)
    host, port = parts.hostname or "", parts.port or 80
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise EndpointRefused(f"endpoint refused: {host} does not resolve ({exc})") from None
    addresses = [str(answer[4][0]) for answer in answers]
    for ip in addresses:
        why = address_refusal(ip, allow_public=permit == ALLOW_PUBLIC)
        if why:
            raise EndpointRefused(f"endpoint refused: {host} resolves to {why}")
    if not addresses:
        raise EndpointRefused(f"endpoint refused: {host} resolves to no address")
    return addresses[0], port


class OpenAIHttpBackend(GenerationBackend):
    """An OpenAI-compatible completions endpoint inside the institution (allowlisted)."""

    kind = "openai-http"

    def __init__(
        self,
        endpoint: str,
        model: str,
        *,
        tokenizer_path: str | os.PathLike[str],
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 1.0,
        api_key: str = "",
    ) -> None:
        if not model.strip():
            raise GenerationError("an endpoint needs the name of the model it serves")
        self.endpoint = check_endpoint(endpoint)
        self.model_name = model.strip()
        self.tokenizer_path = Path(tokenizer_path)
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self._api_key = api_key

    def tokenizer(self) -> ModelTokenizer:
        return ModelTokenizer(self.tokenizer_path)

    def tokenizer_folder(self) -> Path:
        return self.tokenizer_path

    def max_positions(self) -> tuple[int, str] | None:
        # The served model's config often sits beside its tokenizer; if not, the server is
        # the judge (an over-long request fails with its own message).
        return model_max_positions(self.tokenizer_path)

    def identity(self, *, progress: HashProgress | None = None) -> dict[str, Any]:
        check_tokenizer_files(self.tokenizer_path)
        return {
            "backend": self.kind,
            "endpoint": self.endpoint,
            "model": self.model_name,
            # From the files, as ModelTokenizer.sha256 takes it, without loading the tokenizer.
            "tokenizer_sha256": _files_sha256(self.tokenizer_path, TOKENIZER_FILES),
        }

    def generate(self, prompt: str, params: GenerationParams) -> Generation:
        body = {
            "model": self.model_name,
            "prompt": prompt,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "seed": params.seed,
            "n": 1,
            "stream": False,
        }
        started = time.perf_counter()
        data = self._post("/v1/completions", body)
        try:
            choice = data["choices"][0]
            text = choice["text"]
            if not isinstance(text, str):
                raise TypeError
        except (KeyError, IndexError, TypeError):
            raise GenerationError(
                f"{self.endpoint}: the answer has no choices[0].text (not an OpenAI-compatible "
                "completions response)"
            ) from None
        raw_usage = data.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        return Generation(
            text=text,
            prompt_tokens=_int(usage.get("prompt_tokens")),
            completion_tokens=_int(usage.get("completion_tokens")),
            finish_reason=str(choice.get("finish_reason") or ""),
            seconds=time.perf_counter() - started,
            served_model=str(data.get("model") or "")[:200],
        )

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` as JSON, retrying timeouts, failed connections, 429 and 5xx with
        backoff (urllib3's ``Retry``), never following a redirect.

        The allowlist is read again and the name resolved and checked again for every call:
        an endpoint an admin removes stops at once. The socket goes to the address just
        checked, while the name stays the host for the Host header, TLS SNI
        (``server_hostname``) and the certificate check (``assert_hostname``), so a name that
        answers another address later (DNS rebinding) is never followed.
        """
        check_endpoint(self.endpoint)
        parts = urlsplit(self.endpoint)
        host = parts.hostname or ""
        ip, port = resolve_endpoint(self.endpoint)
        retry = urllib3.Retry(
            total=self.retries,
            redirect=0,
            raise_on_redirect=False,
            raise_on_status=False,
            status_forcelist=_RETRIED_STATUSES,
            allowed_methods=None,  # POST too: a completion has no side effect to repeat
            backoff_factor=self.backoff,
            backoff_max=30.0,
            respect_retry_after_header=False,
        )
        timeout = urllib3.Timeout(connect=self.timeout, read=self.timeout)
        pool: urllib3.HTTPConnectionPool
        if parts.scheme == "https":
            pool = urllib3.HTTPSConnectionPool(
                ip,
                port,
                timeout=timeout,
                retries=retry,
                server_hostname=host,
                assert_hostname=host,
                cert_reqs="CERT_REQUIRED",
            )
        else:
            pool = urllib3.HTTPConnectionPool(ip, port, timeout=timeout, retries=retry)
        headers = {
            "Host": host if parts.port is None else f"{host}:{parts.port}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        attempts = self.retries + 1
        try:
            response = pool.urlopen(
                "POST",
                parts.path + path,
                body=json.dumps(body).encode("utf-8"),
                headers=headers,
                preload_content=False,
            )
            try:
                raw = response.read(64 << 20)
            finally:
                response.release_conn()
            status = response.status
            history = response.retries.history if response.retries is not None else ()
            attempts = len(history) + 1
        except urllib3.exceptions.MaxRetryError as exc:
            raise GenerationError(
                f"{self.endpoint}: {_failure(exc.reason, self.timeout)} ({_attempts(attempts)})"
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            # A read that fails after the retries are spent (Retry raises MaxRetryError only
            # while it still counts).
            raise GenerationError(
                f"{self.endpoint}: {_failure(exc, self.timeout)} ({_attempts(attempts)})"
            ) from None
        finally:
            pool.close()
        if 300 <= status < 400:
            raise GenerationError(
                f"{self.endpoint}: answered with a redirect (HTTP {status}); redirects are not "
                "followed, configure the endpoint's final address"
            )
        if status in _RETRIED_STATUSES:
            raise GenerationError(f"{self.endpoint}: HTTP {status} ({_attempts(attempts)})")
        if status >= 400:
            raise GenerationError(f"{self.endpoint}: HTTP {status} ({len(raw)} bytes of error)")
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise GenerationError(
                f"{self.endpoint}: the answer is not valid JSON ({len(raw)} bytes)"
            ) from None
        if not isinstance(data, dict):
            raise GenerationError(f"{self.endpoint}: the answer is not a JSON object")
        return data


def _attempts(n: int) -> str:
    return f"after {n} attempt{'s' if n != 1 else ''}"


# Answers worth asking again: the server is busy or failed this once.
_RETRIED_STATUSES = frozenset({429, *range(500, 600)})


def _failure(exc: BaseException | None, timeout: float) -> str:
    """What went wrong with a request, without quoting it (it may carry patient text)."""
    # urllib3 makes a refused connection a kind of connect timeout: ask about it first.
    if isinstance(exc, urllib3.exceptions.NewConnectionError):
        return f"connection failed ({type(exc).__name__})"
    if isinstance(exc, urllib3.exceptions.TimeoutError | TimeoutError):
        return f"no answer within {timeout:g} s"
    return f"connection failed ({type(exc).__name__})"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# --------------------------------------------------------------------------- from a spec


def backend_from_spec(spec: dict[str, Any]) -> GenerationBackend:
    """A backend from its JSON spec, as stored on a run or a jury configuration.

    ``{"kind": "transformers", "path": "/models/llama"}`` or
    ``{"kind": "openai-http", "endpoint": "http://10.0.0.5:8000", "model": "llama-3-70b",
    "tokenizer_path": "/models/llama-3-70b-tokenizer", "timeout": 120}``.
    """
    kind = spec.get("kind")
    if kind == "transformers":
        return TransformersBackend(str(spec.get("path", "")))
    if kind == "openai-http":
        return OpenAIHttpBackend(
            str(spec.get("endpoint", "")),
            str(spec.get("model", "")),
            tokenizer_path=str(spec.get("tokenizer_path", "")),
            timeout=float(spec.get("timeout", 120.0)),
            retries=int(spec.get("retries", 3)),
            backoff=float(spec.get("backoff", 1.0)),
            api_key=os.environ.get(str(spec.get("api_key_env", "")), "")
            if spec.get("api_key_env")
            else "",
        )
    raise GenerationError(
        f"unknown generation backend {kind!r}; choose transformers or openai-http"
    )


def spec_label(spec: dict[str, Any]) -> str:
    if spec.get("kind") == "openai-http":
        return str(spec.get("model", "endpoint"))
    return Path(str(spec.get("path", "model"))).name


def generate_all(
    backend: GenerationBackend, prompts: Sequence[str], params: GenerationParams
) -> list[Generation]:
    return [backend.generate(p, params) for p in prompts]
