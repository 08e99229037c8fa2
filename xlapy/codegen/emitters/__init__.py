"""Hero-based emitters: one module per hero (SPEC.md §4.1)."""
