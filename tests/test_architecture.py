"""The shape docs/architecture.md describes, held against the code.

Imports point down the layers and never in a circle; no module is over 500 lines and no
function over 80 (the first schema's DDL aside); only the store package speaks SQL; one
function builds the LLM client; decisions and turns travel as records. Each rule, broken,
names the file and line that breaks it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# bottom to top: a module may import its own layer and the layers before it
LAYERS = [
    "core",
    "library",
    "llm",
    "store",
    "studies",
    "datasets",
    "runs",
    "classroom",
    "views",
    "cli",
]
TOP = len(LAYERS)  # app_pages/, app.py and the package's entry points
MAX_LINES = 500
SQL = re.compile(
    r"^\s*(select|insert\s+into|update\s+\w+\s+set|delete\s+from|create\s+table)\b", re.I
)


def sources() -> list[Path]:
    files = [*(ROOT / "cogbias").rglob("*.py"), *(ROOT / "app_pages").glob("*.py"), ROOT / "app.py"]
    return sorted(files)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(module: str) -> int:
    parts = module.split(".")
    if parts[0] == "cogbias" and len(parts) > 1 and parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return TOP


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every cogbias import, at module level or inside a function."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names] if base else []
            names = [n if _is_module(n) else base for n in names]
        else:
            continue
        for name in names:
            if name.startswith("cogbias"):
                yield node.lineno, name


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_imports_point_down_the_layers() -> None:
    upward = [
        f"{path.relative_to(ROOT)}:{line}: {module_name(path)} imports {name}"
        for path in sources()
        for line, name in imports(path)
        if layer(name) > layer(module_name(path))
    ]
    assert not upward, "\n".join(upward)


def test_no_two_modules_import_each_other_even_through_others() -> None:
    graph: dict[str, set[str]] = {}
    for path in sources():
        graph[module_name(path)] = {n for _, n in imports(path) if n != module_name(path)}
    # a package's __init__ re-exporting its own modules is not a circle of the code
    for name in graph:
        graph[name] = {n for n in graph[name] if not name.startswith(n + ".")}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not circles, circles


def test_no_module_is_over_500_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}: {n} lines"
        for path in sources()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    ]
    assert not long, long


def nodes_outside_the_store() -> Iterator[tuple[str, ast.AST]]:
    """(file:line, node) for every syntax node of every module outside `cogbias/store/`."""
    store = ROOT / "cogbias" / "store"
    for path in sources():
        if store not in path.parents:
            for node in ast.walk(ast.parse(path.read_text())):
                yield f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}", node


def test_only_the_store_speaks_sql() -> None:
    found = []
    for where, node in nodes_outside_the_store():
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if SQL.match(node.value):
                found.append(f"{where}: SQL text {node.value[:40]!r}")
        elif isinstance(node, ast.Attribute) and node.attr in ("query", "db", "execute"):
            if _on_a_database(node):
                found.append(f"{where}: .{node.attr}")
    assert not found, "\n".join(found)


def _on_a_database(node: ast.Attribute) -> bool:
    """`store.query`, `store.db`, `db.execute`, `conn.execute`: the store's connection used
    from outside (not `args.db`, a URL's `.query` or `executor.execute`)."""
    target = node.value
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    if node.attr == "execute":
        return name in ("db", "conn", "connection", "cursor")
    return "store" in name.lower()


def test_one_place_builds_the_llm_client() -> None:
    factory = ROOT / "cogbias" / "llm" / "factory.py"
    built = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sources()
        if path != factory
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", "")) == "LLMClient"
    ]
    assert not built, built


# A decisions row spelled as a dict has these keys, a study turn these: outside the store a
# decision is a `Decision` and a turn a `Turn` (records.py), so one row has one shape.
ROW_SIGNATURES = {
    "decision": {"instance_id", "control_choice"},
    "turn": {"conversation", "turn", "role"},
}
POSITIONAL_ROW = 20  # a tuple literal this long is a row spelled by position


def _literal_keys(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Dict):
        return {
            k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
        }
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "dict":
        return {k.arg for k in node.keywords if k.arg}
    return set()


def test_decisions_and_turns_travel_as_records_outside_the_store() -> None:
    found = []
    for where, node in nodes_outside_the_store():
        keys = _literal_keys(node)
        found += [f"{where}: a {kind} row built as a dict" for kind, signature
                  in ROW_SIGNATURES.items() if signature <= keys]  # fmt: skip
        if isinstance(node, ast.Tuple) and len(node.elts) >= POSITIONAL_ROW:
            found.append(f"{where}: a row of {len(node.elts)} values by position")
    assert not found, "\n".join(found)


MAX_FUNCTION_LINES = 80
DDL_EXEMPT = {
    ("cogbias/store/migrations.py", "_schema_v1")
}  # the first schema, one statement a table


def test_no_function_is_over_80_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines"
        for path in sources()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (length := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES
        and (path.relative_to(ROOT).as_posix(), node.name) not in DDL_EXEMPT
    ]
    assert not long, "\n".join(long)


KIND_REGISTRY = ROOT / "cogbias" / "runs" / "kinds.py"


def _names_a_kind(node: ast.AST) -> bool:
    """`kind.name`, `run.kind.name`, `x_kind.name`: a kind's name; `<anything>.results` or
    `row["results"]`: the table a kind's results were once told apart by."""
    if isinstance(node, ast.Attribute) and node.attr == "name":
        owner = node.value
        word = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        return word == "kind" or word.endswith("_kind")
    if isinstance(node, ast.Attribute) and node.attr == "results":
        return True
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and node.slice.value == "results"
    )


def test_only_the_kind_registry_tells_kinds_apart_by_name() -> None:
    """A reader asks a run's kind (its read side: page, cells, exports, tables, settings),
    never compares its name or its results table: a new kind then needs no edit elsewhere."""
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}"
        for path in sources()
        if path != KIND_REGISTRY
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Compare)
        and any(isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in node.ops)
        and any(_names_a_kind(side) for side in (node.left, *node.comparators))
    ]
    assert not found, "\n".join(found)
