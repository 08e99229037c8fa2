"""The algebraic simplifier's rewrite rules, one per opcode, in files by op
family; ``all_rules`` gathers them (see ``xlapy/transforms/algebraic_simplifier.py``)."""
