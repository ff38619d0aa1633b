"""Masking holds in every written form a model names itself in, and leaves clinical text alone.

The tables are the contract of ``review.blinding``: every self-naming sentence loses the
name (and its version) whatever the dashes, spaces, width or case; every innocent clinical
sentence — "phi" the Greek letter, PHI the protected information, falcon and gemini the words,
GPT the old name of ALT, meta-analyses — reaches the clinician unchanged.
"""

import pytest

from review.blinding import MASK, mask_model_names, model_name_hits, names_a_model

# The response set's models, as a release or a generation run names them.
MODELS = ("mixtral-8x7b", "SecretModel-Alpha-70B", "medlm@2048", "baseline")

# (sentence, words that must be gone after masking)
SELF_NAMING = [
    ("As GPT 4, I would start metformin.", ["GPT 4"]),
    ("As GPT-4, I would start metformin.", ["GPT-4"]),
    ("GPT\u20114 recommends a repeat A1c.", ["GPT\u20114"]),  # non-breaking hyphen
    ("GPT\u20134 recommends a repeat A1c.", ["GPT\u20134"]),  # en dash
    (
        "\uff27\uff30\uff34\uff0d\uff14 recommends a repeat A1c.",
        ["\uff27\uff30\uff34"],
    ),  # full width
    ("I'm Mixtral 8x7B and I suggest a CT.", ["Mixtral", "8x7B"]),
    ("I\u2019m Mixtral-8x7B-Instruct.", ["Mixtral"]),
    ("As Med-PaLM 2, trained by Google, I note the ferritin.", ["PaLM", "Google"]),
    ("This model was built by Meta.", ["Meta"]),
    ("As SecretModel-Alpha\u2011v2, I would hold the statin.", ["SecretModel", "v2"]),
    ("As SecretModel Alpha 70B, I would hold the statin.", ["SecretModel", "70B"]),
    ("I am MedLM, a model for clinicians.", ["MedLM"]),
    ("As ChatGPT, I cannot give medical advice.", ["ChatGPT"]),
    ("As an AI developed by OpenAI, I cannot diagnose.", ["OpenAI"]),
    ("I am Claude, an AI assistant made by Anthropic.", ["Claude", "Anthropic"]),
    ("I'm Claude 3 Opus.", ["Claude", "Opus"]),
    ("Claude-instant suggests fluids.", ["Claude"]),
    ("I am Llama 2, a large language model.", ["Llama"]),
    ("Llama-2-70b-chat says the potassium is high.", ["Llama", "70b"]),
    ("llama3 thinks so.", ["llama3"]),
    ("I am Vicuna-13B.", ["Vicuna", "13B"]),
    ("As Gemini, I would order a lipid panel.", ["Gemini"]),
    ("Gemini 1.5 Pro summarised the notes.", ["Gemini", "Pro"]),
    ("I'm Gemma-2-9b-it.", ["Gemma"]),
    ("Mistral-7B-Instruct-v0.2 answered.", ["Mistral", "v0.2"]),
    ("I am a model from Mistral AI.", ["Mistral"]),
    ("Qwen2-72B-Instruct recommends an echo.", ["Qwen2", "72B"]),
    ("As Falcon-40B, I find no contraindication.", ["Falcon", "40B"]),
    ("Falcon 7B answered this question.", ["Falcon", "7B"]),
    ("I am Phi-3-mini, trained by Microsoft.", ["Phi", "Microsoft"]),
    ("As Phi, I would check the TSH.", ["Phi"]),
    ("DeepSeek-V3 suggests an MRI.", ["DeepSeek"]),
    ("I am DeepSeek R1.", ["DeepSeek"]),
    ("MPT-7B-Instruct says no.", ["MPT", "7B"]),
    ("This answer comes from Google DeepMind.", ["Google", "DeepMind"]),
    ("I was trained by Google.", ["Google"]),
    ("Meta AI recommends follow-up.", ["Meta"]),
    ("As a model trained at Meta, I note the LDL.", ["Meta"]),
    ("GPT-3.5-turbo answered first.", ["GPT", "3.5", "turbo"]),
    ("gpt4o suggests a referral.", ["gpt4o"]),
    ("As GPT\u00a04o, I would repeat the troponin.", ["GPT", "4o"]),  # no-break space
    ("G\u200bPT-4 says otherwise.", ["PT-4"]),  # zero-width space inside the name
    ("BioGPT lists three causes.", ["BioGPT"]),
    ("I am Orca 2.", ["Orca"]),
    ("Dolly-v2-12b generated this.", ["Dolly"]),
    ("I am Bard, a chatbot by Google.", ["Bard", "Google"]),
    ("Meditron-70B recommends aspirin.", ["Meditron"]),
    ("PMC-LLaMA notes the rash.", ["LLaMA"]),
    ("I\u2019m Command R+, a model by Cohere.", ["Command R", "Cohere"]),
    ("As Yi-34B, I see no issue.", ["Yi-34B"]),
]

