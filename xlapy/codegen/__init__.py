"""Code generation for fusions (SPEC.md §4): HLO → the ``xla`` MLIR dialect
(xDSL objects) → progressively lowered IR → LLVM, like XLA's emitters."""
