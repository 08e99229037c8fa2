"""JAX programs as HLO modules: the HLO text JAX lowers a jitted function to,
parsed into xlapy's IR, and ``jit``, which compiles and runs such programs
with xlapy instead of XLA. JAX is an optional dependency (the ``jax`` extra).

``jit`` reaches ``xlapy.compile``: this module alone of the frontends sits at
the layer of the ``xlapy`` package, above the runtime (see
``tests/test_import_graph.py``); nothing below that layer imports it."""

from __future__ import annotations

import functools
import importlib
import inspect
import os
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from xlapy.errors import XlapyError
from xlapy.hlo import HloModule, parse_module

if TYPE_CHECKING:
    from xlapy.runtime import Executable


def _jax() -> Any:
    try:
        return importlib.import_module("jax")
    except ImportError:
        raise XlapyError("the JAX frontend needs jax and jaxlib: pip install 'xlapy[jax]'") from None


def lowered_text(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The HLO text of ``jax.jit(fn)`` lowered for ``args`` (before XLA's optimisations)."""
    return _jax().jit(fn, keep_unused=True).lower(*args, **kwargs).as_text(dialect="hlo")


def optimized_text(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """The HLO text of ``jax.jit(fn)`` compiled for ``args`` by the default
    backend (after XLA's optimisations: fusions, layouts, copies)."""
    return _jax().jit(fn, keep_unused=True).lower(*args, **kwargs).compile().as_text()


def from_jax(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> HloModule:
    """The HLO module ``jax.jit(fn)`` lowers to for the example ``args``
    (arrays or ``jax.ShapeDtypeStruct``s; keyword arguments are passed too).

    The entry computation takes the leaves of ``(args, kwargs)`` in
    ``jax.tree.leaves`` order, unused ones included, so
    ``xlapy.evaluate(module, *jax.tree.leaves((args, kwargs)))`` runs it."""
    return parse_module(lowered_text(fn, *args, **kwargs), source=getattr(fn, "__name__", None))


def optimized_from_jax(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> HloModule:
    """The HLO module of ``jax.jit(fn)`` after XLA has compiled it for ``args``."""
    return parse_module(optimized_text(fn, *args, **kwargs), source=getattr(fn, "__name__", None))


class JitFunction:
    """``fun`` compiled by xlapy once per signature of its arguments, as ``jax.jit`` does with XLA.

    A signature is the tree structure of the arguments (``jax.tree`` flattening), each leaf's shape,
    dtype and weak type (``jax.typeof``), and the values of the static arguments. The first call with
    a signature lowers ``fun`` with JAX (``keep_unused=True``), imports the HLO and compiles it with
    ``xlapy.compile(module, **compile_options)``; every call runs the executable on the leaves (numpy or
    JAX arrays, Python numbers) and returns numpy arrays in the tree structure ``fun`` returns."""

    def __init__(self, fun: Callable[..., Any], static_argnums: Sequence[int] = (),
                 static_argnames: Sequence[str] = (), compile_options: dict[str, Any] | None = None):
        self.fun = fun
        self.static_argnums, self.static_argnames = _resolve_static(fun, tuple(static_argnums), tuple(static_argnames))
        self.compile_options = dict(compile_options or {})
        self._compiled: dict[Hashable, tuple[Executable, Any]] = {}
        functools.update_wrapper(self, fun)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        executable, out_tree, leaves = self._prepare(args, kwargs)
        result = executable(*leaves)
        jax = _jax()
        outputs = [result] if out_tree.num_leaves == 1 else list(result)
        return jax.tree_util.tree_unflatten(out_tree, outputs)

    def compiled(self, *args: Any, **kwargs: Any) -> Executable:
        """The executable calls with arguments of this signature run (compiled now if it is new)."""
        return self._prepare(args, kwargs)[0]

    def _prepare(self, args: tuple, kwargs: dict) -> tuple[Executable, Any, list[Any]]:
        jax = _jax()
        static = self._static_positions(len(args))
        dynamic_args = tuple(a for i, a in enumerate(args) if i not in static)
        dynamic_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        leaves, tree = jax.tree_util.tree_flatten((dynamic_args, dynamic_kwargs))
        static_values = (tuple(args[i] for i in sorted(static)),
                         tuple(sorted((k, v) for k, v in kwargs.items() if k in self.static_argnames)))
        try:
            types = tuple(jax.typeof(leaf) for leaf in leaves)
        except (TypeError, ValueError, OverflowError) as error:
            raise XlapyError(f"jit({self._name}): {error}; arguments are arrays or numbers (or static)") from None
        for leaf in leaves:  # what JAX types but xlapy cannot run: abstract values (jax.ShapeDtypeStruct), tracers
            if isinstance(leaf, jax.core.Tracer):
                raise XlapyError(f"jit({self._name}) is called inside a JAX transformation; xlapy runs concrete "
                                 "arrays only")
            if not isinstance(leaf, (np.ndarray, np.generic, jax.Array, bool, int, float, complex)):
                raise XlapyError(f"jit({self._name}): an argument of type {type(leaf).__name__} is not an array "
                                 "or a number")
        try:
            entry = self._compiled.get((tree, types, static_values))
        except TypeError as error:
            raise XlapyError(f"jit({self._name}): a static argument is not hashable: {error}") from None
        if entry is None:
            lowered = self._lower(jax, args, kwargs)
            module = parse_module(lowered.as_text(dialect="hlo"), source=self._name)
            from xlapy.runtime import compile as compile_module

            entry = (compile_module(module, **self.compile_options), lowered.out_tree)
            self._compiled[(tree, types, static_values)] = entry
        return entry[0], entry[1], leaves

    def _lower(self, jax: Any, args: tuple, kwargs: dict) -> Any:
        """``jax.jit(fun).lower(...)`` for these arguments. JAX's refusals (a function it cannot trace, arguments
        that do not fit it, bad static arguments) and the exceptions ``fun`` itself raises while traced become one
        ``XlapyError`` naming them, the original chained."""
        try:
            return jax.jit(self.fun, keep_unused=True, static_argnums=self.static_argnums,
                           static_argnames=self.static_argnames).lower(*args, **kwargs)
        except Exception as error:  # anything the traced Python code raises is the caller's
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise XlapyError(f"jit({self._name}): JAX cannot lower it for these arguments: "
                             f"{type(error).__name__}: {first_line}") from error

    def _static_positions(self, count: int) -> set[int]:
        positions = set()
        for number in self.static_argnums:
            position = number + count if number < 0 else number
            if 0 <= position < count:
                positions.add(position)
        return positions

    @property
    def _name(self) -> str:
        return getattr(self.fun, "__name__", "function")


def _resolve_static(fun: Callable[..., Any], numbers: tuple[int, ...],
                    names: tuple[str, ...]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Static positions and names completed from each other through ``fun``'s signature, as ``jax.jit`` does,
    so that a static argument is static however it is passed."""
    try:
        parameters = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return numbers, names
    positional = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    by_name = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    more_numbers = [positional.index(n) for n in names if n in positional]
    more_names = [positional[i] for i in numbers if -len(positional) <= i < len(positional)
                  and positional[i] in by_name]
    return (tuple(dict.fromkeys((*numbers, *more_numbers))), tuple(dict.fromkeys((*names, *more_names))))


def jit(fun: Callable[..., Any] | None = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = (), **compile_options: Any) -> Any:
    """``fun`` compiled and run by xlapy, as ``jax.jit(fun)`` by XLA: a ``JitFunction``.

    As a decorator, ``@jit`` or ``@jit(static_argnums=..., dump_to=...)``; the keywords other than
    ``static_argnums`` / ``static_argnames`` (whose meaning is ``jax.jit``'s) go to ``xlapy.compile``
    (``dump_to``, ``disabled_hlo_passes``, ...). Arguments are numpy or JAX arrays (or Python numbers),
    results numpy arrays in the structure ``fun`` returns."""
    numbers = (static_argnums,) if isinstance(static_argnums, int) else _sequence(static_argnums)
    names = (static_argnames,) if isinstance(static_argnames, str) else _sequence(static_argnames)
    if numbers is None or not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
        raise XlapyError(f"jit: static_argnums is an integer or a sequence of integers, got {static_argnums!r}")
    if names is None or not all(isinstance(n, str) for n in names):
        raise XlapyError(f"jit: static_argnames is a string or a sequence of strings, got {static_argnames!r}")
    _check_compile_options(compile_options)

    def wrap(function: Callable[..., Any]) -> JitFunction:
        if not callable(function):
            raise XlapyError(f"jit takes a function, got {type(function).__name__}")
        return JitFunction(function, numbers, names, compile_options)

    return wrap if fun is None else wrap(fun)


def _sequence(value: Any) -> tuple | None:
    try:
        return tuple(value)
    except TypeError:
        return None


# The types of ``xlapy.compile``'s options (``dump_to`` may be any path).
_OPTION_TYPES: dict[str, tuple[type, ...]] = {
    "backend": (str,), "dump_to": (str, os.PathLike, type(None)), "dump_pass_re": (str, type(None)),
    "verify": (bool,), "run_hlo_passes": (bool,),
}


def _check_compile_options(options: dict[str, Any]) -> None:
    """Refuse, when ``jit`` is applied, the keywords ``xlapy.compile`` does not take and values of the wrong type,
    rather than at the first call."""
    from xlapy.runtime import compile as compile_module

    known = [name for name in inspect.signature(compile_module).parameters if name != "module"]
    for name, value in options.items():
        if name not in known:
            raise XlapyError(f"jit: unknown option {name!r}; besides static_argnums and static_argnames, jit takes "
                             f"xlapy.compile's: {', '.join(known)}")
        types = _OPTION_TYPES.get(name)
        if types is not None and not isinstance(value, types):
            raise XlapyError(f"jit: option {name}={value!r} has the wrong type")
    passes = options.get("disabled_hlo_passes", ())
    if isinstance(passes, str) or not _is_sequence_of_strings(passes):
        raise XlapyError(f"jit: disabled_hlo_passes is a sequence of pass names, got {passes!r}")
    progress = options.get("progress")
    if progress is not None and not callable(progress):
        raise XlapyError(f"jit: progress is a function of one string, got {progress!r}")


def _is_sequence_of_strings(value: Any) -> bool:
    try:
        return all(isinstance(item, str) for item in value)
    except TypeError:
        return False
