"""HLO-to-HLO passes, as XLA runs them before code generation: each pass is a
small module with one ``HloPass`` subclass, usable alone or in an
``HloPassPipeline`` (see ``hlo_pass.py``)."""
