"""The thunks an executable runs: kernels, library calls, copies and control flow, each reading and writing
slices of the buffer assignment's allocations. The per-opcode rules that make them live in the family modules
(listed in ``all_rules``); this package's ``__init__`` holds no table."""
