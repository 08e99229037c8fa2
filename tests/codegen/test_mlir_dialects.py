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

from xlapy.codegen import mlir_dialects
from xlapy.codegen.mlir_text import parse_mlir, print_mlir
from xlapy.errors import VerifyError

# Prints, as JSON, a fingerprint of every op and attribute definition of the xDSL dialects codegen loads: the IRDL
# definition, and the code of the methods that parse, print, verify and build. Patching a constraint, a verifier or
# a parser of an xDSL class changes it.
_FINGERPRINT = r"""
import hashlib, json, re, types
from xdsl.dialects import arith, builtin, complex, func, gpu, llvm, math, scf, tensor, vector

def code_text(c):
    consts = [code_text(k) if isinstance(k, types.CodeType) else repr(k) for k in c.co_consts]
    return c.co_code.hex() + repr(consts) + repr(c.co_names)

def code(fn, depth=0):
    fn = getattr(fn, "__func__", fn)
    if not isinstance(fn, types.FunctionType):
        return repr(fn)
    digest = hashlib.sha256(code_text(fn.__code__).encode()).hexdigest()
    cells = [code(c.cell_contents, depth + 1) if callable(c.cell_contents) and depth < 2
             else re.sub(r" at 0x[0-9a-f]+", "", repr(c.cell_contents)) for c in fn.__closure__ or ()]
    return [fn.__module__, fn.__qualname__, digest, cells]

prints = {}
for dialect in (builtin.Builtin, func.Func, arith.Arith, math.Math, complex.Complex, scf.Scf, tensor.Tensor,
                vector.Vector, gpu.GPU, llvm.LLVM):
    for cls in [*dialect.operations, *dialect.attributes]:
        definition = cls.get_irdl_definition() if hasattr(cls, "get_irdl_definition") else None
        methods = ("parse", "print", "verify_", "__init__", "parse_parameters", "print_parameters", "verify")
        prints[f"{cls.__module__}.{cls.__qualname__}"] = [
            re.sub(r" at 0x[0-9a-f]+", "", repr(definition)),
            {name: code(getattr(cls, name)) for name in methods if hasattr(cls, name)},
        ]
print(json.dumps(prints, sort_keys=True))
"""

# Imports every module of xlapy's code generator and runs the CPU pipeline (vectorize-lanes included) and backend
# on a fusion, before the fingerprint is taken.
_USE_XLAPY = r"""
import importlib, pkgutil
import xlapy, xlapy.codegen
for module in pkgutil.walk_packages(xlapy.codegen.__path__, "xlapy.codegen."):
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


def test_xdsl_definitions_are_unchanged_by_xlapy() -> None:
    fresh = _fingerprint("")
    with_xlapy = _fingerprint(_USE_XLAPY)
    assert "xdsl.dialects.arith.CmpfOp" in fresh and "xdsl.dialects.arith.SelectOp" in fresh
    changed = sorted(name for name in fresh if fresh[name] != with_xlapy.get(name))
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


def test_vector_casts_round_trip() -> None:
    module = parse_mlir(_VECTOR_OPS)
    assert print_mlir(module) == _VECTOR_OPS
    assert all(type(op).__module__ == mlir_dialects.__name__ for op in module.walk() if op.name.startswith("arith."))


@pytest.mark.parametrize(("op", "message"), [
    ("%r = arith.extsi %i : vector<4xi32> to vector<4xi16>", "the result must be wider"),
    ("%r = arith.extui %i : vector<4xi32> to vector<8xi64>", "not both scalars or vectors of the same shape"),
    ("%r = arith.trunci %i : vector<4xi32> to vector<4xi32>", "the result must be narrower"),
    ("%r = arith.index_cast %x : vector<4xindex> to vector<4xindex>", "exactly one side must be index"),
    ("%r = arith.sitofp %i : vector<4xi32> to f32", "not both scalars or vectors of the same shape"),
    ("%r = arith.select %b, %i, %i : vector<2xi1>, vector<4xi32>", "not both scalars or vectors of the same shape"),
    ('%r = "arith.cmpi"(%i, %i) <{predicate = 2 : i64}> : (vector<4xi32>, vector<4xi32>) -> i1',
     "must be vector<4xi1>"),
    ('%r = "arith.cmpf"(%f, %g) <{predicate = 2 : i64}> : (vector<4xf32>, vector<8xf32>) -> vector<4xi1>',
     "operands of types"),
])
def test_vector_ops_are_verified(op: str, message: str) -> None:
    text = f"""func.func @f(%f: vector<4xf32>, %g: vector<8xf32>, %i: vector<4xi32>, %x: vector<4xindex>,
             %b: vector<2xi1>) {{
  {op}
  func.return
}}"""
    with pytest.raises(VerifyError, match=message):
        parse_mlir(text)


def test_scalar_ops_keep_xdsls_checks() -> None:
    with pytest.raises(VerifyError):
        parse_mlir("""func.func @f(%i: i32) {
  %r = arith.extsi %i : i32 to i16
  func.return
}""")
