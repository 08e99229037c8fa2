"""Shape inference for HLO, one rule per opcode, in one module per family of
ops. ``xlapy.hlo.shape_rules.inference`` is the entry: ``infer_shape``,
``has_shape_rule`` and ``opcodes_without_rules``."""
