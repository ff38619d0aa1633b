"""Approved demo accounts with enrolled TOTP (filled in by the accounts feature)."""


def demo_accounts() -> list[str]:
    return []
