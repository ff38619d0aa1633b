"""A small synthetic dataset with references and responses, for the scoring tests."""

from review.models import Dataset, Instruction, ModelResponse, ReferenceResponse

MODELS = ("m-alpha", "m-beta", "m-gamma")


def make_scoring_dataset(name: str = "scoring", n_instructions: int = 4) -> Dataset:
    dataset = Dataset.objects.create(name=name, is_synthetic=True)
    for i in range(n_instructions):
        instruction = Instruction.objects.create(
            dataset=dataset,
            instruction_id=f"S{i}",
            question=f"What was the most recent creatinine for synthetic patient {i}?",
        )
        ReferenceResponse.objects.create(
            instruction=instruction,
            annotator="Annotator_1",
            annotator_order=1,
            text=f"The most recent creatinine was 1.{i} mg/dL on 2021-03-0{i + 1}.",
        )
        if i % 2 == 0:
            ReferenceResponse.objects.create(
                instruction=instruction,
                annotator="Annotator_2",
                annotator_order=2,
                text=f"Creatinine 1.{i} mg/dL (most recent, March 2021).",
            )
        texts = (
            f"The latest creatinine was 1.{i} mg/dL, measured on 2021-03-0{i + 1}.",
            f"Creatinine was {i + 2}.5 mg/dL last year.",
            "I cannot determine this from the record.",
        )
        for model, text in zip(MODELS, texts, strict=True):
            ModelResponse.objects.create(instruction=instruction, model_name=model, text=text)
    # An instruction without a reference answer is not scored.
    orphan = Instruction.objects.create(dataset=dataset, instruction_id="S-noref", question="?")
    ModelResponse.objects.create(instruction=orphan, model_name="m-alpha", text="Anything.")
    return dataset