INNOCENT = [
    "The phi angle of the knee was 30 degrees.",
    "As phi increases, the measured angle widens.",
    "PHI must not be shared outside the care team.",
    "Data covered by PHI rules stays on site.",
    "Gemini twins were delivered at 34 weeks.",
    "The patient keeps a pet falcon and reports no bites.",
    "The falcon chest deformity was noted at birth.",
    "A mistral wind exposure was mentioned by the patient.",
    "Erythema of the palm and sole was present.",
    "A 2 cm lesion on the palm 2 days after the injury.",
    "Palmar erythema and spider angiomas suggest cirrhosis.",
    "ALT (GPT) 45 U/L, AST 38 U/L.",
    "Serum GPT 45 U/L was within range.",
    "SGPT was elevated at 120.",
    "A meta-analysis supports statin therapy after ACS.",
    "By meta-analysis, the effect was modest.",
    "Metabolic panel: sodium 138, potassium 4.1.",
    "Metformin 500 mg twice daily was started.",
    "Claudication limits walking to 100 m.",
    "She bloomed after the new regimen.",
    "Dolly, her sister, drove her to clinic.",
    "An orca-shaped birthmark is documented.",
    "The llamas on the farm were not a risk factor.",
    "Command of English is limited; an interpreter was used.",
    "Titanium plate in the left radius.",
    "Granite countertop fall at home.",
    "Google searches did not change management.",
    "Amazon delivery worker with back pain.",
    "He works at Microsoft and sits all day.",
    "The baseline creatinine was 1.1 mg/dL.",
    "Compared with baseline, the eGFR dropped.",
    "As noted, the hemoglobin A1c was 7.2%.",
    "As expected, the TSH normalised.",
    "HbA1c 8.1% on 2021-03-04.",
    "Beta-blocker and ACE inhibitor were continued.",
    "Alpha-1 antitrypsin level is pending.",
    "Gamma-GT was 80 U/L.",
    "Chest pain resolved with nitroglycerin.",
    "I am concerned about the rising creatinine.",
    "I'm not able to find a colonoscopy in the record.",
    "As of May 2022, the patient takes lisinopril 10 mg.",
    "The model of care was reviewed with the family.",
    "Language model-free summaries are not available.",
    "This is a 64-year-old man with COPD.",
    "My recommendation is to repeat the echocardiogram.",
    "Phi is used for the golden ratio in some growth charts.",
    "From Google Scholar, no new evidence.",
]


def test_the_tables_are_large_enough():
    assert len(SELF_NAMING) >= 40 and len(INNOCENT) >= 40


@pytest.mark.parametrize(("sentence", "gone"), SELF_NAMING, ids=[s for s, _ in SELF_NAMING])
def test_every_self_naming_form_is_masked(sentence, gone):
    masked = mask_model_names(sentence, MODELS)
    assert MASK in masked
    for word in gone:
        assert word.lower() not in masked.lower(), masked
    assert names_a_model(sentence, MODELS)


@pytest.mark.parametrize("sentence", INNOCENT)
def test_clinical_sentences_stay_untouched(sentence):
    assert mask_model_names(sentence, MODELS) == sentence
    assert not names_a_model(sentence, MODELS)


def test_masking_keeps_the_rest_of_the_text_exactly():
    text = "Note: ＧＰＴ－４\u2014and nothing else\u2014said “hold the statin”."
    assert (
        mask_model_names(text, ())
        == f"Note: {MASK}\u2014and nothing else\u2014said “hold the statin”."
    )


def test_hits_are_the_words_as_written_for_an_admin_to_confirm():
    assert model_name_hits("As GPT\u20114, trained by OpenAI.", ()) == ["GPT\u20114", "OpenAI"]
