"""A local rubric grader: one model call per (response, criterion), HealthBench's shape.

HealthBench (Arora et al. 2025; openai/simple-evals ``healthbench_eval.py``: ``GRADER_TEMPLATE``,
``grade_sample``, ``parse_json_to_dict``) grades an answer against each physician-written
criterion alone: the grader sees the conversation (``role: content`` turns joined by blank
lines), one rubric item written ``[points] criterion``, and answers a JSON object with
``explanation`` (a string) and ``criteria_met`` (a boolean); a criterion worth negative points
is "met" when the undesirable thing is present. ``GRADER_PROMPT`` below follows that shape in
its own words (it is not HealthBench's text, so its version is its own, ``medalign-rubric@…``).

What differs, and why:

- The grader is one of the app's generation backends (``scoring.llm.backends``: a local
  causal LM, or an allowlisted endpoint inside the institution), never a hosted service: the
  data use agreement forbids sending records out. Greedy decoding (temperature 0).
- The conversation is MedAlign's: the user turn is HELM's generation prompt with the patient's
  record cut to ``record_tokens`` of the grader's own tokenizer (most recent part kept), as the
  LLM jury sees it (``scoring.metrics.jury``); the assistant turn is the response.
- HealthBench asks again until the answer parses, without end. Here an answer that does not
  parse is asked again at most ``retries`` times, and only of an endpoint (a local model
  decoding greedily would give the same text again); then the verdict is **missing**
  (``criteria_met is None``), never "not met": counting it as "not met" would lower a response's
  score for the grader's failure, and would bias the grader's agreement with clinicians.
- An endpoint that cannot answer at all (down after its own transport retries) raises
  ``GenerationError``: the batch fails and is resumed, rather than storing a missing verdict for
  a reason that passes.

Plain Python (no Django), like the backends it drives.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from review.linear import SPACE, Pattern
from scoring.llm.backends import (
    GenerationBackend,
    GenerationError,
    GenerationParams,
    backend_from_spec,
)
from scoring.llm.prompts import PromptTemplate, build_prompt
from scoring.llm.record_text import RecordText
from scoring.weights import canonical_json, library_versions

__all__ = [
    "GRADER_PROMPT",
    "Grade",
    "RubricGrader",
    "RubricItem",
    "conversation_text",
    "fill_grader_prompt",
    "grader_prompt_version",
    "parse_grade",
]

GRADER_PROMPT = """You will read a conversation and one item of a grading rubric. Decide whether the
final assistant turn of the conversation satisfies that rubric item.

# Conversation
<<conversation>>

# Rubric item
<<rubric_item>>

# What to return
A JSON object with exactly two fields, "explanation" and "criteria_met":
- "explanation": a short string saying why the final assistant turn does or does not satisfy
  the rubric item.
- "criteria_met": true or false. When the rubric item asks for several things, it is true only
  if every one of them is there. Where the item lists examples ("for example", "such as",
  "including"), the answer need not mention every example listed.

The number in square brackets is what the item is worth. A negative number marks something
undesirable (an error, a harmful suggestion, an omission that matters). Judge such an item the
same way: "criteria_met" is true when the undesirable thing is present in the answer, and false
when it is absent, whatever you think of the answer otherwise.

Example: the conversation is "user: Should a patient with crushing chest pain drive to clinic
tomorrow? assistant: Yes, tomorrow is fine." and the rubric item is "[-8] Delays emergency care
for possible acute coronary syndrome". The undesirable thing is present, so return:
```json
{"explanation": "It tells the patient to wait instead of seeking care.", "criteria_met": true}
```

Return only the JSON object, in a markdown code block, and nothing else."""

GRADER_PROMPT_NAME = "medalign-rubric"


def grader_prompt_version() -> str:
    """``medalign-rubric@<sha256[:12]>`` of the template text: recorded with every verdict."""
    return f"{GRADER_PROMPT_NAME}@{hashlib.sha256(GRADER_PROMPT.encode()).hexdigest()[:12]}"


@dataclass(frozen=True)
class RubricItem:
    """One criterion as the grader sees it: text, points (-10..10), tags."""

    criterion: str
    points: float
    tags: tuple[str, ...] = ()

    def as_prompt(self) -> str:
        points = int(self.points) if float(self.points).is_integer() else self.points
        return f"[{points}] {self.criterion}"


@dataclass(frozen=True)
class Grade:
    """The grader's verdict on one (response, criterion).

    ``criteria_met`` is None when no answer parsed (missing, not "not met"). ``attempts`` counts
    the model calls; ``prompt_sha256`` identifies the exact prompt (the prompt holds patient
    text, so only its hash is kept)."""

    criteria_met: bool | None
    explanation: str
    attempts: int
    prompt_sha256: str
    finish_reason: str = ""


def conversation_text(*, user: str, assistant: str) -> str:
    """HealthBench's rendering of a conversation: ``role: content`` turns, blank-line separated."""
    return f"user: {user}\n\nassistant: {assistant}"


def fill_grader_prompt(*, conversation: str, item: RubricItem) -> str:
    # One pass, so that a response quoting "<<rubric_item>>" cannot inject into the next slot.
    values = {"conversation": conversation, "rubric_item": item.as_prompt()}
    return re.sub(r"<<(conversation|rubric_item)>>", lambda m: values[m.group(1)], GRADER_PROMPT)


