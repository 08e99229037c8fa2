"""Reads the sharding facts out of printed Shardy modules, independently of
xlapy's StableHLO frontend, so that Shardy's own output and xlapy's printed
output can be compared text for text.

The reader only understands what it needs: statement boundaries (bracket
depth), regions (a ``{`` that ends its line), result names, block arguments,
and the sharding attributes Shardy prints (``sdy.sharding``,
``sdy.sharding_rule``, the inline shardings of ``sdy.sharding_constraint``,
``sdy.reshard`` and ``sdy.data_flow_edge``, and a manual computation's
``in_shardings``/``out_shardings``).

Values are identified by what computes them, not by their SSA names: Shardy's
pipeline merges identical constant expressions and the MLIR printer then
renumbers every later value, so ``%5`` before propagation may be ``%4`` after
it. A value's key is ``@func arg N`` for a function argument, and otherwise a
digest of its op's name, attributes, types and the keys of its operands
(shardings left out), plus ``#N`` for the N-th result of a multi-result op.
Ops that compute the same thing share a key; ``label`` names the first of
them the way it was printed (``@main %1/r1 %3``: ``%3`` in region 1 of the op
defining ``%1``), for messages."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

_OPEN = "([{"
_CLOSE = ")]}"
_RESULTS = re.compile(r"^(%[\w.$-]+(?::\d+)?(?:\s*,\s*%[\w.$-]+(?::\d+)?)*)\s*=\s*")
_OP_NAME = re.compile(r'^"?([\w.]+)"?')
_RULE = re.compile(r"#sdy\.op_sharding_rule<(?:->|[^>])*>")
_VALUE = re.compile(r"%([\w.$-]+)(#\d+)?")
# '%arg1: type' and '%iterArg = %0' declare a name; '%6 : type' ends an operand list.
_DEFINITION = re.compile(r"(?::(?!:)|\s+=(?!=))")
_TERMINATORS = ("stablehlo.return", "sdy.return", "return", "func.return")
# Continuation lines that MLIR's pretty printers put at bracket depth 0.
_CONTINUATIONS = ("reducer(", "cond {", "cond{")
# A sharding constraint becomes a reshard in Shardy's export: one kind of op for the keys.
_SAME_KIND = {"sdy.reshard": "sdy.sharding_constraint"}


@dataclass
class OpFacts:
    op_name: str
    label: str                               # '@main %1/r1 %3' (the printed SSA path)
    key: str                                 # content key of the op (of its first result when it has one)
    result_keys: list[str]                   # 'KEY', or 'KEY#0', 'KEY#1' for '%1:2'
    shardings: list[str | None]              # per result: '<@mesh, [...]>' or None when none is printed
    rule: str | None                         # '#sdy.op_sharding_rule<...>' or None
    in_shardings: list[str] = field(default_factory=list)  # manual computations only


@dataclass
class FuncFacts:
    name: str
    arg_shardings: list[str | None]
    result_shardings: list[str | None]
    ops: list[OpFacts]                       # every op but terminators, in textual order (regions after their op)


# -- brackets and lists ------------------------------------------------------------

def _skip_string(text: str, i: int) -> int:
    i += 1
    while text[i] != '"':
        i += 2 if text[i] == "\\" else 1
    return i + 1


def matching(text: str, start: int) -> int:
    """Index just past the bracket that closes the one at ``start`` (strings skipped)."""
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch == '"':
            i = _skip_string(text, i)
            continue
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError(f"unbalanced bracket at {start}: {text[start:start + 60]!r}")


def angle_body(text: str, start: int) -> str:
    """The ``<...>`` starting at ``start`` (a sharding: it holds no ``->``)."""
    if text[start] != "<":
        raise ValueError(f"expected '<' at {start}: {text[start:start + 40]!r}")
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch == '"':
            i = _skip_string(text, i)
            continue
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
        i += 1
    raise ValueError(f"unbalanced '<' at {start}: {text[start:start + 60]!r}")


def split_top_level(text: str) -> list[str]:
    """Split at commas outside any (), [], {}, <> (the ``>`` of ``->`` does not close)."""
    parts: list[str] = []
    depth, current, i = 0, [], 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            end = _skip_string(text, i)
            current.append(text[i:end])
            i = end
            continue
        if ch in "([{<":
            depth += 1
        elif ch in ")]}" or (ch == ">" and not (i > 0 and text[i - 1] == "-")):
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
        i += 1
    tail = "".join(current).strip()
    if tail:
        parts.append(tail)
    return parts


def _attr_sharding(text: str) -> str | None:
    """The body of ``sdy.sharding = #sdy.sharding<...>`` in an argument or result."""
    at = text.find("sdy.sharding = #sdy.sharding<")
    return None if at < 0 else angle_body(text, text.index("<", at))


