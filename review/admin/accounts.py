"""Admin for accounts, DUA versions, applications and the audit trail."""
