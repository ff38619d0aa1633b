"""Demo assignments with overlap (filled in by the clinician review feature)."""


def demo_assignments(*, dataset_name: str) -> list[str]:
    return []
