"""Generated-input testing of xlapy's entry points: seeds, mutators, a grammar
of small modules, the per-entry-point targets and an isolated worker process.

Everything here takes a ``random.Random`` so that a seed fixes every input."""
