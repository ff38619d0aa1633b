"""``manage.py mask_check`` lists near misses for an admin: words masking left that look like
a model name, never whole responses."""

from django.core.management import call_command

from review.blinding import near_misses
from review.models import Dataset, Instruction, ModelResponse, Patient

MODELS = ("Atlas-13B", "Meditron-70B", "mixtral-8x7b")


def test_near_misses_are_a_names_words_out_of_context_and_words_one_edit_away():
    text = "Atlas suggests rest; Mixtrall and Meditorn agree. I am Atlas. The falcon flew."
    assert near_misses(text, MODELS) == ["Atlas", "Mixtrall", "Meditorn", "falcon"]


def test_a_masked_name_and_ordinary_words_are_no_near_miss():
    assert near_misses("As Atlas, I note the creatinine and the baseline.", MODELS) == []
    assert near_misses("Meditron-70B agrees.", MODELS) == []


def test_near_misses_read_hostile_text():
    assert near_misses("gpt" + "1" * 50_000 + "abc \x00\ud800 Mixtrall", MODELS) == ["Mixtrall"]


def test_mask_check_prints_the_near_misses_and_no_response(db, capsys):
    dataset = Dataset.objects.create(name="near-miss", is_synthetic=True)
    patient = Patient.objects.create(dataset=dataset, person_id="p1")
    instruction = Instruction.objects.create(
        dataset=dataset, instruction_id="i1", patient=patient, question="Plan?"
    )
    ModelResponse.objects.create(
        instruction=instruction,
        model_name="Atlas-13B",
        text="Atlas suggests holding the statin; potassium 5.9 is the secret.",
    )
    ModelResponse.objects.create(
        instruction=instruction, model_name="Meditron-70B", text="As Meditron, I agree."
    )
    call_command("mask_check", "--dataset", dataset.name)
    out = capsys.readouterr().out
    assert "1 of 2 responses had model names masked for clinicians" in out
    assert "1 response holds near misses that await an admin's check" in out
    assert "Near misses" in out and "Atlas" in out.split("Near misses", 1)[1]
    assert "potassium" not in out
