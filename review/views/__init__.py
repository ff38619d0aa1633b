"""Views, one module per area: core (home, health), accounts (applications, DUA, admin queue,
audit), clinician (queue, review page, record endpoints)."""
