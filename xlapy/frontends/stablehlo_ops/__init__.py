"""The StableHLO (and Shardy, func, chlo) ops the frontend knows: one
``OpSpec`` per op name, saying how to read its pretty syntax, how to print it
back, and which HLO opcode and attributes it stands for.

``parse(p, draft)`` reads the op's syntax after its name with the parser
``p`` (``xlapy.frontends.stablehlo``), filling ``draft``; ``print(q, instr)``
writes it back with the printer ``q``; ``hlo(draft)`` gives the HLO
attributes (as ``xlapy.hlo.parse_module`` would have them for the equivalent
HLO text). An op without ``parse``/``print`` is read and written in MLIR's
generic form; an op without a spec keeps its MLIR name as its opcode."""
