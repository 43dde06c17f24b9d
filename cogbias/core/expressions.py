"""A small, bounded expression language for derived values and metric parameters.

Test case files are user content, so they are data: this module parses an expression with
`ast` and walks a whitelist of node types. Nothing is ever passed to `eval`, attribute access
is refused, and only a handful of pure functions can be called.

Because a file may be hostile, evaluation is *bounded*: every operation checks the types of
its operands and the size of its result before (or, when cheap, right after) computing it,
and a step budget caps the work of one evaluation. Whatever goes wrong surfaces as an
`ExpressionError` with a 0-based offset into the source; no Python error (TypeError,
OverflowError, RecursionError, MemoryError) and no hang can escape. The limits:

- source text at most `MAX_SOURCE` characters, nesting at most `MAX_DEPTH` levels;
- integers at most `MAX_INT_BITS` bits (about 300 decimal digits);
- floats finite (no inf, no nan), integer exponents at most `MAX_EXPONENT`;
- strings at most `MAX_STR` characters; lists at most `MAX_LIST` items, and the total size of
  a value (characters plus items, nested) at most `MAX_SIZE`;
- at most `MAX_STEPS` evaluated nodes per evaluation.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

MAX_SOURCE = 1000
MAX_DEPTH = 50
MAX_INT_BITS = 1024
MAX_EXPONENT = 1000
MAX_STR = 10_000
MAX_LIST = 1_000
MAX_SIZE = 100_000
MAX_STEPS = 10_000


class ExpressionError(ValueError):
    """An expression that cannot be parsed or evaluated; `offset` is 0-based in the source."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


class _Unplaced(ExpressionError):
    """Raised by helpers that do not know the position; the evaluator adds the node's."""


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//"}
_SYMBOL |= {ast.Mod: "%", ast.Pow: "**", ast.USub: "-", ast.UAdd: "+", ast.Not: "not"}
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


def _round(x: Any, ndigits: Any = None) -> Any:
    _need_number(x, "round")
    if ndigits is None:
        return round(x)
    if not _is_int(ndigits) or abs(ndigits) > 30:
        raise _Unplaced("round(): digits must be a whole number between -30 and 30")
    return round(x, ndigits)


def _min_max(pick: Callable[..., Any], name: str) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        items = args[0] if len(args) == 1 and isinstance(args[0], list) else list(args)
        if not items:
            raise _Unplaced(f"{name}() needs at least one value")
        return pick(items)

    return call


def _int(x: Any) -> int:
    if isinstance(x, str) and len(x.strip()) > 400:
        raise _Unplaced("int(): the text is too long to be a number")
    return int(x)


def _float(x: Any) -> float:
    if _is_int(x) and x.bit_length() > 1023:
        raise _Unplaced("float(): the integer is too large for a float")
    if isinstance(x, str) and len(x.strip()) > 400:
        raise _Unplaced("float(): the text is too long to be a number")
    return float(x)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "round": _round,
    "min": _min_max(min, "min"),
    "max": _min_max(max, "max"),
    "abs": abs,
    "int": _int,
    "float": _float,
    "str": str,
    "len": len,
}
_VALUE_TYPES = (bool, int, float, str, list)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _need_number(x: Any, what: str) -> None:
    if not isinstance(x, int | float):
        raise _Unplaced(f"{what}() needs a number, not {_type_name(x)}")


def _type_name(x: Any) -> str:
    names = {bool: "true/false", int: "a whole number", float: "a number", str: "text"}
    return names.get(type(x), "a list" if isinstance(x, list) else type(x).__name__)


# --------------------------------------------------------------------------- parsing


def parse_expression(source: str) -> ast.Expression:
    """Parse and check that only allowed constructs are used (no evaluation)."""
    if not isinstance(source, str):
        raise ExpressionError(f"an expression must be text, not {_type_name(source)}")
    return _parse(source)


@functools.lru_cache(maxsize=4096)
def _parse(source: str) -> ast.Expression:
    """Cached: a run evaluates the same few expressions thousands of times; the tree is
    never modified after parsing, so sharing it is safe."""
    if len(source) > MAX_SOURCE:
        raise ExpressionError(f"expression is longer than {MAX_SOURCE} characters")
    stripped = source.strip()
    lead = len(source) - len(source.lstrip())
    try:
        tree = ast.parse(stripped, mode="eval")
    except SyntaxError as exc:
        offset = lead + max((exc.offset or 1) - 1, 0)
        raise ExpressionError(f"cannot parse expression {source!r}: {exc.msg}", offset) from None
    except (RecursionError, MemoryError, ValueError):
        raise ExpressionError("expression is nested too deeply", lead) from None
    _check_tree(tree, lead)
    return tree


