"""Code generation for fusions (XLA's docs/emitters.md): HLO → the ``xla`` MLIR dialect
(xDSL objects) → progressively lowered IR → LLVM, like XLA's emitters."""
