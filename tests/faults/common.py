"""Set-up shared by the fault drills: a throwaway database and synthetic data, on loopback."""

import random
import tempfile
import time
from pathlib import Path

from tests.load import harness
from tests.load.harness import log

WORDS = [
    "patient",
    "creatinine",
    "kidney",
    "function",
    "stable",
    "worsening",
    "improved",
    "dialysis",
    "blood",
    "pressure",
    "heart",
    "rate",
    "glucose",
    "insulin",
    "metformin",
    "fever",
    "cough",
    "pneumonia",
    "chest",
    "x-ray",
    "clear",
    "effusion",
    "note",
    "plan",
    "follow-up",
    "weeks",
    "months",
    "labs",
    "normal",
    "elevated",
    "reduced",
    "dose",
    "allergy",
    "penicillin",
    "history",
]


def prepare(db_name: str, broker: str, *, static: bool = False) -> tuple[dict, Path]:
    """A fresh migrated database; this process's Django pointed at it. Returns (env, work dir)."""
    work = Path(tempfile.mkdtemp(prefix=f"medalign-{db_name}-"))
    (work / "logs").mkdir()
    env = harness.app_env(harness.fresh_database(db_name), broker, work / "data")
    t0 = time.monotonic()
    harness.manage(env, "migrate", "--noinput", "-v", "0")
    if static:
        harness.manage(env, "collectstatic", "--noinput", "-v", "0")
    harness.configure_django(env)
    log(f"database {db_name} ready in {time.monotonic() - t0:.0f} s (broker {broker})")
    return env, work


def scoring_dataset(name: str, *, instructions: int, responses: int = 6, words: int = 120):
    """Instructions with a reference answer and ``responses`` model answers of ``words`` words."""
    from review.models import Dataset, Instruction, ModelResponse, ReferenceResponse

    rng = random.Random(7)
    dataset = Dataset.objects.create(name=name, is_synthetic=True)

    def text() -> str:
        return " ".join(rng.choice(WORDS) for _ in range(words))

    objs = Instruction.objects.bulk_create(
        [
            Instruction(dataset=dataset, instruction_id=f"F-{i}", question=f"Question {i}?")
            for i in range(instructions)
        ]
    )
    ReferenceResponse.objects.bulk_create(
        [ReferenceResponse(instruction=i, annotator="A1", text=text()) for i in objs]
    )
    ModelResponse.objects.bulk_create(
        [
            ModelResponse(instruction=i, model_name=f"model-{k}", text=text())
            for i in objs
            for k in range(responses)
        ]
    )
    return dataset
