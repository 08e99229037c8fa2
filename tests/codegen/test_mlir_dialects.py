"""xlapy's arith ops on vectors are its own classes: xDSL's definitions stay as xDSL ships them, in every process
that imports xlapy, and xDSL's scalar-only ops keep refusing vectors; xlapy's accept what MLIR's arith dialect
accepts (MLIR's `ArithOps.td`: these ops are elementwise on vectors) and refuse what it refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, IndexType, VectorType, f32, i1, i32, i64
from xdsl.dialects.func import Func
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError as XdslParseError
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from tools.oracles import require_jax
from xlapy.codegen import mlir_dialects
from xlapy.codegen.mlir_text import parse_mlir, print_mlir
from xlapy.errors import VerifyError

# Prints, as JSON, a fingerprint of every xDSL module this process has imported: for each module, what every name
# of its namespace is bound to (a function or class by its module, qualified name and code, other values by their
# type and repr); for each class a module defines, the same of every entry of its __dict__ (nested classes
# included). Replacing or adding a method, a constraint, a verifier, a parser or a module attribute of xDSL, or
# swapping a function's code in place, changes it. Object addresses are left out of reprs.
_FINGERPRINT = r"""
import hashlib, json, re, sys, types

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def code_text(code):
    consts = [code_text(k) if isinstance(k, types.CodeType) else repr(k) for k in code.co_consts]
    return code.co_code.hex() + repr(consts) + repr(code.co_names) + code.co_qualname


def describe(value, depth=0):
    if isinstance(value, (classmethod, staticmethod)):
        return [type(value).__name__, describe(value.__func__, depth)]
    if isinstance(value, property):
        return ["property", *(describe(f, depth) for f in (value.fget, value.fset, value.fdel))]
    if isinstance(value, types.FunctionType):
        cells = [describe(c.cell_contents, depth + 1) if depth < 2 else "cell" for c in value.__closure__ or ()]
        return ["function", value.__module__, value.__qualname__,
                hashlib.sha256(code_text(value.__code__).encode()).hexdigest(),
                _ADDRESS.sub("", repr(value.__defaults__)), _ADDRESS.sub("", repr(value.__kwdefaults__)), cells]
    if isinstance(value, type):
        return ["class", value.__module__, value.__qualname__]
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
    if isinstance(value, (str, int, float, bool, bytes, type(None))):
        return repr(value)
    return [type(value).__module__, type(value).__qualname__, _ADDRESS.sub("", repr(value))]


def class_print(cls, seen):
    entries = {}
    for name, value in vars(cls).items():
        if name in ("__dict__", "__weakref__", "__doc__"):
            continue
        if isinstance(value, type) and value.__qualname__.startswith(cls.__qualname__ + ".") and value not in seen:
            seen.add(value)
            entries[name] = ["nested", class_print(value, seen)]
        else:
            entries[name] = describe(value)
    return [cls.__qualname__, [f"{b.__module__}.{b.__qualname__}" for b in cls.__bases__], entries]


prints = {}
for module_name in sorted(n for n in sys.modules if n == "xdsl" or n.startswith("xdsl.")):
    module = sys.modules[module_name]
    namespace = {}
    for name, value in vars(module).items():
        if name in ("__builtins__", "__loader__", "__spec__", "__cached__", "__file__", "__path__", "__doc__"):
            continue
        if isinstance(value, type) and value.__module__ == module_name:
            prints[f"{module_name}.{value.__qualname__}"] = class_print(value, {value})
        namespace[name] = describe(value)
    prints[module_name] = {"module": namespace}
print(json.dumps(prints, sort_keys=True, default=repr))
"""

# Imports every module of xlapy (but the command line's __main__) and runs the CPU pipeline (vectorize-lanes
# included) and backend on a fusion, before the fingerprint is taken.
_USE_XLAPY = r"""
import importlib, pkgutil
import xlapy
for module in pkgutil.walk_packages(xlapy.__path__, "xlapy."):
    if not module.name.endswith(".__main__"):
        importlib.import_module(module.name)
