"""METEOR via NLTK's ``nltk.translate.meteor_score.meteor_score`` with WordNet.  CPU only.

How MedAlign computed it
    MedAlign (Fleming et al., arXiv 2308.14089) lists METEOR among the automated metrics it
    compared with clinicians' rankings. Its evaluation code is not public (the
    som-shahlab/medalign repository holds the README, the licence and data samples only), so the
    choices below are this app's, each stated:
    * the scorer is NLTK's ``meteor_score`` with every default (``str.lower`` preprocessing,
      Porter stemmer, WordNet synonyms, alpha 0.9, beta 3, gamma 0.5), one reference per call;
    * tokens are whitespace-separated words (``str.split``), as in this app's MedAlign parity
      setting for ROUGE-L: NLTK's ``meteor_score`` takes pre-tokenized text since 3.6.6, and
      ``word_tokenize`` would need the punkt model, another download. Punctuation stays on its
      word ("antibiotics." is not "antibiotics");
    * the reference is the first clinician answer, Annotator_1, as the MedAlign authors' loader
      in HELM does (stanford-crfm/helm, ``medalign_scenario_helper.add_reference_responses``):
      the run's ``first`` aggregation. ``max`` equals ``meteor_score`` over all the references.

WordNet, offline
    NLTK's ``nltk.download("wordnet")`` fetches from the network; here WordNet comes from Debian's
    ``wordnet-base`` package (WordNet 3.0, Princeton's permissive licence), which installs its
    database in ``/usr/share/wordnet`` (the ``wordnet`` option or ``METEOR_WORDNET_DIR``; any
    folder in WordNet's database format, e.g. NLTK's own ``corpora/wordnet``, works too). NLTK's
    ``WordNetCorpusReader`` reads it with two differences from a stock ``nltk_data`` folder:
    * Debian leaves out ``lexnames`` (the names of the 45 lexicographer files; its C library has
      them compiled in), which NLTK reads when it opens WordNet: the WordNet 3.0 table of
      lexnames(5WN) is supplied when the folder has none. It names ``Synset.lexname()`` only and
      never takes part in METEOR;
    * no mapping to another WordNet version (``map_wn``): that serves the multilingual Open
      Multilingual Wordnet, which METEOR does not use (stock NLTK would look for a second
      ``corpora/wordnet`` to map to).
    NLTK (3.10) only reads corpora under its data path, so the folder is added to
    ``nltk.data.path`` (and only that folder). Nothing is ever downloaded: no WordNet there means
    ``MetricUnavailable`` with the reason, and the other metrics still run.

Loading WordNet takes NLTK seconds, so it happens once per process, on the first ``score()``
(``scoring.weights.cached_model``), never at import.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scoring.weights import cached_model, file_sha256, library_versions

from .base import LOCATION_KEY, MetricBackend, MetricUnavailable, Pair

__all__ = ["DEFAULT_WORDNET_DIR", "MeteorBackend", "WORDNET_FILES"]

DEFAULT_WORDNET_DIR = "/usr/share/wordnet"  # Debian's wordnet-base
DEBIAN_PACKAGE = "wordnet-base"
DPKG_INFO = "/var/lib/dpkg/info"
WORDNET_ENV = "METEOR_WORDNET_DIR"
# The files NLTK reads to find a word's synsets and their lemmas (what METEOR's synonym stage
# uses): the identity hashes them.
WORDNET_FILES = tuple(
    f"{kind}.{pos}" for kind in ("data", "index") for pos in ("noun", "verb", "adj", "adv")
) + tuple(f"{pos}.exc" for pos in ("noun", "verb", "adj", "adv"))
# WordNet 3.0's ``lexnames`` file as NLTK reads it (lexnames(5WN)): lex_filenum, the
# lexicographer file's name, its syntactic category (1 noun, 2 verb, 3 adjective, 4 adverb).
LEXNAMES_30 = (
    "00\tadj.all\t3\n"
    "01\tadj.pert\t3\n"
    "02\tadv.all\t4\n"
    "03\tnoun.Tops\t1\n"
    "04\tnoun.act\t1\n"
    "05\tnoun.animal\t1\n"
    "06\tnoun.artifact\t1\n"
    "07\tnoun.attribute\t1\n"
    "08\tnoun.body\t1\n"
    "09\tnoun.cognition\t1\n"
    "10\tnoun.communication\t1\n"
    "11\tnoun.event\t1\n"
    "12\tnoun.feeling\t1\n"
    "13\tnoun.food\t1\n"
    "14\tnoun.group\t1\n"
    "15\tnoun.location\t1\n"
    "16\tnoun.motive\t1\n"
    "17\tnoun.object\t1\n"
    "18\tnoun.person\t1\n"
    "19\tnoun.phenomenon\t1\n"
    "20\tnoun.plant\t1\n"
    "21\tnoun.possession\t1\n"
    "22\tnoun.process\t1\n"
    "23\tnoun.quantity\t1\n"
    "24\tnoun.relation\t1\n"
    "25\tnoun.shape\t1\n"
    "26\tnoun.state\t1\n"
    "27\tnoun.substance\t1\n"
    "28\tnoun.time\t1\n"
    "29\tverb.body\t2\n"
    "30\tverb.change\t2\n"
    "31\tverb.cognition\t2\n"
    "32\tverb.communication\t2\n"
    "33\tverb.competition\t2\n"
    "34\tverb.consumption\t2\n"
    "35\tverb.contact\t2\n"
    "36\tverb.creation\t2\n"
    "37\tverb.emotion\t2\n"
    "38\tverb.motion\t2\n"
    "39\tverb.perception\t2\n"
    "40\tverb.possession\t2\n"
    "41\tverb.social\t2\n"
    "42\tverb.stative\t2\n"
    "43\tverb.weather\t2\n"
    "44\tadj.ppl\t3\n"
)
# NLTK's meteor_score defaults, as MedAlign would have called it; recorded in the identity so a
# change would never share scores with these.
PARAMETERS = {
    "tokenizer": "whitespace",
    "preprocess": "lowercase",
    "stemmer": "porter",
    "alpha": 0.9,
    "beta": 3.0,
    "gamma": 0.5,
}
_VERSION_LINE = re.compile(rb"WordNet (\d+(?:\.\d+)*\+?) Copyright")
_INSTALL_HINT = (
    "install Debian's wordnet-base package (`apt-get install wordnet-base`, or `make wordnet`) "
    f"or point {WORDNET_ENV} at a WordNet database folder; METEOR never downloads WordNet"
)


def _debian_package(path: Path) -> str | None:
    """``"wordnet-base 1:3.0-37"`` when Debian's wordnet-base installed ``path``, else None.

    Ownership is read from dpkg's file list of that package (``dpkg -S`` would search every
    package's list: half a second here)."""
    dpkg = shutil.which("dpkg-query")
    listing = Path(DPKG_INFO) / f"{DEBIAN_PACKAGE}.list"
    try:
        if dpkg is None or str(path.resolve()) not in listing.read_text().splitlines():
            return None
        version = subprocess.run(
            [dpkg, "-W", "-f=${Version}", DEBIAN_PACKAGE],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if version.returncode != 0 or not version.stdout.strip():
        return None
    return f"{DEBIAN_PACKAGE} {version.stdout.strip()}"


def _wordnet_reader(root: Path) -> Any:
    """NLTK's ``WordNetCorpusReader`` over ``root`` (see the module docstring for the two
    differences from a stock ``nltk_data`` folder)."""
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    has_lexnames = (root / "lexnames").is_file()

    class _WordNetReader(WordNetCorpusReader):  # type: ignore[misc]
        def open(self, file: str) -> Any:
            if file == "lexnames" and not has_lexnames:
                return io.StringIO(LEXNAMES_30)
            return super().open(file)

        def map_wn(self, version: str = "wordnet") -> None:
            return None

    if str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))  # NLTK reads corpora only under its data path
    with warnings.catch_warnings():
        # "The multilingual functions are not available with this Wordnet version": no OMW
        warnings.simplefilter("ignore", UserWarning)
        reader = _WordNetReader(str(root), None)
    # NLTK reads index and data files by byte offset and can load a malformed database without
    # a word of complaint (files with CRLF line ends give ``None`` synsets): look one word up.
    probe = reader.synsets("good")
    if not probe or any(s is None or not s.lemmas() for s in probe):
        raise ValueError("looking up 'good' gave no usable synsets")
    return reader


