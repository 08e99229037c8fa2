"""The kernels behind `xlapy.codegen.backends.math_library` (internal: use `math_function`)."""
