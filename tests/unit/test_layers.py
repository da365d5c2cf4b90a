"""Packages depend downward only (STYLE.md, issue 15): formats and the helpers below them, then the checkpoint
model, then audit and state (siblings), then repair / migrate / spark actions, then the API and renderers, then
the CLI. An import that goes up a layer, a private name (``_x``) imported from another package, or a cycle
between packages fails here, naming the file."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "ckptfix"
LAYER = {
    "errors": 0,
    "layout": 0,
    "storage": 0,
    "progress": 0,
    "formats": 0,
    "checkpoint": 1,
    "stores": 1,
    "sinks": 1,
    "audit": 2,
    "state": 2,
    "inspect": 2,
    "offsets_export": 2,
    "advise": 2,
    "repair": 3,
    "migrate": 3,
    "spark": 3,
    "api": 4,
    "render": 4,
    "cli": 5,
    "__main__": 5,
    "__init__": 5,
}


def imports() -> list[tuple[Path, str, str, str]]:
    """(file, importing package, imported package, imported name) for every ckptfix import."""
    out = []
    for f in sorted(ROOT.rglob("*.py")):
        top = f.relative_to(ROOT).with_suffix("").parts[0]
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ckptfix":
                parts = node.module.split(".")
                for alias in node.names:
                    target = parts[1] if len(parts) > 1 else alias.name
                    out.append((f, top, target, alias.name if len(parts) > 1 else ""))
            elif isinstance(node, ast.Import):
                out += [(f, top, a.name.split(".")[1], "") for a in node.names if a.name.startswith("ckptfix.")]
    return out


def test_every_package_has_a_layer() -> None:
    tops = {f.relative_to(ROOT).with_suffix("").parts[0] for f in ROOT.rglob("*.py")}
    assert tops <= set(LAYER), sorted(tops - set(LAYER))


def test_no_upward_import() -> None:
    up = [f"{f}: {src} imports {dst}" for f, src, dst, _ in imports() if LAYER.get(dst, 0) > LAYER[src]]
    assert not up, up


def test_no_private_name_across_packages() -> None:
    private = [
        f"{f}: {name} from {dst}"
        for f, src, dst, name in imports()
        if src != dst and name.startswith("_") and not name.startswith("__")
    ]
    assert not private, private


def test_no_cycle_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for _, src, dst, _ in imports():
        if src != dst:
            graph[src].add(dst)

    def reaches(a: str, b: str, seen: set[str]) -> bool:
        return any(n == b or (n not in seen and reaches(n, b, seen | {n})) for n in graph[a])

    cycles = sorted(f"{a} <-> {b}" for a in list(graph) for b in graph[a] if a < b and reaches(b, a, {b}))
    assert not cycles, cycles


def test_every_ckptfix_exception_is_defined_in_errors_py() -> None:
    """Issue 12: one module holds every exception ckptfix raises on purpose (a class deriving from one of
    errors.py's); private helper exceptions that never leave their module (a ValueError subclass) may stay."""
    import ckptfix.errors as errors

    ours = {name for name, v in vars(errors).items() if isinstance(v, type) and issubclass(v, Exception)}
    elsewhere = []
    for f in sorted(ROOT.rglob("*.py")):
        if f.name == "errors.py" and f.parent == ROOT:
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if bases & ours:
                    elsewhere.append(f"{f.relative_to(ROOT)}: {node.name}")
    assert len(ours) > 20
    assert not elsewhere, elsewhere
