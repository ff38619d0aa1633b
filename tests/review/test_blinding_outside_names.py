"""Names outside the response set: a fine-tuned model often names its base model or another
model ("I'm Med42", "As MedGemma, I"), and a dataset's own names come in headers and
attributions ("Model: Atlas", "Response from Atlas:", "[Beacon] The answer"). Every one is
masked for the clinician; an ordinary word introduced as a name ("I am Sorry.") is left as
written and listed as a near miss for an admin to confirm."""

import pytest

from review.blinding import MASK, mask_model_names, names_a_model, near_misses

# The demo's models (review.demo.synthetic.MODELS).
DEMO = ("Atlas-70B", "Beacon-13B", "Cedar-7B", "Dune-32k", "Dune-2k", "Fjord-Instruct")

# (sentence, words that must be gone after masking)
OUTSIDE = [
    ("I'm Med42 (Med42-70B).", ["Med42"]),
    ("I'm Med42, a clinical assistant.", ["Med42"]),
    ("As Med42, I recommend a repeat echo.", ["Med42"]),
    ("I am MedGemma.", ["MedGemma"]),
    ("As MedGemma, I would hold the statin.", ["MedGemma"]),
    ("I'm Palmyra-Med.", ["Palmyra"]),
    ("I am Asclepius.", ["Asclepius"]),
    ("I'm Meerkat-7B.", ["Meerkat"]),
    ("I am AMIE.", ["AMIE"]),
    ("I am BioMedLM.", ["BioMedLM"]),
    ("I'm HuatuoGPT.", ["Huatuo"]),
    ("I'm DoctorGLM.", ["DoctorGLM"]),
    ("I'm GLM-4.", ["GLM"]),
    ("I'm o1.", ["o1"]),
    ("I'm o3-mini.", ["o3"]),
    ("I'm Sonnet.", ["Sonnet"]),
    ("I'm Kimi.", ["Kimi"]),
    ("I'm WizardLM.", ["WizardLM"]),
    ("I'm Tulu 3.", ["Tulu"]),
    ("I'm Nous Hermes.", ["Nous", "Hermes"]),
    ("I'm Med-Gemini.", ["Med-Gemini"]),
    ("MedGemma-27B recommends a CT.", ["MedGemma"]),
    ("o3-mini suggests an MRI.", ["o3-mini"]),
    ("Anthropic's Sonnet suggests rest.", ["Sonnet"]),
    ("WizardLM-13B answered.", ["WizardLM"]),
    ("Meditron-7B and BioMistral agree.", ["Meditron", "BioMistral"]),
    # The generic self-introduction: a name no word list knows.
    ("I'm Zorblax.", ["Zorblax"]),
    ("I am Quillon-9B, a clinical assistant.", ["Quillon"]),
    ("As Vantrix, I would order a CT.", ["Vantrix"]),
    ("This is Xenodoc.", ["Xenodoc"]),
    ("Hold the statin.\nRegards, Parvix.", ["Parvix"]),
    ("Hold the statin.\n-- Parvix-2", ["Parvix"]),
]

# The demo's own names in headers, attributions and spellings.
ATTRIBUTED = [
    ("Model: Atlas", ["Atlas"]),
    ("Fjord Instruct answer: rest.", ["Fjord"]),
    ("Claude here.", ["Claude"]),
    ("Response from Atlas: rest.", ["Atlas"]),
    ("The Atlas model says rest.", ["Atlas"]),
    ("Atlas (AI) suggests rest.", ["Atlas"]),
    ("A t l a s suggests rest.", ["A t l a s"]),
    ("Model: Cedar", ["Cedar"]),
    ("Model name: Beacon", ["Beacon"]),
    ("model=Fjord", ["Fjord"]),
    ("Beacon-13 suggests rest.", ["Beacon"]),
    ("Atlas 70 B suggests rest.", ["Atlas"]),
    ("FjordInstruct suggests rest.", ["FjordInstruct"]),
    ("[Beacon] The answer is rest.", ["Beacon"]),
    ("Gemini here, with a plan.", ["Gemini"]),
    ("Mistral here", ["Mistral"]),
    ("AI assistant Atlas says rest.", ["Atlas"]),
]

# Words the new families share with English and clinic, used innocently: left as written.
INNOCENT = [
    "She read a Shakespeare sonnet to the nurses.",
    "Sonnet writing is her hobby; mood is improved.",
    "Hermes scarf found on the ward.",
    "The falcon chest deformity was noted at birth.",
    "Phi angle 30 degrees.",
    "O2 sats 94% on room air; O2 at 2 L.",
    "SpO2 was 91%, improved on O2.",
    "The haiku she wrote was read at discharge.",
    "Opus dei; she is a member.",
    "A starling flew into the window; no injury.",
    "Zephyr breeze exposure.",
    "The atlas (C1) is intact.",
    "A dune buggy accident two years ago.",
    "Beacon lights were flashing at the crash scene.",
    "The response from baseline was modest.",
    "Model of care: shared. The cedar pollen count is high.",
    "I'm not sure the GLM fits; the generalized linear model was refitted.",
    "I am concerned about the creatinine.",
    "I'm 65 and I walk daily.",
    "As expected, I repeated the TSH.",
    "This is a 64-year-old man with COPD.",
    "Hermes (the courier) delivered the medication.",
]


@pytest.mark.parametrize(("sentence", "gone"), OUTSIDE, ids=[s for s, _ in OUTSIDE])
def test_a_model_outside_the_set_naming_itself_is_masked(sentence, gone):
    masked = mask_model_names(sentence, DEMO)
    assert MASK in masked
    for word in gone:
        assert word.lower() not in masked.lower(), masked
    assert names_a_model(sentence, DEMO)


@pytest.mark.parametrize(("sentence", "gone"), ATTRIBUTED, ids=[s for s, _ in ATTRIBUTED])
def test_the_sets_own_names_in_headers_and_attributions_are_masked(sentence, gone):
    masked = mask_model_names(sentence, DEMO)
    assert MASK in masked
    for word in gone:
        assert word.lower() not in masked.lower(), masked


@pytest.mark.parametrize("sentence", INNOCENT)
def test_innocent_uses_of_the_new_families_stay_untouched(sentence):
    assert mask_model_names(sentence, DEMO) == sentence


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("I am Sorry.", "Sorry"),
        ("As Needed, I would titrate.", "Needed"),
        ("This is Important.", "Important"),
        ("Thanks,\nSmith", "Smith"),
    ],
)
def test_an_ordinary_word_introduced_as_a_name_is_a_near_miss(text, word):
    assert mask_model_names(text, DEMO) == text
    assert word in near_misses(text, DEMO)


def test_a_masked_self_introduction_is_no_near_miss():
    assert near_misses("I'm Zorblax. As MedGemma, I agree.", DEMO) == []
