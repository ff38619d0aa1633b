"""Lexical metrics: ROUGE-L (rouge-score), sentence BLEU and chrF++ (sacrebleu).  CPU only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scoring.weights import library_versions

from .base import MetricBackend, Pair

__all__ = ["BleuBackend", "ChrfBackend", "RougeLBackend", "WhitespaceTokenizer"]


class WhitespaceTokenizer:
    """rouge-score tokenizer object: tokens are the whitespace-separated words, kept verbatim
    (no lower-casing, no punctuation stripping, no stemming), as in MedAlign-derived code."""

    def tokenize(self, text: str) -> list[str]:
        return text.split()


class _LexicalBackend(MetricBackend):
    kind = "lexical"

    def check_available(self) -> None:
        return None


class RougeLBackend(_LexicalBackend):
    """ROUGE-L via ``rouge_score.rouge_scorer.RougeScorer(["rougeL"], ...)``.

    Options: ``use_stemmer`` (False), ``tokenizer`` ("default": rouge-score's own lower-casing
    tokenizer; "whitespace": :class:`WhitespaceTokenizer`; rouge-score ignores ``use_stemmer``
    with a custom tokenizer, so combining ``use_stemmer=True`` with "whitespace" is rejected).
    """

    name = "rougeL"
    primary = "fmeasure"
    option_defaults = {"use_stemmer": False, "tokenizer": "default"}

    def _validate(self, options: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(options["use_stemmer"], bool):
            raise ValueError("rougeL option use_stemmer must be a bool")
        if options["tokenizer"] not in ("default", "whitespace"):
            raise ValueError("rougeL option tokenizer must be 'default' or 'whitespace'")
        if options["tokenizer"] == "whitespace" and options["use_stemmer"]:
            raise ValueError(
                "rougeL: use_stemmer=True has no effect with tokenizer='whitespace' "
                "(rouge-score ignores use_stemmer when a tokenizer is given)"
            )
        self._scorer = None
        return options

    def _get_scorer(self):
        if self._scorer is None:
            from rouge_score import rouge_scorer

            tokenizer = WhitespaceTokenizer() if self.options["tokenizer"] == "whitespace" else None
            self._scorer = rouge_scorer.RougeScorer(
                ["rougeL"], use_stemmer=self.options["use_stemmer"], tokenizer=tokenizer
            )
        return self._scorer

    def identity(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "options": dict(self.options),
            "versions": library_versions("rouge-score", "nltk"),
        }

    def provenance(self) -> dict[str, Any]:
        return {
            "metric": self.name,
            "stemming": self.options["use_stemmer"],
            "rouge_tokenizer": self.options["tokenizer"],
            "library_versions": library_versions("rouge-score", "nltk"),
        }

    def score(self, pairs: Sequence[Pair]) -> list[dict[str, float]]:
        scorer = self._get_scorer()
        out = []
        for pair in self._check_pairs(pairs):
            s = scorer.score(pair.reference, pair.hypothesis)["rougeL"]  # (target, prediction)
            out.append(
                {
                    "precision": float(s.precision),
                    "recall": float(s.recall),
                    "fmeasure": float(s.fmeasure),
                }
            )
        return out


class _SacreBleuBackend(_LexicalBackend):
    primary = "score"
    option_defaults: dict[str, Any] = {}

    def _validate(self, options: dict[str, Any]) -> dict[str, Any]:
        self._metric = None
        self._signature: str | None = None
        return options

    def _make_metric(self):
        raise NotImplementedError

    def _get_metric(self):
        if self._metric is None:
            self._metric = self._make_metric()
        return self._metric

    def signature(self) -> str:
        """sacrebleu's signature string (it needs one evaluation to know nrefs: always 1 here)."""
        if self._signature is None:
            metric = self._make_metric()
            metric.sentence_score("x", ["x"])
            self._signature = str(metric.get_signature())
        return self._signature

    def identity(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "options": dict(self.options),
            "signature": self.signature(),
            "versions": library_versions("sacrebleu"),
        }

    def provenance(self) -> dict[str, Any]:
        return {
            "metric": self.name,
            "sacrebleu_signature": self.signature(),
            "library_versions": library_versions("sacrebleu"),
        }

    def score(self, pairs: Sequence[Pair]) -> list[dict[str, float]]:
        metric = self._get_metric()
        return [
            {"score": float(metric.sentence_score(p.hypothesis, [p.reference]).score)}
            for p in self._check_pairs(pairs)
        ]


class BleuBackend(_SacreBleuBackend):
    """Sentence BLEU (0-100): ``sacrebleu.metrics.BLEU(effective_order=True)``."""

    name = "bleu"

    def _make_metric(self):
        from sacrebleu.metrics import BLEU

        return BLEU(effective_order=True)


class ChrfBackend(_SacreBleuBackend):
    """Sentence chrF++ (0-100): ``sacrebleu.metrics.CHRF(word_order=2)``."""

    name = "chrf"

    def _make_metric(self):
        from sacrebleu.metrics import CHRF

        return CHRF(word_order=2)
