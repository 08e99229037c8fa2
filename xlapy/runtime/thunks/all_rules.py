"""Every thunk rule: importing a family module registers its rules in ``registry.THUNK_RULES``; this module
imports them all, so the emitter never sees a table half filled."""

from xlapy.runtime.thunks import (  # noqa: F401 - importing a family registers its rules
    async_ops,
    collectives,
    control_flow,
    convolution,
    copy,
    custom_call,
    dot,
    fft,
    kernel,
    random,
    sort,
    top_k,
)
from xlapy.runtime.thunks.registry import THUNK_RULES

__all__ = ["THUNK_RULES"]
