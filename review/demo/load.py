"""Demo accounts and assignments for `load_demo`."""

from review.demo.accounts import demo_accounts
from review.demo.assignments import demo_assignments
from review.demo.reviews import demo_simulated_reviews
from review.demo.rubrics import demo_rubrics


def demo_accounts_and_assignments(*, dataset_name: str) -> list[str]:
    """Create (idempotently) the demo accounts and their assignments; return lines to print."""
    lines = demo_accounts()
    lines += demo_assignments(dataset_name=dataset_name)
    lines += demo_simulated_reviews(dataset_name=dataset_name)
    lines += demo_rubrics(dataset_name=dataset_name)
    return lines
