"""Developer tools that are not part of the xlapy package (fuzzing harness)."""
