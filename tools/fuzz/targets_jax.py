"""The JAX frontend's ``jit`` (``xlapy.frontends.jax.jit``): a function of a small library, called with generated
arguments (the ones it is written for, or those edited: other dtypes, shapes and ranks, Python objects and other
non-arrays, missing, extra and unknown arguments, unusual memory layouts, values out of range) under generated
``jit`` options (static arguments, compile options), some functions being ones JAX cannot lower or xlapy cannot
run.

The reference is ``jax.jit`` (XLA:CPU) on the same call. Where it returns, xlapy's ``jit`` returns the same
tree of numpy arrays bit for bit (NaN for NaN), or refuses with an XlapyError (it refuses, say, an int64 argument
out of the int32 range that JAX would wrap); where it raises, xlapy raises an XlapyError. The library's functions
are exact in any evaluation order (elementwise IEEE arithmetic, integer sums, sorts, selections), so equal bits
is the right bar.

A case is JSON (reports keep it): arguments are described (``{"array": ...}``, ``{"python": ...}``,
``{"marker": ...}``, lists and dicts of them) and made anew for each call."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tools.fuzz.outcome import Outcome, wrong


def _add(x, y):
    return x + y


def _select(x, y):
    import jax.numpy as jnp

    return jnp.where(x > y, x * 2, y - x)


def _integer_ops(a, b):
    return a // 3 + b % 5, a & b, a >> 1


def _pytree(params, x):
    return {"sum": params["w"] + x, "pair": (params["b"] * x, -x)}


def _tile(x, n):
    import jax.numpy as jnp

    return jnp.tile(x, n)


def _scaled(x, *, factor):
    return x * factor


def _sort_rows(x):
    import jax.numpy as jnp

    return jnp.sort(x, axis=-1)


def _argmax(x):
    import jax.numpy as jnp

    return jnp.argmax(x, axis=0)


def _bf16_add(x, y):
    import jax.numpy as jnp

    return x.astype(jnp.bfloat16) + y.astype(jnp.bfloat16)


def _integer_sum(x):
    import jax.numpy as jnp

    return jnp.sum(x.astype(jnp.int32), axis=-1)


def _dynamic_index(x, i):
    return x[i]


def _concatenate(x, y):
    import jax.numpy as jnp

    return jnp.concatenate([x, y])


def _python_branch(x):
    return x if x > 0 else -x  # a traced value as a Python bool: JAX refuses


def _returns_text(x):
    return "text"


def _raises(x):
    raise ValueError("the function's own error")


def _numpy_inside(x):
    return np.sin(x)  # a tracer to numpy: JAX refuses


def _host_callback(x):
    import jax

    return jax.pure_callback(lambda v: v, jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def _nothing(x):
    return None


def _constant(x):
    return 3


@dataclass(frozen=True)
class _Function:
    fun: Callable[..., Any]
    arguments: Callable[[random.Random], tuple[list, dict]]  # the arguments it is written for (as specs)
    static_argnums: tuple[int, ...] = ()
    static_argnames: tuple[str, ...] = ()


_FLOATS = ["float32", "float16", "bfloat16", "float64"]
_INTEGERS = ["int32", "int8", "uint8", "uint32", "int64"]
_SHAPES = [[], [3], [2, 3], [4, 1], [0, 3]]


def _array(rng: random.Random, dtype: str, shape: list[int] | None = None, fill: str = "random") -> dict:
    return {"array": {"shape": list(shape if shape is not None else rng.choice(_SHAPES)), "dtype": dtype,
                      "fill": fill, "layout": "C", "seed": rng.randrange(1000)}}


def _two_floats(rng: random.Random) -> tuple[list, dict]:
    dtype, shape = rng.choice(_FLOATS), rng.choice(_SHAPES)
    return [_array(rng, dtype, shape), _array(rng, dtype, shape)], {}


def _two_integers(rng: random.Random) -> tuple[list, dict]:
    dtype, shape = rng.choice(_INTEGERS), rng.choice(_SHAPES)
    return [_array(rng, dtype, shape), _array(rng, dtype, shape)], {}


def _one_float(rng: random.Random) -> tuple[list, dict]:
    return [_array(rng, rng.choice(_FLOATS), rng.choice([[3], [2, 3], [4, 5]]))], {}


def _one_integer(rng: random.Random) -> tuple[list, dict]:
    return [_array(rng, rng.choice(_INTEGERS), rng.choice([[3], [2, 3], [4, 5]]))], {}


FUNCTIONS: dict[str, _Function] = {
    "add": _Function(_add, _two_floats),
    "select": _Function(_select, _two_floats),
    "integer_ops": _Function(_integer_ops, _two_integers),
    "pytree": _Function(_pytree, lambda rng: (
        [{"dict": {"w": _array(rng, "float32", [2, 3]), "b": _array(rng, "float32", [3])}},
         _array(rng, "float32", [2, 3])], {})),
    "tile": _Function(_tile, lambda rng: ([_array(rng, "int32", [3]), {"python": rng.choice([1, 2, 3])}], {}),
                      static_argnums=(1,)),
    "scaled": _Function(_scaled, lambda rng: ([_array(rng, "float32", [4])], {"factor": {"python": 2.5}}),
                        static_argnames=("factor",)),
    "sort_rows": _Function(_sort_rows, _one_float),
    "argmax": _Function(_argmax, _one_float),
    "bf16_add": _Function(_bf16_add, _two_floats),
    "integer_sum": _Function(_integer_sum, _one_integer),
    "dynamic_index": _Function(_dynamic_index, lambda rng: (
        [_array(rng, "float32", [5, 2]), {"python": rng.choice([0, 3, -1, 7])}], {})),
    "concatenate": _Function(_concatenate, _two_floats),
    "python_branch": _Function(_python_branch, _one_float),
    "returns_text": _Function(_returns_text, _one_float),
    "raises": _Function(_raises, _one_float),
    "numpy_inside": _Function(_numpy_inside, _one_float),
    "host_callback": _Function(_host_callback, _one_float),
    "nothing": _Function(_nothing, _one_float),
    "constant": _Function(_constant, _one_float),
}

ARGUMENT_EDITS = ["dtype", "shape", "rank", "scalar", "python_object", "odd_array", "layout", "out_of_range",
                  "jax_array", "missing", "extra", "unknown_keyword", "nested"]
OPTION_EDITS = ["static_argnums", "static_argnames", "compile_option", "valid_compile_option"]

_PYTHON_OBJECTS: list[dict] = [
    {"python": None}, {"python": "text"}, {"python": [1, "a"]}, {"python": {"k": None}}, {"python": True},
    {"python": 2**40}, {"python": 2**70}, {"python": 1e300}, {"python": [[1, 2], [3]]},
    {"marker": "bytes"}, {"marker": "object"}, {"marker": "generator"}, {"marker": "function"},
    {"marker": "shape_dtype_struct"}, {"marker": "set"}, {"marker": "ellipsis"}, {"marker": "complex"},
    {"marker": "slice"},
]
_ODD_ARRAYS = ["object_array", "string_array", "structured_array", "datetime_array", "big_endian_array"]


def generate_jit(rng: random.Random) -> dict:
    name = rng.choice(sorted(FUNCTIONS))
    function = FUNCTIONS[name]
    args, kwargs = function.arguments(rng)
    options: dict[str, Any] = {}
    if function.static_argnums:
        options["static_argnums"] = list(function.static_argnums)
    if function.static_argnames:
        options["static_argnames"] = list(function.static_argnames)
    edits = [rng.choice(ARGUMENT_EDITS) for _ in range(rng.choice([0, 1, 1, 2]))]
    for edit in edits:
        _edit_arguments(rng, edit, args, kwargs)
    if rng.random() < 0.2:
        _edit_options(rng, rng.choice(OPTION_EDITS), options)
    return {"function": name, "args": args, "kwargs": kwargs, "options": options, "edits": edits}


def _array_specs(args: list, kwargs: dict) -> list[dict]:
    found: list[dict] = []

    def visit(spec: Any) -> None:
        if isinstance(spec, dict):
            if "array" in spec:
                found.append(spec["array"])
            for key in ("list", "dict"):
                if key in spec:
                    for item in (spec[key].values() if key == "dict" else spec[key]):
                        visit(item)

    for spec in [*args, *kwargs.values()]:
        visit(spec)
    return found


def _edit_arguments(rng: random.Random, edit: str, args: list, kwargs: dict) -> None:
    arrays = _array_specs(args, kwargs)
    array = rng.choice(arrays) if arrays else None
    position = rng.randrange(len(args)) if args else None
    if edit == "dtype" and array is not None:
        array["dtype"] = rng.choice([*_FLOATS, *_INTEGERS, "bool", "complex64", "float8_e4m3fn", "int4", "uint64"])
    elif edit == "shape" and array is not None and array["shape"]:
        array["shape"][rng.randrange(len(array["shape"]))] = rng.choice([0, 1, 2, 5])
    elif edit == "rank" and array is not None:
        array["shape"] = array["shape"][1:] if array["shape"] and rng.random() < 0.5 else [2, *array["shape"]]
    elif edit == "scalar" and position is not None:
        args[position] = rng.choice([{"python": 1.5}, {"python": 3}, {"python": False}, _array(rng, "float32", [])])
    elif edit == "python_object" and position is not None:
        args[position] = rng.choice(_PYTHON_OBJECTS)
    elif edit == "odd_array" and position is not None:
        args[position] = {"marker": rng.choice(_ODD_ARRAYS)}
    elif edit == "layout" and array is not None:
        array["layout"] = rng.choice(["F", "strided", "read_only", "reversed"])
    elif edit == "out_of_range" and array is not None:
        array["fill"] = rng.choice(["huge", "nan", "inf", "negative"])
        array["dtype"] = rng.choice([array["dtype"], "int64", "uint64", "float64"])
    elif edit == "jax_array" and array is not None:
        array["layout"] = "jax"
    elif edit == "missing" and args:
        args.pop()
    elif edit == "extra":
        args.append(rng.choice([_array(rng, "float32"), {"python": 1}]))
    elif edit == "unknown_keyword":
        kwargs[rng.choice(["z", "x", "factor", "params"])] = rng.choice([_array(rng, "float32"), {"python": 2}])
    elif edit == "nested" and position is not None:
        args[position] = rng.choice([{"list": [args[position], args[position]]}, {"dict": {"a": args[position]}}])


def _edit_options(rng: random.Random, edit: str, options: dict) -> None:
    if edit == "static_argnums":
        options["static_argnums"] = rng.choice([[5], [-1], [0], ["a"], [1.5], [0, 0], 7, None, [True]])
    elif edit == "static_argnames":
        options["static_argnames"] = rng.choice([["nope"], ["x"], 3, [None], "factor"])
    elif edit == "compile_option":
        options.update(rng.choice([{"nonsense": 1}, {"dump_to": 3}, {"verify": "yes"}, {"backend": "gpu"},
                                   {"disabled_hlo_passes": "algsimp"}, {"disabled_hlo_passes": [3]},
                                   {"progress": "bar"}, {"run_hlo_passes": None}]))
    else:
        options.update(rng.choice([{"run_hlo_passes": False}, {"disabled_hlo_passes": ["algsimp", "cse"]},
                                   {"verify": False}]))


def _make_array(spec: dict) -> Any:
    import jax.numpy as jnp
    import ml_dtypes

    dtype = np.dtype(getattr(ml_dtypes, spec["dtype"], None) or spec["dtype"])
    shape = tuple(spec["shape"])
    rng = np.random.default_rng(spec["seed"])
    fill = spec["fill"]
    if fill == "huge":
        values = np.full(shape, 2.0**40 if dtype.kind in "iu" else 1e300)
    elif fill == "nan":
        values = np.full(shape, np.nan)
    elif fill == "inf":
        values = np.full(shape, -np.inf)
    elif fill == "negative":
        values = np.full(shape, -3.0)
    elif dtype.kind in "iu":
        values = rng.integers(0 if dtype.kind == "u" else -8, 8, shape)
    elif dtype.kind == "b":
        values = rng.random(shape) < 0.5
    else:
        values = rng.standard_normal(shape) * 4
    with np.errstate(all="ignore"):
        if fill in ("huge", "nan", "inf") and dtype.kind in "iu":
            array = np.asarray(values).astype(np.int64 if fill == "huge" else np.float64)
            array = array.astype(dtype) if fill == "huge" and dtype.itemsize == 8 else array
        else:
            array = np.asarray(values).astype(dtype)
    layout = spec["layout"]
    if layout == "F":
        array = np.asfortranarray(array)
    elif layout == "strided" and array.ndim:
        array = np.repeat(array, 2, axis=-1)[..., ::2]
    elif layout == "reversed" and array.ndim:
        array = np.flip(np.flip(array, -1).copy(), -1)
    elif layout == "read_only":
        array = np.array(array)
        array.flags.writeable = False
    elif layout == "jax":
        return jnp.asarray(array)
    return array


def _marker(name: str) -> Any:
    import jax
    import jax.numpy as jnp

    made: dict[str, Callable[[], Any]] = {
        "bytes": lambda: b"ab", "object": object, "generator": lambda: (i for i in range(3)),
        "function": lambda: (lambda v: v), "shape_dtype_struct": lambda: jax.ShapeDtypeStruct((3,), jnp.float32),
        "set": lambda: {1, 2}, "ellipsis": lambda: ..., "complex": lambda: 1 + 2j, "slice": lambda: slice(1, 2),
        "object_array": lambda: np.array([None, 1], dtype=object), "string_array": lambda: np.array(["a", "b"]),
        "structured_array": lambda: np.zeros(3, dtype=[("a", np.int32), ("b", np.float32)]),
        "datetime_array": lambda: np.array(["2020-01-01"], dtype="datetime64[D]"),
        "big_endian_array": lambda: np.arange(3, dtype=">f4"),
    }
    return made[name]()


def _make(spec: Any) -> Any:
    if isinstance(spec, dict):
        if "array" in spec:
            return _make_array(spec["array"])
        if "python" in spec:
            return spec["python"]
        if "marker" in spec:
            return _marker(spec["marker"])
        if "list" in spec:
            return [_make(item) for item in spec["list"]]
        if "dict" in spec:
            return {key: _make(item) for key, item in spec["dict"].items()}
    raise ValueError(f"not an argument description: {spec!r}")


def _jax_reference(function: _Function, options: dict, case: dict) -> Any:
    """``jax.jit``'s result for the case (with the static options alone), or the exception it raises."""
    import jax

    static = {k: options[k] for k in ("static_argnums", "static_argnames") if k in options}
    try:
        result = jax.jit(function.fun, **static)(*_make(case["args_list"]), **_make(case["kwargs_dict"]))
        return jax.tree.map(np.asarray, result)
    except Exception as error:  # what jax.jit refuses, or what the function raises
        return error