def _sharding_list(text: str, start: int) -> tuple[list[str], int]:
    """The shardings of the ``[<...>, <...>]`` list at ``start``, and where it ends."""
    end = matching(text, start)
    return split_top_level(text[start + 1:end - 1]), end


def _cut(text: str, start: int, end: int) -> str:
    return text[:start] + text[end:]


def _cut_entry(text: str, start: int, end: int) -> str:
    """Remove the attribute-dict entry at [start, end) with one of its separating commas."""
    following = re.compile(r",\s*").match(text, end)
    if following:
        return text[:start] + text[following.end():]
    preceding = re.search(r",\s*$", text[:start])
    return text[:preceding.start() if preceding else start] + text[end:]


# -- statements and regions ----------------------------------------------------------

def _statements(body: str) -> list[str]:
    """Split a region body into op statements (regions stay inside their op)."""
    pieces: list[str] = []
    depth, start, i = 0, 0, 0
    while i < len(body):
        ch = body[i]
        if ch == '"':
            i = _skip_string(body, i)
            continue
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        elif ch == "\n" and depth == 0:
            pieces.append(body[start:i])
            start = i + 1
        i += 1
    pieces.append(body[start:])
    statements: list[str] = []
    for piece in (p.strip() for p in pieces):
        if not piece:
            continue
        if piece.startswith(_CONTINUATIONS) and statements:
            statements[-1] += "\n" + piece
        else:
            statements.append(piece)
    return statements


def _split_regions(statement: str) -> tuple[str, list[str]]:
    """The op's own text (each region replaced by ``{...}``) and its region bodies."""
    own: list[str] = []
    regions: list[str] = []
    i = last = 0
    while i < len(statement):
        ch = statement[i]
        if ch == '"':
            i = _skip_string(statement, i)
            continue
        if ch == "{":
            line_end = statement.find("\n", i)
            if line_end >= 0 and statement[i + 1:line_end].strip() == "":
                end = matching(statement, i)
                own.append(statement[last:i] + "{...}")
                regions.append(statement[i + 1:end - 1])
                i = last = end
                continue
        i += 1
    own.append(statement[last:])
    return "".join(own), regions


def _block_label(region: str) -> tuple[list[str], str]:
    """The argument names of a region's ``^bb0(...):`` label, and the rest of the body."""
    stripped = region.lstrip()
    if not stripped.startswith("^"):
        return [], region
    open_ = stripped.index("(")
    close = matching(stripped, open_)
    names = [_VALUE.match(arg).group(1) for arg in split_top_level(stripped[open_ + 1:close - 1])]
    return names, stripped[stripped.index(":", close) + 1:]


@dataclass
class _Scope:
    names: dict[str, str]
    parent: _Scope | None = None

    def lookup(self, name: str) -> str:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return f"?{name}"  # not defined in the text read (kept distinct, never equal to a key)


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