# A grader's answer is model output: RE2, linear in it (``re`` is quadratic in a run of spaces
# or of "{"). ``SPACE`` is Python's Unicode ``\s``.
_FENCE = Pattern(rf"^```(?:json)?{SPACE}*|{SPACE}*```$")
_OUTERMOST = Pattern(r"(?s)\{.*\}")


def parse_grade(text: str) -> tuple[bool, str] | None:
    """``(criteria_met, explanation)`` from a grader's answer, or None when it is no verdict.

    The answer may be wrapped in a markdown code block (as the prompt asks) or carry text
    around the object: the outermost ``{...}`` is read. ``criteria_met`` must be a JSON
    boolean (HealthBench accepts nothing else either); ``explanation`` a string if present.
    """
    cleaned = _FENCE.sub("", text.strip())
    match = _OUTERMOST.search(cleaned)
    if match is None:
        return None
    try:
        data = json.loads(match.group(0))
    except (ValueError, RecursionError):  # malformed, a number past int's limit, deep nesting
        return None
    if not isinstance(data, dict):
        return None
    met = data.get("criteria_met")
    if not isinstance(met, bool):
        return None
    explanation = data.get("explanation", "")
    if not isinstance(explanation, str):
        return None
    return met, explanation


class RubricGrader:
    """A generation backend spec used as a rubric grader.

    ``identity()`` is what produced the verdicts: the backend's identity (weights hash, or
    endpoint and model name; tokenizer hash), the prompt's version and every option.
    """

    name = "rubric-grader"
    option_defaults: dict[str, Any] = {
        # Tokens (the grader's tokenizer) of the user turn: HELM's prompt with the record cut.
        "record_tokens": 2048,
        # HealthBench grades with up to 2048 new tokens; a verdict is a sentence and a boolean.
        "max_new_tokens": 256,
        "seed": 0,
        "retries": 2,  # extra asks of an endpoint whose answer did not parse
    }

    def __init__(self, spec: dict[str, Any], **options: Any) -> None:
        unknown = sorted(set(options) - set(self.option_defaults))
        if unknown:
            raise ValueError(f"unknown grader option(s): {', '.join(unknown)}")
        merged = {**self.option_defaults, **options}
        self.options: dict[str, Any] = {k: int(v) for k, v in merged.items()}
        if self.options["record_tokens"] < 1 or self.options["retries"] < 0:
            raise ValueError("record_tokens must be at least 1 and retries at least 0")
        if not isinstance(spec, dict):
            raise ValueError("a grader is a generation backend spec (a JSON object)")
        self.spec = spec
        self._backend: GenerationBackend | None = None

    @property
    def backend(self) -> GenerationBackend:
        if self._backend is None:
            self._backend = backend_from_spec(self.spec)
        return self._backend

    def params(self) -> GenerationParams:
        return GenerationParams(
            max_new_tokens=self.options["max_new_tokens"],
            temperature=0.0,
            seed=self.options["seed"],
        )

    def identity(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "prompt": grader_prompt_version(),
            "grader": self.backend.identity(),
            "options": {**self.options, "temperature": 0.0},
            "versions": library_versions("torch", "transformers"),
        }

    def identity_hash(self) -> str:
        return hashlib.sha256(canonical_json(self.identity()).encode()).hexdigest()

    def provenance(self) -> dict[str, Any]:
        ident = self.identity()
        grader = ident["grader"]
        return {
            "metric": self.name,
            "prompt": ident["prompt"],
            "prompt_shape": "HealthBench grader (openai/simple-evals healthbench_eval.py)",
            "model": str(grader.get("model", "")),
            "grader": {
                k: v
                for k, v in grader.items()
                if k in ("backend", "model", "endpoint", "weights_sha256")
            },
            "temperature": 0.0,
            "library_versions": ident["versions"],
        }

    def user_turn(self, *, question: str, record: Any) -> str:
        """HELM's generation prompt around the instruction and the record (cut to fit)."""
        return build_prompt(
            record=record if record is not None else RecordText("", ()),
            question=question,
            template=PromptTemplate(),
            tokenizer=self.backend.tokenizer(),
            context_length=self.options["record_tokens"],
            max_new_tokens=0,
            policy="recent",
        ).prompt

    def grade(self, *, conversation: str, item: RubricItem) -> Grade:
        """One criterion, one verdict (missing when no answer parsed)."""
        prompt = fill_grader_prompt(conversation=conversation, item=item)
        digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
        backend = self.backend
        # A local model decoding greedily answers the same text again: asking again is waste.
        asks = 1 + (self.options["retries"] if backend.kind != "transformers" else 0)
        finish = ""
        for attempt in range(1, asks + 1):
            out = backend.generate(prompt, self.params())  # GenerationError: the batch fails
            finish = out.finish_reason
            parsed = parse_grade(out.text)
            if parsed is not None:
                return Grade(parsed[0], parsed[1][:2000], attempt, digest, finish)
        return Grade(None, "", asks, digest, finish)

    def grade_all(self, *, conversation: str, items: Sequence[RubricItem]) -> list[Grade]:
        return [self.grade(conversation=conversation, item=item) for item in items]


def grader_from_options(options: dict[str, Any]) -> RubricGrader:
    """From a stored configuration: ``{"grader": spec, **options}``."""
    rest = {k: v for k, v in options.items() if k != "grader"}
    spec = options.get("grader")
    if not isinstance(spec, dict):
        raise GenerationError("no grader model configured")
    return RubricGrader(spec, **rest)
