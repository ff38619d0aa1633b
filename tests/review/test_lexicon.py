"""What masking takes for an ordinary or clinical word (``review.lexicon``), read offline."""

import pytest

from review import blinding, lexicon
from review.blinding import MASK, mask_model_names

needs_wordnet = pytest.mark.skipif(not lexicon.wordnet_found(), reason="WordNet not installed")


@needs_wordnet
@pytest.mark.parametrize("word", ["atlas", "cedar", "cedars", "aloe", "aloes", "alpha", "baseline"])
def test_english_words_are_ordinary(word):
    assert lexicon.is_ordinary(word)


@pytest.mark.parametrize("word", ["the", "this", "with", "from", "alt", "med", "copd"])
def test_function_words_and_clinical_abbreviations_are_ordinary(word):
    assert lexicon.is_ordinary(word)


@needs_wordnet
@pytest.mark.parametrize("word", ["meditron", "secretmodel", "medlm", "mixtral", "qwen"])
def test_model_names_are_not_words(word):
    assert not lexicon.is_ordinary(word)


@pytest.fixture
def no_wordnet(settings, tmp_path):
    def forget():
        lexicon._wordnet_lemmas.cache_clear()
        lexicon.is_ordinary.cache_clear()
        blinding._matcher.cache_clear()
        blinding._mask.cache_clear()

    settings.METEOR_WORDNET_DIR = str(tmp_path / "no-wordnet")
    forget()
    yield
    forget()


def test_without_wordnet_every_alphabetic_word_may_be_english(no_wordnet):
    assert not lexicon.wordnet_found()
    assert lexicon.is_ordinary("meditron")
    assert not lexicon.is_ordinary("med42x")


def test_without_wordnet_a_names_words_stay_self_reference_targets(no_wordnet):
    models = ("medlm@2048", "Atlas-13B", "m42-health/Llama3-Med42-70B")
    assert mask_model_names("I am MedLM.", models) == f"I am {MASK}."
    assert mask_model_names("As Atlas, I agree.", models) == f"As {MASK}, I agree."
    assert mask_model_names("Med42 agrees.", models) == f"{MASK} agrees."
    assert mask_model_names("The atlas is intact.", models) == "The atlas is intact."
