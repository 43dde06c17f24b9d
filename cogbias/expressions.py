"""A small, safe expression language for derived values and metric parameters.

Test case files are user content, so they are data: this module parses an expression with
`ast` and walks a whitelist of node types. Nothing is ever passed to `eval`, attribute access
is refused, and only a handful of pure functions can be called.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any


class ExpressionError(ValueError):
    """An expression that cannot be parsed or evaluated; `offset` is 0-based in the source."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Not: operator.not_,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "round": round,
    "min": min,
    "max": max,
    "abs": abs,
    "int": int,
    "float": float,
    "str": str,
    "len": len,
}
_MAX_POWER = 1000


def parse_expression(source: str) -> ast.Expression:
    """Parse and check that only allowed constructs are used (no evaluation)."""
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        offset = max((exc.offset or 1) - 1, 0)
        raise ExpressionError(f"cannot parse expression {source!r}: {exc.msg}", offset) from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ExpressionError(
                f"'{type(node).__name__}' is not allowed in expressions "
                "(only arithmetic, comparisons, 'x if c else y', lists, indexing and "
                f"the functions {', '.join(FUNCTIONS)})",
                getattr(node, "col_offset", 0),
            )
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS
        ):
            if isinstance(node.func, ast.Name):
                problem = f"unknown function {node.func.id!r}"
            else:
                problem = "only plain function calls are allowed (no methods or attributes)"
            raise ExpressionError(f"{problem}; allowed: {', '.join(FUNCTIONS)}", node.col_offset)
    return tree


def referenced_names(source: str) -> set[str]:
    """Names an expression reads, so validators can report unknown values before sampling."""
    tree = parse_expression(source)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {
        n.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and id(n) not in called and n.id not in ("True", "False")
    }


def evaluate(source: str, names: Mapping[str, Any]) -> Any:
    """Evaluate `source` with read-only access to `names`."""
    return _eval(parse_expression(source).body, names)


def _eval(node: ast.AST, names: Mapping[str, Any]) -> Any:
    match node:
        case ast.Constant(value=value):
            return value
        case ast.Name(id=name):
            if name in names:
                return names[name]
            raise ExpressionError(f"unknown name {name!r}", node.col_offset)
        case ast.BinOp(left=left, op=op, right=right):
            a, b = _eval(left, names), _eval(right, names)
            if isinstance(op, ast.Pow) and isinstance(b, int | float) and abs(b) > _MAX_POWER:
                raise ExpressionError("exponent too large", node.col_offset)
            try:
                return _BINARY[type(op)](a, b)
            except (TypeError, ZeroDivisionError, ValueError) as exc:
                raise ExpressionError(str(exc), node.col_offset) from None
        case ast.UnaryOp(op=op, operand=operand):
            return _UNARY[type(op)](_eval(operand, names))
        case ast.BoolOp(op=op, values=values):
            result: Any = None
            for value in values:
                result = _eval(value, names)
                if isinstance(op, ast.And) and not result:
                    return result
                if isinstance(op, ast.Or) and result:
                    return result
            return result
        case ast.Compare(left=left, ops=ops, comparators=comparators):
            current = _eval(left, names)
            for op, right in zip(ops, comparators, strict=True):
                other = _eval(right, names)
                if not _COMPARE[type(op)](current, other):
                    return False
                current = other
            return True
        case ast.IfExp(test=test, body=body, orelse=orelse):
            return _eval(body if _eval(test, names) else orelse, names)
        case ast.List(elts=elts) | ast.Tuple(elts=elts):
            return [_eval(e, names) for e in elts]
        case ast.Subscript(value=value, slice=index):
            try:
                return _eval(value, names)[_eval(index, names)]
            except (TypeError, IndexError, KeyError) as exc:
                raise ExpressionError(f"bad index: {exc}", node.col_offset) from None
        case ast.Call(func=ast.Name(id=fname), args=args, keywords=[]):
            try:
                return FUNCTIONS[fname](*[_eval(a, names) for a in args])
            except (TypeError, ValueError) as exc:
                raise ExpressionError(f"{fname}(): {exc}", node.col_offset) from None
    raise ExpressionError(f"'{type(node).__name__}' is not allowed", getattr(node, "col_offset", 0))


_ALLOWED_NODES = (
    ast.Expression,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.List,
    ast.Tuple,
    ast.Subscript,
    ast.Call,
    *_BINARY,
    *_UNARY,
    *_COMPARE,
    ast.And,
    ast.Or,
)
