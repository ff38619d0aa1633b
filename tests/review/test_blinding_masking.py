"""Masking holds in every written form a model names itself in, and leaves clinical text alone.

The tables are the contract of ``review.blinding``: every self-naming sentence loses the
name (and its version) whatever the dashes, spaces, width or case; every innocent clinical
sentence — "phi" the Greek letter, PHI the protected information, falcon and gemini the words,
GPT the old name of ALT, meta-analyses — reaches the clinician unchanged.
"""

import pytest

from review.blinding import MASK, mask_model_names, model_name_hits, names_a_model

# The response set's models, as a release or a generation run names them. Their own words
# ("Atlas", "Cedar", "Aloe", "Alpha", "health", "baseline") are also ordinary or clinical words.
MODELS = (
    "mixtral-8x7b",
    "SecretModel-Alpha-70B",
    "medlm@2048",
    "baseline",
    "m42-health/Llama3-Med42-70B",
    "Atlas-13B",
    "Cedar-7B",
    "Llama3-Aloe-8B",
)

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
    # A set's own short stems and words, in self-references.
    ("I am Med42, a clinical assistant.", ["Med42"]),
    ("Med42 recommends a repeat echo.", ["Med42"]),
    ("A Med-42 answer follows.", ["Med-42"]),
    ("As Atlas, I would order a CT.", ["Atlas"]),
    ("I'm Cedar and I suggest fluids.", ["Cedar"]),
    ("Hold the statin.\nRegards, Atlas.", ["Atlas"]),
    ("Hold the statin.\n\nBest,\nCedar.", ["Cedar"]),
    ("Thanks,\nMed42", ["Med42"]),
    ("Hold the statin.\n\u2014 Atlas.", ["Atlas"]),
    ("As Aloe, I note the rash.", ["Aloe"]),
    ("I am Aloe.", ["Aloe"]),
    ("My name is Atlas 13B.", ["Atlas", "13B"]),
    ("I'm Llama3-Aloe-8B.", ["Llama3", "Aloe", "8B"]),
    ("Atlas, an AI assistant, suggests a referral.", ["Atlas"]),
    ("I am MedLM.", ["MedLM"]),
    ("MedLM suggests a CT.", ["MedLM"]),
    ("SecretModel agrees.", ["SecretModel"]),
    ("Secret-Model Alpha agrees.", ["Secret-Model"]),
    # Makers and products written with hyphens, spaces or letter by letter.
    ("Chat-GPT says the dose is fine.", ["Chat-GPT"]),
    ("Chat GPT says the dose is fine.", ["Chat GPT"]),
    ("I was trained by Open AI.", ["Open AI"]),
    ("Open-AI built this model.", ["Open-AI"]),
    ("G P T - 4 recommends a repeat A1c.", ["G P T"]),
    ("G-P-T-4 recommends a repeat A1c.", ["G-P-T"]),
    ("As Deep Mind's model, I note the LDL.", ["Deep Mind"]),
    # Homoglyphs and marks: Cyrillic letters, Greek capitals, accents, strike-through.
    ("\u0421h\u0430tGPT says hi.", ["\u0421h\u0430tGPT"]),  # Cyrillic Es and a
    ("G\u0420T-4 recommends a repeat A1c.", ["G\u0420T"]),  # Cyrillic Er
    ("G\u03a1\u03a4-4 answered.", ["G\u03a1\u03a4"]),  # Greek Rho and Tau
    ("I am Cl\u00e0ude.", ["Cl\u00e0ude"]),
    ("I am C\u0336l\u0336a\u0336u\u0336d\u0336e\u0336.", ["C\u0336l"]),
    ("\uff2d\uff45\uff44\uff14\uff12 answered.", ["\uff2d\uff45\uff44"]),  # full width
    ("I\u2019m Command R+.", ["Command R+"]),
    # A name's version with a space, a word of a name with its version, letters spaced out.
    ("Med 42 recommends a repeat echo.", ["Med 42"]),
    ("I am Med 42.", ["Med 42"]),
    ("Aloe-8B suggests fluids.", ["Aloe-8B"]),
    ("Aloe 8B agrees with the plan.", ["Aloe 8B"]),
    ("C h a t G P T says the dose is fine.", ["C h a t"]),
    ("O p e n A I trained me.", ["O p e n"]),
    ("M e d 4 2 answered.", ["M e d 4 2"]),
    ("S-e-c-r-e-t-M-o-d-e-l agrees.", ["S-e-c-r-e-t"]),
    # Ordinary words of the set's names, each a whole clause of a self-reference.
    ("I, Atlas, suggest a CT.", ["Atlas"]),
    ("As Cedar, my advice is rest.", ["Cedar"]),
    ("Hi, this is Cedar.", ["Cedar"]),
    ("I am Atlas and I recommend rest.", ["Atlas"]),
    ("Hold the statin.\nBest regards,\nAloe!", ["Aloe"]),
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
    # Words that the set's model names share.
    "Aloe vera gel was applied to the burn.",
    "She uses an aloe lotion for the rash.",
    "The atlas (C1) and axis are intact.",
    "Atlas-axis instability was excluded.",
    "Cedar pollen allergy is documented.",
    "She was transferred from Cedars-Sinai.",
    "Alpha thalassemia trait is known.",
    "The secret to adherence was a pill box.",
    "Her health literacy is limited.",
    "Home health visits twice weekly.",
    "As the cedar pollen count rises, symptoms worsen.",
    "MED 42 mg daily was tolerated.",
    "ICD-10 M42 was coded for the spine.",
    "Medial meniscus tear on MRI.",
    "Medicare covers the infusion.",
    "Thanks, Cedar Clinic staff, for the referral.",
    "Пациент осмотрен в клинике.",
    "Café visit; the naïve T cells were counted.",
    "Regards to the family; the atlas is stable.",
    # The set's ordinary words after words that only look like a self-reference: "This is",
    # "I am" before more of a clause, "As" before no "I", a sign-off before more words.
    "This is alpha thalassemia.",
    "This is cedar pollen season.",
    "This is health care at its best.",
    "This is baseline for her.",
    "I am cedar-allergic, so the pollen count matters.",
    "I am the health visitor for the family.",
    "I am alpha-blocker intolerant.",
    "As atlas dislocation goes, this one is mild.",
    "As alpha rises, I would recheck the level.",
    "Regards, the health team",
    "Sincerely, health services",
    "Thanks, cedar pollen season is over.",
    "Thanks, Cedar, for the referral.",
    "Health: stable. Cedar: no reaction.",
    # Words that outside models' names share, where no self-introduction makes them a name.
    "She read a Shakespeare sonnet to the nurses.",
    "Hermes scarf found on the ward; no allergy.",
    "Falcon chest deformity noted; the Phi angle was 30 degrees.",
    "O2 sats 94% on room air; SpO2 91% on O2 at 2 L.",
    "The haiku she wrote was read at discharge.",
    "A starling flew into the window; no injury.",
    "The GLM was refitted with age as a covariate.",
]


def test_the_tables_are_large_enough():
    assert len(SELF_NAMING) >= 90 and len(INNOCENT) >= 78


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


def test_the_mask_covers_the_invisible_marks_of_a_name_and_nothing_else():
    text = "Note: G\u200bPT\u20114\u0301, said \u201chold\u201d.\r\n\r\nBye\u00a0now."
    assert (
        mask_model_names(text, ()) == f"Note: {MASK}, said \u201chold\u201d.\r\n\r\nBye\u00a0now."
    )


def test_a_lab_value_after_a_version_is_left_and_the_version_masked():
    assert mask_model_names("GPT-4 45 U/L was noted.", ()) == f"{MASK} 45 U/L was noted."
    assert mask_model_names("Llama 2 40 mg daily.", ()) == f"{MASK} 40 mg daily."


@pytest.mark.parametrize(
    "text",
    ["Hold the statin.\nRegards, Atlas", "Thanks,\nCedar\n", "Hold it.\n-- Atlas", "Cheers, Aloe!"],
)
def test_a_sign_off_that_ends_the_response_or_the_line_is_masked(text):
    assert MASK in mask_model_names(text, MODELS)
