"""Demo accounts and assignments (filled in by the accounts and review features)."""


def demo_accounts_and_assignments(*, dataset_name: str) -> list[str]:
    return []