def _differences(got: Any, expected: Any) -> str:
    import jax

    from xlapy.runtime.ulps import max_ulp_difference

    if jax.tree.structure(got) != jax.tree.structure(expected):
        return f"structure {jax.tree.structure(got)}, jax.jit's {jax.tree.structure(expected)}"
    for i, (a, e) in enumerate(zip(jax.tree.leaves(got), jax.tree.leaves(expected))):
        if not isinstance(a, np.ndarray):
            return f"output {i} is a {type(a).__name__}, not a numpy array"
        if a.dtype != e.dtype or a.shape != e.shape:
            return f"output {i}: {a.dtype}{list(a.shape)}, jax.jit's {e.dtype}{list(e.shape)}"
        if a.size and max_ulp_difference(a, e) != 0:
            return f"output {i}: {a.ravel()[:6]} against jax.jit's {e.ravel()[:6]}"
    return ""


def run_jit(case: dict) -> Outcome | None:
    from xlapy.frontends.jax import jit

    function = FUNCTIONS[case["function"]]
    options = case["options"]
    jitted = jit(function.fun, **options)
    expected = _jax_reference(function, options, {"args_list": {"list": case["args"]},
                                                  "kwargs_dict": {"dict": case["kwargs"]}})
    got = jitted(*_make({"list": case["args"]}), **_make({"dict": case["kwargs"]}))
    if isinstance(expected, BaseException):
        return wrong("jit returned where jax.jit raises", f"{type(expected).__name__}: {expected}")
    differs = _differences(got, expected)
    return wrong("jit's result differs from jax.jit's", differs) if differs else None