def _check_tree(tree: ast.Expression, lead: int) -> None:
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        where = lead + getattr(node, "col_offset", 0)
        if depth > MAX_DEPTH:
            raise ExpressionError(f"expression is nested more than {MAX_DEPTH} levels deep", where)
        if not isinstance(node, _ALLOWED_NODES):
            raise ExpressionError(
                f"'{type(node).__name__}' is not allowed in expressions "
                "(only arithmetic, comparisons, 'x if c else y', lists, indexing and "
                f"the functions {', '.join(FUNCTIONS)})",
                where,
            )
        if isinstance(node, ast.Constant) and not isinstance(node.value, _VALUE_TYPES):
            raise ExpressionError(f"the constant {node.value!r} is not allowed", where)
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS):
                if isinstance(node.func, ast.Name):
                    problem = f"unknown function {node.func.id!r}"
                else:
                    problem = "only plain function calls are allowed (no methods or attributes)"
                raise ExpressionError(f"{problem}; allowed: {', '.join(FUNCTIONS)}", where)
            if node.keywords:
                raise ExpressionError("keyword arguments are not allowed", where)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def referenced_names(source: str) -> set[str]:
    """Names an expression reads, so validators can report unknown values before sampling."""
    tree = parse_expression(source)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {
        n.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and id(n) not in called and n.id not in ("True", "False")
    }


# --------------------------------------------------------------------------- evaluation


def evaluate(source: str, names: Mapping[str, Any]) -> Any:
    """Evaluate `source` with read-only access to `names`; raises only ExpressionError."""
    tree = parse_expression(source)
    lead = len(source) - len(source.lstrip())
    evaluator = _Evaluator(names, lead)
    try:
        return evaluator.eval(tree.body)
    except ExpressionError:
        raise
    except (ArithmeticError, TypeError, ValueError, LookupError) as exc:  # belt and braces
        raise ExpressionError(str(exc), evaluator.where) from None
    except (RecursionError, MemoryError):
        raise ExpressionError(
            "expression needs too much memory or depth", evaluator.where
        ) from None


class _Evaluator:
    def __init__(self, names: Mapping[str, Any], lead: int) -> None:
        self.names = names
        self.lead = lead
        self.steps = 0
        self.where = lead

    def fail(self, message: str, node: ast.AST) -> ExpressionError:
        return ExpressionError(message, self.lead + getattr(node, "col_offset", 0))

    def eval(self, node: ast.AST) -> Any:
        self.steps += 1
        self.where = self.lead + getattr(node, "col_offset", 0)
        if self.steps > MAX_STEPS:
            raise self.fail(f"expression takes more than {MAX_STEPS} steps", node)
        try:
            value = self._eval(node)
        except _Unplaced as exc:
            raise self.fail(exc.message, node) from None
        except ExpressionError:
            raise
        except ZeroDivisionError:
            raise self.fail("division by zero", node) from None
        except OverflowError:
            raise self.fail("the result is too large", node) from None
        except (ArithmeticError, TypeError, ValueError, LookupError) as exc:
            raise self.fail(str(exc), node) from None
        return self.bounded(value, node)

    def bounded(self, value: Any, node: ast.AST) -> Any:
        """Refuse results that are too large or not finite (checked after every step)."""
        if isinstance(value, bool):
            return value
        if isinstance(value, int):
            if value.bit_length() > MAX_INT_BITS:
                raise self.fail(f"the result is a whole number larger than 2**{MAX_INT_BITS}", node)
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise self.fail(f"the result is not a finite number ({value})", node)
        elif isinstance(value, str):
            if len(value) > MAX_STR:
                raise self.fail(f"the result is text longer than {MAX_STR} characters", node)
        elif isinstance(value, list):
            _check_size(value, self.fail, node)
        elif isinstance(value, complex):
            raise self.fail("the result is not a real number", node)
        return value

    def _eval(self, node: ast.AST) -> Any:
        match node:
            case ast.Constant(value=value):
                return value
            case ast.Name(id=name):
                if name in self.names:
                    return self.names[name]
                if name in ("True", "False"):
                    return name == "True"
                raise self.fail(f"unknown name {name!r}", node)
            case ast.BinOp(left=left, op=op, right=right):
                a, b = self.eval(left), self.eval(right)
                _check_binary(op, a, b)
                return _BINARY[type(op)](a, b)
            case ast.UnaryOp(op=op, operand=operand):
                value = self.eval(operand)
                if not isinstance(op, ast.Not) and not isinstance(value, int | float):
                    raise self.fail(
                        f"'{_SYMBOL[type(op)]}' needs a number, not {_type_name(value)}", node
                    )
                return _UNARY[type(op)](value)
            case ast.BoolOp(op=op, values=values):
                result: Any = None
                for value in values:
                    result = self.eval(value)
                    if isinstance(op, ast.And) and not result:
                        return result
                    if isinstance(op, ast.Or) and result:
                        return result
                return result
            case ast.Compare(left=left, ops=ops, comparators=comparators):
                current = self.eval(left)
                for op, right in zip(ops, comparators, strict=True):
                    other = self.eval(right)
                    _check_compare(op, current, other)
                    if not _COMPARE[type(op)](current, other):
                        return False
                    current = other
                return True
            case ast.IfExp(test=test, body=body, orelse=orelse):
                return self.eval(body if self.eval(test) else orelse)
            case ast.List(elts=elts) | ast.Tuple(elts=elts):
                return [self.eval(e) for e in elts]
            case ast.Subscript(value=value, slice=index):
                container, key = self.eval(value), self.eval(index)
                if isinstance(container, list | str) and not _is_int(key):
                    raise self.fail(f"an index must be a whole number, not {_type_name(key)}", node)
                try:
                    return container[key]
                except (TypeError, IndexError, KeyError) as exc:
                    raise self.fail(f"bad index: {exc}", node) from None
            case ast.Call(func=ast.Name(id=fname), args=args):
                values = [self.eval(a) for a in args]
                try:
                    return FUNCTIONS[fname](*values)
                except ExpressionError:
                    raise
                except (TypeError, ValueError, ArithmeticError) as exc:
                    raise self.fail(f"{fname}(): {exc}", node) from None
        raise self.fail(f"'{type(node).__name__}' is not allowed", node)


