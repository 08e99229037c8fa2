"""Fixtures that test files across the suite request by name."""

from __future__ import annotations

import pytest

from xlapy.runtime.kernel_cache import clear_memory_cache


@pytest.fixture(scope="module")
def fresh_kernel_cache(tmp_path_factory: pytest.TempPathFactory):
    """An empty kernel cache, on disk and in memory, for the requesting module: its kernels are compiled, not
    loaded (what compile times and emitter choices are measured on). Request it with
    ``pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")``."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XLAPY_CACHE_DIR", str(tmp_path_factory.mktemp("kernel_cache")))
        clear_memory_cache()
        yield
