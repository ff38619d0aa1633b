"""An LLM jury: the institution's own models judge each response with HELM's rubric.

HELM's ``medalign`` scenario judges responses with a jury of LLMs (stanford-crfm/helm,
``src/helm/benchmark/annotation/medalign_annotator.py``: ``PROMPT_TEMPLATE`` and
``ANNOTATION_CRITERIA``; ``src/helm/benchmark/metrics/llm_jury_metrics.py``: the score is the
mean of every judge's every criterion score). ``RUBRIC_HELM`` below is that prompt, quoted word for
word so the numbers are comparable (HELM is Apache-2.0 licensed). The judges here are the app's
generation backends (``scoring.llm.backends``): a local causal LM, or an allowlisted
endpoint inside the institution; never a third-party service.

Values per response (``score`` / ``score_detailed``):

- ``jury``: the mean over judges and criteria of the scores that parsed (HELM's
  ``LLMJuryMetric``); ``0.0`` (HELM's ``default_score``) when no judge gave a usable verdict, which
  ``judges_parsed == 0`` marks and reports treat as missing;
- ``judge<i>`` (1-based, in the order of the ``judges`` option): that judge's mean over the three
  criteria, and ``judge<i>_<criterion>`` each score; absent when the judge's answer did not parse;
- ``judges_parsed``, ``judges_total``.

What the judges see is HELM's: ``{{QUESTION}}`` is the scenario's input text
(``LLMAsJuryAnnotator._interpolate_prompt``: ``request_state.instance.input.text``), which HELM's
``medalign`` scenario fills with the whole generation prompt, record included
(``medalign_scenario_helper.return_dataset_dataframe``: ``include_ehr=True``). Here it is HELM's
generation template (``scoring.llm.prompts.HELM_TEMPLATE``) around the instruction and
the patient's record (``Pair.record``), the record cut with each judge's own tokenizer so the
whole request holds at most ``record_tokens`` tokens, most recent part kept (HELM's truncation).
Without a record (a pair built elsewhere) the record is left empty. The rubric version says
``+record`` so scores judged this way are told apart from earlier ones, which saw the
instruction only; ``record_tokens`` is in the metric's identity. Then the response and the first
reference answer, as HELM. Verdicts are parsed as HELM does: the
outermost ``{...}`` of the answer, one closing brace added when it was cut off.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from review.linear import Pattern
from scoring.llm.backends import GenerationError, GenerationParams, backend_from_spec
from scoring.llm.prompts import PromptTemplate, build_prompt
from scoring.llm.record_text import RecordText
from scoring.weights import library_versions

from .base import MetricBackend, MetricUnavailable, Pair, Scored

__all__ = ["CRITERIA", "RUBRICS", "JuryBackend", "parse_verdict"]

RUBRIC_HELM = """You are a medical expert responsible for evaluating the quality of a
response to a clinical instruction, given an associated Electronic Health Record (EHR).

Your goal is to assess how well the response interprets the EHR, follows clinical best practices,
and aligns with the gold response in terms of accuracy, completeness, and clarity.

The instruction and EHR pair will be provided in these tags:
<user_request>
{{QUESTION}}
</user_request>

The response will be provided in these tags:
<response>
{{RESPONSE}}
</response>

The gold response (reference answer) will be provided in these tags:
<gold_response>
{{GOLD_RESPONSE}}
</gold_response>

Carefully review the <response> based on the <user_request> and compare it to
the <gold_response> when needed.
For each category below, rate the response on a scale of 1 to 5 (1 = very poor, 5 = excellent)
and provide a brief explanation for your score:

Evaluation Criteria:
Accuracy (1-5)
- Does the response provide correct medical information based on the EHR and clinical guidelines?

Completeness (1-5)
- Does the response include all important patient information and address the clinical question?

Clarity (1-5)
- Is the response written clearly so clinicians can easily understand it?

Output Format:
Generate a valid JSON object with your evaluation:
{
    "accuracy": {
        "score": 0,
        "explanation": "Explain why this score was given."
    },
    "completeness": {
        "score": 0,
        "explanation": "Explain why this score was given."
    },
    "clarity": {
        "score": 0,
        "explanation": "Explain why this score was given."
    }
}

