"""Hostile responses for masking: what the tests mask and ``bench_masking`` times.

Each entry is text a model (or an attacker writing as one) could return: long runs of digits
and separators after a family word (what made the old grammar backtrack for minutes), 100 kB
responses, every version form, dense self-references, and characters that are valid in a
Python string but not elsewhere (NUL, lone surrogates, combining marks, zero-width spaces).
Synthetic: no record text.
"""

from __future__ import annotations

from dataclasses import dataclass

# The response sets the corpus is masked against. Models named with hub ids, a generated
# "<model>@<context>" and ordinary words ("Atlas", "Cedar", "Aloe"):
MODELS = (
    "m42-health/Llama3-Med42-70B",
    "Atlas-13B",
    "Cedar-7B",
    "Llama3-Aloe-8B",
    "mixtral-8x7b",
    "SecretModel-Alpha-70B",
    "medlm@2048",
)
# Models named as MedAlign's were, after the family the corpus is densest in ("GPT"): each name
# adds its own versions to the patterns every "GPT" in a response is tried against.
GPT_MODELS = (
    "gpt-4",
    "gpt-4-32k@32768",
    "GPT-4o",
    "gpt-3.5-turbo",
    "vicuna-13b-v1.5",
    "MPT-7B-Instruct@2048",
)
# (label, model names): ``bench_masking`` times the corpus against each; the worst of all counts.
DATASETS = (("word-named", MODELS), ("gpt-named", GPT_MODELS))

KB = 1024
CLINICAL = (
    "The patient was seen in clinic for follow-up of type 2 diabetes; HbA1c 7.2% on 2021-03-04, "
    "creatinine 1.1 mg/dL, ALT (GPT) 45 U/L. Aloe vera gel was applied to the burn; the atlas "
    "(C1) was intact. Continue metformin 500 mg twice daily and repeat labs in 3 months.\n\n"
)

# Every way a version follows a family word (``review.blinding``'s numeric, tagged, tier parts).
VERSION_FORMS = (
    "GPT-4",
    "GPT 4",
    "GPT4",
    "GPT - 4",
    "G P T - 4",
    "GPT-3.5-turbo",
    "gpt-3.5-turbo-0613",
    "GPT-4o",
    "gpt4o-mini",
    "Llama-2-70b-chat-hf",
    "Llama 3.1 405B Instruct",
    "Mixtral 8x7B",
    "mixtral-8x22b-instruct-v0.1",
    "Mistral-7B-Instruct-v0.2",
    "Gemini 1.5 Pro",
    "Gemini-Ultra",
    "Claude 3 Opus",
    "Claude-instant-1.2",
    "claude-3-5-sonnet-latest",
    "Phi-3-mini-4k-instruct",
    "Qwen2-72B-Instruct",
    "Gemma-2-9b-it",
    "Falcon-40B",
    "Yi-34B-Chat",
    "MPT-7B-Instruct",
    "deepseek-coder-33b-instruct",
    "DeepSeek R1",
    "Command R+",
    "Dolly-v2-12b",
    "Vicuna-13B-v1.5",
    "Meditron-70B",
    "Med42-70B",
    "Atlas-13B",
    "SecretModel Alpha v2",
)


@dataclass(frozen=True)
class Case:
    name: str
    text: str


def _fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def corpus() -> list[Case]:
    """The adversarial responses, from a few bytes to 100 kB."""
    cases = [
        Case("gpt, 17 digits, 3 letters (took 10 s)", "gpt" + "1" * 17 + "abc"),
        Case("gpt, 40 digits, 3 letters", "As gpt" + "7" * 40 + "xyz, I would"),
        Case("100 kB of digits after gpt", "gpt" + "1" * (100 * KB) + "abc"),
        Case("100 kB of digits after Llama", "Llama" + "2" * (100 * KB) + "b"),
        Case("100 kB of hyphens after GPT", "GPT" + "-" * (100 * KB) + "4"),
        Case("100 kB of ' - ' after GPT", "GPT" + _fill(" - ", 100 * KB) + "4"),
        Case("100 kB of separators after GPT", "GPT" + _fill(".-_ ", 100 * KB) + "4x"),
        Case("100 kB of '-4' after GPT", "GPT" + _fill("-4", 100 * KB)),
        Case("100 kB of '4.' after GPT", "GPT" + _fill("4.", 100 * KB) + "mg"),
        Case("100 kB of ' 2' after Llama", "Llama" + _fill(" 2", 100 * KB)),
        Case("100 kB of ' pro' after Gemini", "Gemini" + _fill(" pro", 100 * KB)),
        Case("100 kB of spaces in 'I am  Claude'", "I am" + " " * (100 * KB) + "Claude."),
        Case("100 kB of clinical text", _fill(CLINICAL, 100 * KB)),
        Case("100 kB of clinical text, a name at the end", _fill(CLINICAL, 100 * KB) + "GPT-4"),
        Case("100 kB of one letter", "a" * (100 * KB)),
        Case("100 kB of line breaks", "\n" * (100 * KB)),
        Case("100 kB of NUL", "\x00" * (100 * KB)),
        Case("100 kB of lone surrogates", _fill("\ud800G\udfffP", 100 * KB)),
        Case(
            "100 kB of zero-width spaces in GPT", _fill("G\u200bP\u200bT\u200b-\u200b4 ", 100 * KB)
        ),
        Case(
            "100 kB of combining marks",
            _fill("C\u0336l\u0336a\u0336u\u0336d\u0336e\u0336 ", 100 * KB),
        ),
        Case("100 kB of Cyrillic", _fill("Пациент осмотрен в клинике. ", 100 * KB)),
        Case("100 kB of Cyrillic look-alikes", _fill("\u0421h\u0430tGPT ", 100 * KB)),
        Case("100 kB of every version form", _fill(" ".join(VERSION_FORMS) + ". ", 100 * KB)),
    ]
    dense = (
        ("GPT-4 ", "10 kB of 'GPT-4'"),
        ("I am Claude. ", "10 kB of 'I am Claude.'"),
        ("As Atlas, I ", "10 kB of 'As Atlas, I'"),
        ("Regards,\nCedar\n", "10 kB of sign-offs"),
        ("trained by Google ", "10 kB of 'trained by Google'"),
        ("Gemini, an AI model ", "10 kB of 'Gemini, an AI model'"),
        ("Gemini and ", "10 kB of 'Gemini and'"),
        ("gemini ", "10 kB of 'gemini'"),
        ("GPT 45 U/L ", "10 kB of 'GPT 45 U/L'"),
        ("GPT-4\x00\ud800 ", "10 kB of names, NUL, surrogates"),
        ("\u201cGPT\u20114\u201d \u2014 ", "10 kB of names in curly quotes"),
    )
    cases.extend(Case(label, _fill(unit, 10 * KB)) for unit, label in dense)
    cases.extend(
        Case(f"version form {form!r}", f"As {form}, I would hold the statin.")
        for form in VERSION_FORMS
    )
    return cases
