"""A small study for the prediction-powered tests: every instruction in the study, some reviewed
by two clinicians, COMET tracking the clinicians' latent quality and BLEU noise."""

from types import SimpleNamespace

import numpy as np

from review.models import Dataset, Instruction, ModelResponse, ResponseJudgement, Review, Role
from scoring.models import MetricConfig, MetricScore
from tests import factories

MODELS = ("model-a", "model-b", "model-c")
N_INSTRUCTIONS = 16
N_REVIEWED = 8


def _config(backend: str) -> MetricConfig:
    return MetricConfig.objects.create(
        backend=backend,
        identity={"backend": backend},
        identity_hash=f"hash-{backend}",
        label=backend.upper(),
    )


def make_study(n_instructions=N_INSTRUCTIONS, n_reviewed=N_REVIEWED, seed=0):
    """A dataset whose study holds every instruction; the first ``n_reviewed`` reviewed by two
    clinicians; COMET tracks the clinicians' latent quality, BLEU is noise."""
    rng = np.random.default_rng(seed)
    d = SimpleNamespace()
    d.researcher = factories.make_user("researcher@example.edu", roles=[Role.RESEARCHER])
    d.admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    clinicians = [
        factories.make_user(f"c{k}@example.edu", roles=[Role.CLINICIAN]) for k in range(2)
    ]
    d.dataset = Dataset.objects.create(name="ppi", is_synthetic=True)
    comet, bleu = _config("comet"), _config("bleu")
    strength = np.array([1.0, 0.0, -1.0])
    instructions = []
    for i in range(n_instructions):
        instruction = Instruction.objects.create(
            dataset=d.dataset, instruction_id=f"I{i:02d}", question="q", person_id=f"P{i}"
        )
        instructions.append(instruction)
        latent = strength + rng.normal(size=3)
        responses = [
            ModelResponse.objects.create(instruction=instruction, model_name=m, text=f"r{i}{m}")
            for m in MODELS
        ]
        for response, q in zip(responses, latent, strict=True):
            MetricScore.objects.create(
                response=response, config=comet, value=q + rng.normal(0, 0.3)
            )
            MetricScore.objects.create(response=response, config=bleu, value=rng.normal())
        factories.put_in_study(instruction)
        if i >= n_reviewed:
            continue
        for clinician in clinicians:
            seen = latent + rng.normal(0, 0.5, size=3)
            ranks = (-seen).argsort().argsort() + 1
            assignment = factories.assign(instruction, clinician)
            review = Review.objects.create(
                assignment=assignment,
                status=Review.Status.SUBMITTED,
                shown_order=[r.pk for r in responses],
            )
            ResponseJudgement.objects.bulk_create(
                ResponseJudgement(
                    review=review,
                    response=r,
                    position=k,
                    rank=int(ranks[k]),
                    is_correct=bool(seen[k] > 0),
                )
                for k, r in enumerate(responses)
            )
    d.instructions = instructions
    return d