Ensure the output is valid JSON:
- Use **double quotes** (") for all keys and string values.
- When quoting text or sections inside the explanations, use escaped double quotes (\\") to
  maintain valid JSON formatting.
- Do not include any additional information in the output.
"""

# How {{QUESTION}} is filled, part of the rubric version: "+record" = HELM's generation prompt
# with the record (before: the instruction alone, versions without a suffix).
QUESTION_FILL = "record"
CRITERIA = ("accuracy", "completeness", "clarity")
# name -> template; the version recorded is "<name>@<sha256[:12]>" of the template text.
RUBRICS: dict[str, str] = {"helm-medalign": RUBRIC_HELM}
_SLOT = re.compile(r"\{\{(QUESTION|RESPONSE|GOLD_RESPONSE)\}\}")
# A judge's answer is model output: RE2, linear in it (``re`` is quadratic in a run of "{").
_OUTERMOST = Pattern(r"(?s)\{.*\}")


def rubric_version(name: str) -> str:
    return f"{name}@{hashlib.sha256(RUBRICS[name].encode()).hexdigest()[:12]}+{QUESTION_FILL}"


def fill_rubric(name: str, *, question: str, response: str, gold: str) -> str:
    values = {"QUESTION": question, "RESPONSE": response, "GOLD_RESPONSE": gold}
    return _SLOT.sub(lambda m: values[m.group(1)], RUBRICS[name])


def parse_verdict(text: str) -> dict[str, float] | None:
    """``{criterion: score}`` from a judge's answer, or None when it is not a usable verdict.

    As HELM: the outermost ``{...}`` is parsed as JSON (one ``}`` appended when the object was
    cut off); every criterion needs a ``score``. Scores must be whole numbers from 1 to 5.
    """
    match = _OUTERMOST.search(text)
    candidate = match.group(0) if match else text
    # Beside malformed JSON, a judge can write what json.loads refuses with other errors: a
    # number past int's digit limit (ValueError) or nesting past the recursion limit.
    try:
        data = json.loads(candidate)
    except json.JSONDecodeError as exc:
        if exc.msg != "Expecting ',' delimiter":
            return None
        try:
            data = json.loads(candidate + "}")
        except (ValueError, RecursionError):
            return None
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    out: dict[str, float] = {}
    for criterion in CRITERIA:
        entry = data.get(criterion)
        score = entry.get("score") if isinstance(entry, dict) else None
        if isinstance(score, str) and score.strip().isdigit():
            score = int(score.strip())
        if isinstance(score, float) and score.is_integer():
            score = int(score)
        if not isinstance(score, int) or isinstance(score, bool) or not 1 <= score <= 5:
            return None
        out[criterion] = float(score)
    return out


class JuryBackend(MetricBackend):
    """One or more judges (generation backend specs) scoring with a rubric; the jury is the mean."""

    name: ClassVar[str] = "jury"
    primary: ClassVar[str] = "jury"
    kind: ClassVar[str] = "model"
    reads_record: ClassVar[bool] = True
    option_defaults: ClassVar[dict[str, Any]] = {
        "judges": [],  # generation backend specs (scoring.llm.backends.backend_from_spec)
        "rubric": "helm-medalign",
        # Tokens (each judge's tokenizer) of the user request: HELM's prompt with the record cut
        # to fit. The judge's own context must hold it, the rubric, response, reference and
        # max_new_tokens.
        "record_tokens": 4096,
        "max_new_tokens": 512,
        "seed": 0,
    }

    def _validate(self, options: dict[str, Any]) -> dict[str, Any]:
        judges = options["judges"]
        if not isinstance(judges, list) or not all(isinstance(j, dict) for j in judges):
            raise ValueError("jury option 'judges' must be a list of backend specs")
        if options["rubric"] not in RUBRICS:
            raise ValueError(f"unknown rubric {options['rubric']!r}; valid: {', '.join(RUBRICS)}")
        options["max_new_tokens"] = int(options["max_new_tokens"])
        options["record_tokens"] = int(options["record_tokens"])
        if options["record_tokens"] < 1:
            raise ValueError("jury option 'record_tokens' must be at least 1")
        options["seed"] = int(options["seed"])
        return options

    def _judges(self) -> list[Any]:
        if not self.options["judges"]:
            raise MetricUnavailable(
                "no judges configured: set JURY_JUDGES (a JSON list of model specs, "
                "endpoints on the admin's allowlist)"
            )
        try:
            return [backend_from_spec(spec) for spec in self.options["judges"]]
        except GenerationError as exc:
            raise MetricUnavailable(str(exc)) from None

    def check_available(self) -> None:
        self._judges()

    def identity(self) -> dict[str, Any]:
        judges = []
        for judge in self._judges():
            judges.append(judge.identity())
        return {
            "backend": self.name,
            "rubric": rubric_version(self.options["rubric"]),
            "judges": judges,
            "options": {
                "max_new_tokens": self.options["max_new_tokens"],
                "record_tokens": self.options["record_tokens"],
                "seed": self.options["seed"],
                "temperature": 0.0,
            },
            "versions": library_versions("torch", "transformers"),
        }

    def provenance(self) -> dict[str, Any]:
        ident = self.identity()
        return {
            "metric": self.name,
            "rubric": ident["rubric"],
            "judges": [
                {
                    k: v
                    for k, v in j.items()
                    if k in ("backend", "model", "endpoint", "weights_sha256")
                }
                for j in ident["judges"]
            ],
            "model": ", ".join(str(j.get("model")) for j in ident["judges"]),
            "aggregation": "mean over judges and criteria (HELM LLMJuryMetric)",
            "library_versions": ident["versions"],
        }

    def score(self, pairs: Sequence[Pair]) -> list[dict[str, float]]:
        return [s.values for s in self.score_detailed(pairs)]

    def score_detailed(self, pairs: Sequence[Pair]) -> list[Scored]:

        pairs = self._check_pairs(pairs)
        if not pairs:
            return []  # as every backend: nothing to score loads nothing
        judges = self._judges()
        params = GenerationParams(
            max_new_tokens=self.options["max_new_tokens"],
            temperature=0.0,
            seed=self.options["seed"],
        )
        out = []
        for pair in pairs:
            values: dict[str, float] = {"judges_total": float(len(judges))}
            scores: list[float] = []
            parsed = 0
            if pair.hypothesis.strip():  # HELM skips empty responses
                for i, judge in enumerate(judges, start=1):
                    prompt = fill_rubric(
                        self.options["rubric"],
                        question=self._user_request(pair, judge),
                        response=pair.hypothesis,
                        gold=pair.reference,
                    )
                    # A judge that cannot answer (endpoint down after its retries) fails the batch,
                    # to be resumed: a score is never recomputed, so it must not be stored with a
                    # judge missing for a reason that passes. An answer that does not parse is a
                    # verdict, and counts as missing (HELM drops it the same way).
                    verdict = parse_verdict(judge.generate(prompt, params).text)
                    if verdict is None:
                        continue
                    parsed += 1
                    for criterion, value in verdict.items():
                        values[f"judge{i}_{criterion}"] = value
                    values[f"judge{i}"] = sum(verdict.values()) / len(verdict)
                    scores.extend(verdict.values())
            values["judges_parsed"] = float(parsed)
            values["jury"] = sum(scores) / len(scores) if scores else 0.0
            out.append(Scored(values))
        return out

    def _user_request(self, pair: Pair, judge: Any) -> str:
        """HELM's {{QUESTION}}: its generation prompt, the record cut to ``record_tokens``."""
        return build_prompt(
            record=pair.record if pair.record is not None else RecordText("", ()),
            question=pair.source,
            template=PromptTemplate(),
            tokenizer=judge.tokenizer(),
            context_length=self.options["record_tokens"],
            max_new_tokens=0,
            policy="recent",
        ).prompt


def judge_keys(values: dict[str, Any]) -> list[str]:
    """The per-judge keys (``judge1``, ``judge2``…) of a stored jury score's values."""
    return sorted(
        (k for k in values if re.fullmatch(r"judge\d+", k)), key=lambda k: int(k[len("judge") :])
    )