class _Reader:
    def __init__(self, func: str) -> None:
        self.func = func
        self.ops: list[OpFacts] = []

    def region(self, body: str, path: str, scope: _Scope) -> None:
        for statement in _statements(body):
            if statement.startswith("^"):
                continue
            own, regions = _split_regions(statement)
            op = self.op(own, path, scope)
            if op is None:
                continue
            anchor, op_key, header_args = op
            inner = _Scope(dict(header_args), scope)
            for number, region in enumerate(regions):
                names, rest = _block_label(region)
                region_scope = _Scope({n: f"{op_key}/r{number} arg{k}" for k, n in enumerate(names)}, inner)
                self.region(rest, f"{path}{anchor}/r{number} ", region_scope)

    def op(self, own: str, path: str, scope: _Scope) -> tuple[str, str, dict[str, str]] | None:
        """Record one op; returns its anchor name, its key and the keys of the
        block arguments it declares in its own text."""
        groups: list[tuple[str, int]] = []  # ('%1', 2) for '%1:2 = ', ('%a', 0) for a plain name
        rest = own
        header = _RESULTS.match(own)
        if header:
            for name in (n.strip() for n in header.group(1).split(",")):
                base, _, count = name.partition(":")
                groups.append((base, int(count or 0)))
            rest = own[header.end():]
        op_match = _OP_NAME.match(rest)
        if op_match is None or op_match.group(1) in _TERMINATORS:
            return None
        op_name = op_match.group(1)
        result_count = sum(max(count, 1) for _, count in groups)

        # Shardings are facts, not part of what identifies the op: cut them out of the text.
        shardings: list[str | None] = [None] * result_count
        in_shardings: list[str] = []
        at = rest.find("sdy.sharding = #sdy.sharding_per_value<")
        if at >= 0:
            listed, end = _sharding_list(rest, rest.index("[", at))
            shardings = list(listed)
            rest = _cut_entry(rest, at, end + 1)
        if op_name in ("sdy.sharding_constraint", "sdy.reshard"):
            at = rest.index("<")
            shardings = [angle_body(rest, at)]
            rest = _cut(rest, at, at + len(shardings[0]))
        elif op_name == "sdy.data_flow_edge" and "sharding=<" in rest:
            at = rest.index("sharding=<")
            shardings = [angle_body(rest, at + len("sharding="))]
            rest = _cut(rest, at, at + len("sharding=") + len(shardings[0]))
        elif op_name == "sdy.manual_computation":
            at = rest.index("in_shardings=[")
            in_shardings, end = _sharding_list(rest, at + len("in_shardings="))
            rest = _cut(rest, at, end)
            at = rest.index("out_shardings=[")
            listed, end = _sharding_list(rest, at + len("out_shardings="))
            shardings = list(listed)
            rest = _cut(rest, at, end)
        rule_match = re.search("sdy\\.sharding_rule = " + _RULE.pattern, rest)
        rule = rule_match.group(0).split(" = ", 1)[1] if rule_match else None
        if rule_match:
            rest = _cut_entry(rest, rule_match.start(), rule_match.end())
        rest = re.sub(r"\{\s*\}", "", rest)  # an attribute dict left empty
        rest = re.sub(r"\s+attributes(?=\s*(?:$|[^\s{]))", "", rest)
        rest = re.sub(r"\s+", " ", rest).strip()

        # Names this op declares for its regions (`%iterArg = %0`, `reducer(%arg1: t)`, `(%arg1: t) {`).
        declared: list[str] = []
        for match in _VALUE.finditer(rest):
            if not match.group(2) and _DEFINITION.match(rest, match.end()) and match.group(1) not in declared:
                declared.append(match.group(1))

        def canonical(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in declared:
                return f"$arg{declared.index(name)}"
            return scope.lookup(name) + (match.group(2) or "")

        kind = _SAME_KIND.get(op_name, op_name)
        op_key = f"@{self.func} " + _digest(kind + " " + _VALUE.sub(canonical, rest[len(op_match.group(0)):]))
        if len(groups) == 1:
            # '%0' is the value itself; '%1:2' is used as '%1#0', '%1#1'
            base, count = groups[0]
            scope.names[base[1:]] = op_key
            result_keys = [op_key] if count == 0 else [f"{op_key}#{k}" for k in range(count)]
        else:
            for k, (base, _) in enumerate(groups):
                scope.names[base[1:]] = f"{op_key}#{k}"
            result_keys = [f"{op_key}#{k}" for k in range(len(groups))]
        anchor = groups[0][0] if groups else f"({op_name})"
        self.ops.append(OpFacts(op_name, f"@{self.func} {path}{anchor}", op_key, result_keys, shardings, rule,
                                in_shardings))
        return anchor, op_key, {n: f"{op_key} arg{k}" for k, n in enumerate(declared)}


def _read_func(text: str, start: int) -> tuple[FuncFacts, int]:
    header = re.compile(r"func\.func\s+(?:(?:private|public|nested)\s+)?@([\w.$-]+)\s*").match(text, start)
    if header is None:
        raise ValueError(f"not a function: {text[start:start + 80]!r}")
    name = header.group(1)
    args_open = header.end()
    args_close = matching(text, args_open)
    args = split_top_level(text[args_open + 1:args_close - 1])
    line_end = text.index("\n", args_close)
    signature_rest = text[args_close:line_end]
    results: list[str | None] = []
    arrow = re.match(r"\s*->\s*", signature_rest)
    if arrow:
        j = args_close + arrow.end()
        if text[j] == "(":
            results = [_attr_sharding(r) for r in split_top_level(text[j + 1:matching(text, j) - 1])]
        else:
            results = [None]
    if not signature_rest.rstrip().endswith("{"):
        raise ValueError(f"function @{name} without a body")
    body_open = text.rindex("{", args_close, line_end)
    body_close = matching(text, body_open)
    reader = _Reader(name)
    arg_names = {_VALUE.match(arg).group(1): f"@{name} arg {k}" for k, arg in enumerate(args)}
    reader.region(text[body_open + 1:body_close - 1], "", _Scope(arg_names))
    return FuncFacts(name, [_attr_sharding(a) for a in args], results, reader.ops), body_close


def read_module(text: str) -> dict[str, FuncFacts]:
    """Every ``func.func`` of a printed module, by name."""
    funcs: dict[str, FuncFacts] = {}
    for match in re.finditer(r"^\s*func\.func\b", text, re.MULTILINE):
        facts, _ = _read_func(text, match.start() + match.group(0).index("func.func"))
        funcs[facts.name] = facts
    return funcs


# -- the facts the tests compare -----------------------------------------------------

@dataclass
class Values:
    """Every value's printed sharding (None: none printed) and the name of the
    op defining it, by key; ops that compute the same thing contribute one
    entry each, in textual order."""

    shardings: dict[str, list[str | None]]
    kinds: dict[str, list[str]]              # key -> defining op names ('argument', 'result' for functions)
    labels: dict[str, str]                   # key -> how the first such value was printed
    effects: list[str]                       # sorted names of the ops without results (terminators aside)


def value_shardings(text: str) -> Values:
    """Function arguments and results, op results, and a manual computation's
    in_shardings (``KEY in_shardings[N]``)."""
    values = Values({}, {}, {}, [])

    def add(key: str, kind: str, label: str, sharding: str | None) -> None:
        values.shardings.setdefault(key, []).append(sharding)
        values.kinds.setdefault(key, []).append(kind)
        values.labels.setdefault(key, label)

    for name, func in read_module(text).items():
        for n, sharding in enumerate(func.arg_shardings):
            add(f"@{name} arg {n}", "argument", f"@{name} arg {n}", sharding)
        for n, sharding in enumerate(func.result_shardings):
            add(f"@{name} result {n}", "result", f"@{name} result {n}", sharding)
        for op in func.ops:
            if not op.result_keys:
                values.effects.append(op.op_name)
                continue
            if len(op.shardings) != len(op.result_keys):
                add(f"{op.key} (result count)", op.op_name, f"{op.label} (result count)",
                    f"{len(op.shardings)} shardings for {len(op.result_keys)} results")
            for n, (key, sharding) in enumerate(zip(op.result_keys, op.shardings)):
                add(key, op.op_name, op.label + (f"#{n}" if len(op.result_keys) > 1 else "") + f" ({op.op_name})",
                    sharding)
            for n, sharding in enumerate(op.in_shardings):
                add(f"{op.key} in_shardings[{n}]", op.op_name, f"{op.label} in_shardings[{n}]", sharding)
    values.effects.sort()
    return values


def op_rules(text: str) -> list[OpFacts]:
    """Every op with results, with its printed sharding rule (``op.rule``)."""
    return [op for func in read_module(text).values() for op in func.ops if op.result_keys]
