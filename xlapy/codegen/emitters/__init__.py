"""Hero-based emitters: one module per hero (XLA's docs/emitters.md)."""