from xlapy.codegen.launch import Device
from xlapy.codegen.pipeline import lower_fusion
from xlapy.codegen.backends.cpu import compile_kernel
hlo = xlapy.parse_hlo('''HloModule m
f {
  p = f32[64] parameter(0)
  zero = f32[] constant(0)
  b = f32[64] broadcast(zero), dimensions={}
  c = pred[64] compare(p, b), direction=LT
  i = s32[64] convert(p)
  e = s64[64] convert(i)
  back = f32[64] convert(e)
  ROOT s = f32[64] select(c, back, p)
}
ENTRY e {
  p = f32[64] parameter(0)
  ROOT r = f32[64] fusion(p), kind=kLoop, calls=f
}''')
fusion = next(i for i in hlo.entry.instructions if i.opcode == "fusion")
lowered = lower_fusion(fusion, Device.host())
assert "vector<" in str(lowered.module), "the CPU pipeline made no vector ops"
compile_kernel(lowered.module)
"""


def _fingerprint(prelude: str) -> dict:
    environment = {**os.environ, "PYTHONHASHSEED": "0"}
    completed = subprocess.run([sys.executable, "-c", prelude + _FINGERPRINT], capture_output=True, text=True,
                               env=environment, timeout=300, check=False)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_xdsl_is_unchanged_by_xlapy() -> None:
    with_xlapy = _fingerprint(_USE_XLAPY)
    # A process without xlapy imports the same xDSL modules.
    modules = sorted(name for name, entry in with_xlapy.items() if isinstance(entry, dict))
    fresh = _fingerprint(f"import importlib\nfor name in {modules!r}:\n    importlib.import_module(name)\n")
    assert "xdsl.dialects.arith.CmpfOp" in fresh and "xdsl.irdl.constraints.BaseAttr" in fresh
    assert sorted(fresh) == sorted(with_xlapy)
    changed = sorted(name for name in fresh if fresh[name] != with_xlapy[name])
    assert changed == []


def _vector(element, lanes: int = 4):
    return create_ssa_value(VectorType(element, [lanes]))


@pytest.mark.parametrize("make", [
    lambda: arith.ExtSIOp(_vector(i32), VectorType(i64, [4])),
    lambda: arith.TruncIOp(_vector(i64), VectorType(i32, [4])),
    lambda: arith.IndexCastOp(_vector(IndexType()), VectorType(i64, [4])),
    lambda: arith.SIToFPOp(_vector(i32), VectorType(f32, [4])),
    lambda: arith.FPToSIOp(_vector(f32), VectorType(i32, [4])),
    lambda: arith.SelectOp(_vector(i1), _vector(f32), _vector(f32)),
])
def test_xdsl_scalar_only_ops_still_refuse_vectors(make) -> None:
    import xlapy.codegen.pipeline  # noqa: F401  (everything codegen imports)

    with pytest.raises(VerifyException):
        make().verify()


def test_xdsl_context_still_refuses_a_vector_select() -> None:
    import xlapy.codegen.pipeline  # noqa: F401

    context = Context()
    for dialect in (Builtin, Func, Arith):
        context.load_dialect(dialect)
    text = """func.func @f(%c: vector<4xi1>, %a: vector<4xf32>) -> vector<4xf32> {
  %0 = arith.select %c, %a, %a : vector<4xi1>, vector<4xf32>
  func.return %0 : vector<4xf32>
}"""
    with pytest.raises((XdslParseError, VerifyException)):
        Parser(context, text).parse_module().verify()


def test_xlapy_classes_are_xdsls_with_vectors() -> None:
    # Code matching xDSL's classes (passes, xDSL's canonicalization patterns) matches xlapy's too.
    for xdsl_class in (arith.CmpfOp, arith.CmpiOp, arith.SelectOp, arith.ExtSIOp, arith.ExtUIOp, arith.TruncIOp,
                       arith.FPToSIOp, arith.FPToUIOp, arith.SIToFPOp, arith.UIToFPOp, arith.IndexCastOp):
        xlapy_class = mlir_dialects.vector_form(xdsl_class)
        assert xlapy_class is not xdsl_class and issubclass(xlapy_class, xdsl_class)
        assert xlapy_class.name == xdsl_class.name
    assert mlir_dialects.vector_form(arith.AddfOp) is arith.AddfOp  # already elementwise in xDSL


def test_vector_ops_built_in_python() -> None:
    compare = mlir_dialects.CmpfOp(_vector(f32), _vector(f32), "olt")
    assert compare.result.type == VectorType(i1, [4])
    assert mlir_dialects.CmpiOp(_vector(i32), _vector(i32), "slt").result.type == VectorType(i1, [4])
    assert mlir_dialects.CmpiOp(create_ssa_value(IndexType()), create_ssa_value(IndexType()), 2).result.type == i1
    select = mlir_dialects.SelectOp(compare.result, _vector(f32), _vector(f32))
    for op in (compare, select, mlir_dialects.ExtSIOp(_vector(i32), VectorType(i64, [4])),
               mlir_dialects.IndexCastOp(_vector(IndexType()), VectorType(i64, [4]))):
        op.verify()


# The casts and compares on vectors as MLIR prints them (MLIR's arith dialect: elementwise on vectors).
_VECTOR_OPS = """builtin.module {
  func.func @f(%f: vector<4xf32>, %i: vector<4xi32>, %x: vector<4xindex>, %b: vector<4xi1>) -> vector<4xf32> {
    %0 = arith.extsi %i : vector<4xi32> to vector<4xi64>
    %1 = arith.extui %i : vector<4xi32> to vector<4xi64>
    %2 = arith.trunci %0 : vector<4xi64> to vector<4xi8>
    %3 = arith.fptosi %f : vector<4xf32> to vector<4xi32>
    %4 = arith.fptoui %f : vector<4xf32> to vector<4xi32>
    %5 = arith.sitofp %i : vector<4xi32> to vector<4xf32>
    %6 = arith.uitofp %i : vector<4xi32> to vector<4xf32>
    %7 = arith.index_cast %x : vector<4xindex> to vector<4xi64>
    %8 = arith.index_cast %0 : vector<4xi64> to vector<4xindex>
    %9 = arith.cmpi ult, %x, %8 : vector<4xindex>
    %10 = arith.select %9, %5, %6 : vector<4xi1>, vector<4xf32>
    func.return %10 : vector<4xf32>
  }
}
"""


def _mlir_refusal(text: str) -> str | None:
    """None where MLIR itself (jaxlib's, with its arith and vector dialects) parses and verifies ``text``; its
    diagnostic, whitespace collapsed, where it refuses it."""
    require_jax()
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context():
        try:
            ir.Module.parse(text)
        except ir.MLIRError as error:
            return " ".join(str(error).split())
    return None


def _mlir_print(text: str) -> str:
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context():
        return str(ir.Module.parse(text))


def test_vector_casts_round_trip() -> None:
    assert _mlir_refusal(_VECTOR_OPS) is None
    module = parse_mlir(_VECTOR_OPS)
    assert print_mlir(module) == _VECTOR_OPS
    assert all(type(op).__module__ == mlir_dialects.__name__ for op in module.walk() if op.name.startswith("arith."))
    # What xlapy prints is the same module for MLIR too.
    assert _mlir_print(print_mlir(module)) == _mlir_print(_VECTOR_OPS)


# Each op with xlapy's reason for refusing it and MLIR's (jaxlib's arith dialect).
@pytest.mark.parametrize(("op", "message", "mlir_message"), [
    ("%r = arith.extsi %i : vector<4xi32> to vector<4xi16>", "the result must be wider",
     "'arith.extsi' op operand type 'vector<4xi32>' and result type 'vector<4xi16>' are cast incompatible"),
    ("%r = arith.extui %i : vector<4xi32> to vector<8xi64>", "not both scalars or vectors of the same shape",
     "'arith.extui' op requires the same shape for all operands and results"),
    ("%r = arith.trunci %i : vector<4xi32> to vector<4xi32>", "the result must be narrower",
     "'arith.trunci' op operand type 'vector<4xi32>' and result type 'vector<4xi32>' are cast incompatible"),
    ("%r = arith.index_cast %x : vector<4xindex> to vector<4xindex>", "exactly one side must be index",
     "'arith.index_cast' op operand type 'vector<4xindex>' and result type 'vector<4xindex>' are cast incompatible"),
    ("%r = arith.sitofp %i : vector<4xi32> to f32", "not both scalars or vectors of the same shape",
     "'arith.sitofp' op requires the same shape for all operands and results"),
    ("%r = arith.select %b, %i, %i : vector<2xi1>, vector<4xi32>", "not both scalars or vectors of the same shape",
     "'arith.select' op failed to verify that condition is signless i1 or has matching shape"),
    ('%r = "arith.cmpi"(%i, %i) <{predicate = 2 : i64}> : (vector<4xi32>, vector<4xi32>) -> i1',
     "must be vector<4xi1>",
     "'arith.cmpi' op failed to verify that result type has i1 element type and same shape as operands"),
    ('%r = "arith.cmpf"(%f, %g) <{predicate = 2 : i64}> : (vector<4xf32>, vector<8xf32>) -> vector<4xi1>',
     "operands of types", "'arith.cmpf' op requires all operands to have the same type"),
])
def test_vector_ops_are_verified(op: str, message: str, mlir_message: str) -> None:
    text = f"""func.func @f(%f: vector<4xf32>, %g: vector<8xf32>, %i: vector<4xi32>, %x: vector<4xindex>,
             %b: vector<2xi1>) {{
  {op}
  func.return
}}"""
    refusal = _mlir_refusal(text)
    assert refusal is not None and mlir_message in refusal, refusal
    with pytest.raises(VerifyError, match=message):
        parse_mlir(text)


def test_scalar_ops_keep_xdsls_checks() -> None:
    text = """func.func @f(%i: i32) {
  %r = arith.extsi %i : i32 to i16
  func.return
}"""
    refusal = _mlir_refusal(text)
    assert refusal is not None and "'arith.extsi' op operand type 'i32' and result type 'i16' are cast incompatible" \
        in refusal, refusal
    with pytest.raises(VerifyError):
        parse_mlir(text)