class MeteorBackend(MetricBackend):
    """Sentence METEOR (0-1), NLTK's ``meteor_score`` against one reference per pair.

    Option ``wordnet``: the WordNet database folder (default: ``METEOR_WORDNET_DIR``, else
    Debian's ``/usr/share/wordnet``), read when the backend is created.
    """

    name = "meteor"
    primary = "score"
    kind = "lexical"
    option_defaults = {"wordnet": None}

    def _validate(self, options: dict[str, Any]) -> dict[str, Any]:
        folder = options["wordnet"]
        if folder is None:
            folder = os.environ.get(WORDNET_ENV) or DEFAULT_WORDNET_DIR
        if not isinstance(folder, (str, os.PathLike)) or not os.fspath(folder).strip():
            raise ValueError("meteor option wordnet must be a folder path")
        options["wordnet"] = os.path.abspath(os.path.expanduser(os.fspath(folder).strip()))
        self._identity: dict[str, Any] | None = None
        return options

    @property
    def folder(self) -> Path:
        return Path(self.options["wordnet"])

    def check_available(self) -> None:
        """The WordNet files are there (cheap: nothing is loaded)."""
        import importlib.util

        if importlib.util.find_spec("nltk") is None:
            raise MetricUnavailable("METEOR needs the nltk package, which is not installed")
        if not self.folder.is_dir():
            raise MetricUnavailable(f"METEOR: no WordNet folder at {self.folder}: {_INSTALL_HINT}")
        missing = [name for name in WORDNET_FILES if not (self.folder / name).is_file()]
        if missing:
            raise MetricUnavailable(
                f"METEOR: the WordNet folder {self.folder} lacks {', '.join(missing)}: "
                f"{_INSTALL_HINT}"
            )

    def _version(self) -> str | None:
        with (self.folder / "data.adj").open("rb") as fh:
            head = fh.read(4096)
        match = _VERSION_LINE.search(head)
        return match.group(1).decode() if match else None

    def identity(self) -> dict[str, Any]:
        """WordNet's version and the sha256 of its files (``files``, and ``sha256`` over the
        sorted ``"<name> <sha256>"`` lines), NLTK's parameters and version; ``location`` (not
        hashed) holds the folder and the Debian package that installed it."""
        if self._identity is None:
            self.check_available()
            names = [n for n in (*WORDNET_FILES, "lexnames") if (self.folder / n).is_file()]
            files = {name: file_sha256(self.folder / name) for name in sorted(names)}
            digest = hashlib.sha256(
                "".join(f"{name} {sha}\n" for name, sha in files.items()).encode()
            ).hexdigest()
            self._identity = {
                "backend": self.name,
                "options": dict(PARAMETERS),
                "wordnet": {"version": self._version(), "sha256": digest, "files": files},
                "versions": library_versions("nltk"),
                LOCATION_KEY: {
                    "wordnet_dir": str(self.folder),
                    "wordnet_package": _debian_package(self.folder / "data.noun"),
                },
            }
        return self._identity

    def provenance(self) -> dict[str, Any]:
        """Flat, for reports: the report's ``model`` is the WordNet METEOR matches synonyms with
        and ``weights_sha256`` the hash of its files (what fixes the numbers besides NLTK)."""
        ident = self.identity()
        wordnet = ident["wordnet"]
        package = ident[LOCATION_KEY]["wordnet_package"]
        source = f"Debian package {package}" if package else f"local folder {self.folder.name}"
        return {
            "metric": self.name,
            "model": f"WordNet {wordnet['version'] or '(version not stated)'}",
            "model_source": "package" if package else "local",
            "model_revision": package,
            "weights_sha256": wordnet["sha256"],
            "tokenizer": PARAMETERS["tokenizer"],
            "stemming": True,  # METEOR's second stage: Porter stems
            "meteor_parameters": {k: PARAMETERS[k] for k in ("alpha", "beta", "gamma")},
            "wordnet_version": wordnet["version"],
            "wordnet_source": source,
            "wordnet_sha256": wordnet["sha256"],
            "library_versions": ident["versions"],
        }

    def _cache_key(self) -> tuple[Any, ...]:
        st = (self.folder / "data.noun").stat()
        return (self.name, str(self.folder.resolve()), st.st_size, st.st_mtime_ns)

    def _wordnet(self) -> Any:
        self.check_available()

        def load() -> Any:
            try:
                return _wordnet_reader(self.folder.resolve())
            except Exception as exc:  # NLTK's refusals (file permissions), malformed files
                raise MetricUnavailable(
                    f"METEOR: the WordNet at {self.folder} could not be read by NLTK "
                    f"({type(exc).__name__}: {exc}); {_INSTALL_HINT}"
                ) from exc

        return cached_model(self._cache_key(), load)

    def score(self, pairs: Sequence[Pair]) -> list[dict[str, float]]:
        pairs = self._check_pairs(pairs)
        if not pairs:
            return []
        wordnet = self._wordnet()
        from nltk.translate.meteor_score import meteor_score

        return [
            {
                "score": float(
                    meteor_score([p.reference.split()], p.hypothesis.split(), wordnet=wordnet)
                )
            }
            for p in pairs
        ]
