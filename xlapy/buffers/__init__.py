"""Scheduling and buffer assignment for whole modules: the order in which the
computations that run as thunks execute their instructions
(``schedule``), when each value is live over that order (``liveness``), which
values may share bytes (``sharing``), and
where in memory each value lives (``assignment``), as XLA's
``xla/service/hlo_memory_scheduler.cc`` and ``xla/service/buffer_assignment.cc``
decide them."""
