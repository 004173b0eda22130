"""The package's layers and the one direction of imports between them (DESIGN.md, "Package layers").

A module may import its own layer and the layers above it in ``LAYERS``, never one below. Heavy and
presentation libraries each have the layers that may import them. The walk reads every import statement,
function-level ones included, so a lazy import cannot hide a wrong direction.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "runner" / "thinkflow"

# Top to bottom: a layer imports only layers at or above its own position.
LAYERS: list[set[str]] = [
    {"errors", "text", "jsonout", "redaction", "atomic", "workers", "paths", "__init__"},
    {"config"},
    {"model"},
    {"reply"},
    {"prompting"},
    {"tools"},
    {"memory"},
    {"run"},
    {"agent"},
    {"testing"},
    {"serve"},
    {"batch"},
    {"cli"},
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}

# Third-party libraries that only some layers may import (the lazy-import rule keeps `--help` light).
OWNERS: dict[str, set[str]] = {
    "litellm": {"model"},
    "xllamacpp": {"model"},
    "chromadb": {"memory"},
    "sentence_transformers": {"memory"},
    "torch": {"memory"},
    "onnx": {"memory"},
    "onnxruntime": {"memory"},
    "tokenizers": {"memory"},
    "mcp": {"tools", "serve"},
    "ray": {"batch"},
    "opentelemetry": {"run"},
    "click": {"cli"},
    "rich": {"cli"},
    "starlette": {"serve"},
    "uvicorn": {"serve"},
}

# Imports that break the direction today and are being removed (issue 14); the list only shrinks.
KNOWN: set[tuple[str, str]] = set()


def _layer(module: Path) -> str:
    rel = module.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(module: Path) -> list[tuple[int, str]]:
    """``(line, dotted name)`` of every absolute import in ``module`` (relative ones resolved)."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    package = ["thinkflow", *module.relative_to(PACKAGE).parent.parts]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name == "thinkflow":
                found += [(node.lineno, f"thinkflow.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, name))
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_belongs_to_a_layer():
    unknown = sorted({_layer(m) for m in MODULES} - set(RANK))
    assert unknown == [], f"modules outside the declared layers: {unknown}; add the layer to DESIGN.md and LAYERS"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: str(m.relative_to(PACKAGE)))
def test_imports_point_one_way(module: Path):
    own = _layer(module)
    wrong = []
    for line, name in _imports(module):
        parts = name.split(".")
        if parts[0] == "thinkflow" and len(parts) > 1:
            target = parts[1]
            if RANK.get(target, -1) > RANK[own] and (own, target) not in KNOWN:
                wrong.append(f"line {line}: {own} imports {name} (a lower layer)")
        elif parts[0] in OWNERS and own not in OWNERS[parts[0]] and (own, parts[0]) not in KNOWN:
            wrong.append(f"line {line}: {own} imports {parts[0]} (only {sorted(OWNERS[parts[0]])} may)")
    assert wrong == []


def test_known_exceptions_still_exist():
    """An entry in KNOWN that no longer occurs must be deleted, so the list only shrinks."""
    seen = set()
    for module in MODULES:
        own = _layer(module)
        for _, name in _imports(module):
            parts = name.split(".")
            seen.add((own, parts[1] if parts[0] == "thinkflow" and len(parts) > 1 else parts[0]))
    assert KNOWN - seen == set()
