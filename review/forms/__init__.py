"""Forms, one module per area."""
