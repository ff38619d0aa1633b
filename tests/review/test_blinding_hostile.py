"""Masking on hostile responses: it finishes, masks what names a model and leaves the rest.

The old grammar backtracked: "gpt", 17 digits and 3 letters took 10 s, each more digit twice as
long, so these inputs never returned. Masking now reads text with RE2 only, in linear time; the
figures are ``manage.py bench_masking``'s (timed there, never here).
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from review.blinding import MASK, mask_model_names, model_name_spans, names_a_model
from tests.bench.masking_corpus import CLINICAL, DATASETS, KB, MODELS, VERSION_FORMS, corpus


def _rebuilt(text: str, spans: list[tuple[int, int]]) -> str:
    out, last = [], 0
    for start, end in spans:
        out.append(text[last:start])
        out.append(MASK)
        last = end
    return "".join(out) + text[last:]


@pytest.mark.parametrize("models", [m for _, m in DATASETS], ids=[label for label, _ in DATASETS])
@pytest.mark.parametrize("case", corpus(), ids=lambda c: c.name)
def test_every_hostile_response_masks_to_spans_of_the_text(case, models):
    spans = model_name_spans(case.text, models)
    assert all(0 <= s < e <= len(case.text) for s, e in spans)
    assert all(a[1] < b[0] or a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert mask_model_names(case.text, models) == _rebuilt(case.text, spans)


@pytest.mark.parametrize("models", [m for _, m in DATASETS], ids=[label for label, _ in DATASETS])
def test_clinical_text_and_a_lab_value_stay_beside_any_response_set(models):
    for text in (CLINICAL, "ALT (GPT) 45 U/L.", "GPT 45 U/L, SGPT 120 IU."):
        assert mask_model_names(text, models) == text
    assert mask_model_names("As GPT-4o, I agree.", models) == f"As {MASK}, I agree."


def test_the_response_that_hung_the_review_page_comes_back_as_written():
    for digits in (17, 20, 40, 400):
        text = f"As gpt{'1' * digits}abc, I would hold the statin."
        assert mask_model_names(text, MODELS) == text


def test_a_long_run_of_digits_after_a_family_word_is_no_version():
    text = "gpt" + "1" * (100 * KB) + "abc"
    assert not names_a_model(text, MODELS)


def test_a_100_kb_response_keeps_everything_but_the_name():
    text = (CLINICAL * (100 * KB // len(CLINICAL) + 1)) + "Signed, GPT-4."
    masked = mask_model_names(text, MODELS)
    assert masked == text[: -len("GPT-4.")] + MASK + "."


def test_nul_and_lone_surrogates_pass_through_and_the_name_goes():
    text = "\x00\ud800GPT-4\udfff said\x00 no\ud800."
    assert mask_model_names(text, MODELS) == f"\x00\ud800{MASK}\udfff said\x00 no\ud800."


def test_separator_runs_do_not_join_a_name_to_a_version_far_away():
    text = "GPT" + " - " * 5000 + "4"
    assert mask_model_names(text, MODELS) == text
    assert mask_model_names("I am" + " " * 50_000 + "Claude.", MODELS).endswith(f"{MASK}.")


@pytest.mark.parametrize("form", VERSION_FORMS)
def test_every_version_form_is_masked_whole(form):
    masked = mask_model_names(f"As {form}, I would hold the statin.", MODELS)
    assert masked == f"As {MASK}, I would hold the statin."


def test_dense_self_references_are_each_masked():
    text = "I am Claude. " * 800
    assert mask_model_names(text, MODELS) == f"I am {MASK}. " * 800


_HOSTILE = st.text(
    alphabet=st.sampled_from(
        list("gptGPT-4 .x_7bBclaudeAtlsI'm,\n")
        + ["\x00", "\ud800", "\u200b", "\u0301", "\u2011", "\u0421", "\u0430", "\uff27", "\u00a0"]
    ),
    max_size=400,
)


@settings(max_examples=300, deadline=None)
@given(_HOSTILE)
def test_any_text_masks_to_disjoint_spans_of_itself(text):
    spans = model_name_spans(text, MODELS)
    assert spans == sorted(spans)
    assert all(0 <= s < e <= len(text) for s, e in spans)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert mask_model_names(text, MODELS) == _rebuilt(text, spans)