def _check_binary(op: ast.operator, a: Any, b: Any) -> None:
    """Refuse mixed types and predict the size of results that could explode."""
    symbol = _SYMBOL[type(op)]
    numbers = isinstance(a, int | float) and isinstance(b, int | float)
    if isinstance(op, ast.Pow):
        if not numbers:
            raise _Unplaced(f"'**' needs numbers, not {_type_name(a)} and {_type_name(b)}")
        if abs(b) > MAX_EXPONENT:
            raise _Unplaced(f"exponent {b} is larger than {MAX_EXPONENT}")
        if _is_int(a) and _is_int(b) and b > 0 and (abs(a).bit_length() - 1) * b > MAX_INT_BITS:
            raise _Unplaced(f"the result would be larger than 2**{MAX_INT_BITS}")
        return
    if isinstance(op, ast.Mult) and not numbers:
        seq, times = (a, b) if isinstance(a, str | list) else (b, a)
        if not isinstance(seq, str | list) or not _is_int(times):
            raise _Unplaced(f"cannot multiply {_type_name(a)} by {_type_name(b)}")
        limit = MAX_STR if isinstance(seq, str) else MAX_LIST
        if len(seq) * max(times, 0) > limit:
            raise _Unplaced(f"the result would be longer than {limit}")
        return
    if isinstance(op, ast.Add) and not numbers:
        if not (isinstance(a, str) and isinstance(b, str)) and not (
            isinstance(a, list) and isinstance(b, list)
        ):
            raise _Unplaced(f"cannot add {_type_name(a)} and {_type_name(b)}")
        return
    if not numbers:
        if isinstance(op, ast.Mod) and isinstance(a, str):
            raise _Unplaced("'%' formatting of text is not supported")
        raise _Unplaced(f"'{symbol}' needs numbers, not {_type_name(a)} and {_type_name(b)}")


def _check_compare(op: ast.cmpop, a: Any, b: Any) -> None:
    if isinstance(op, ast.In | ast.NotIn):
        if isinstance(b, str) and not isinstance(a, str):
            raise _Unplaced(f"'in' text needs text on the left, not {_type_name(a)}")
        if not isinstance(b, str | list):
            raise _Unplaced(f"'in' needs text or a list on the right, not {_type_name(b)}")
        return
    if isinstance(op, ast.Eq | ast.NotEq):
        return
    same = (isinstance(a, int | float) and isinstance(b, int | float)) or type(a) is type(b)
    if not same:
        raise _Unplaced(f"cannot compare {_type_name(a)} with {_type_name(b)}")


def _check_size(
    value: list[Any], fail: Callable[[str, ast.AST], ExpressionError], node: ast.AST
) -> None:
    """Total characters and items in a (possibly nested) list, stopping at the limit."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            if len(item) > MAX_LIST:
                raise fail(f"the result is a list of more than {MAX_LIST} items", node)
            total += len(item)
            stack.extend(item)
        elif isinstance(item, str):
            total += len(item)
        else:
            total += 1
        if total > MAX_SIZE:
            raise fail(f"the result is larger than {MAX_SIZE} items and characters", node)


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
