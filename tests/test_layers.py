"""Imports point down: each layer of tilec imports only the layers below it,
each pass only its own modules and the shared layers, and each dispatch
variant only shared modules, never another variant.

The layers, lowest first:

    compiler/   IR, analyses, layout algebra, planners, the pass manager
    grammar/    the parser (the only user of Lark)
    passes/     one package or module per pass
    runtime/    driver, tensor maps, launch, cache
    pipeline    the default pass list and `compile_source`
    api         `tilec.compile`: pipeline plus runtime and cache
    tools       other top-level modules built on the api (autotune)
    cli         the driver

A module may always import the root package `tilec` (its `__version__`):
the root imports nothing at load time.
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tilec"

MAY_IMPORT = {
    "base": set(),
    "compiler": {"compiler"},
    "grammar": {"compiler", "base"},
    "passes": {"compiler", "grammar"},
    "runtime": {"compiler", "base", "runtime"},
    "pipeline": {"compiler", "grammar", "passes"},
    "api": {"compiler", "base", "pipeline", "runtime"},
    "tools": {"compiler", "base", "pipeline", "runtime", "api", "tools"},
    "cli": {"compiler", "base", "pipeline", "api", "tools"},
    "top": {"api"},
}
"""Layer -> the layers its modules may import (besides its own package,
where a layer is one; `passes` narrows that further)."""

LARK_LAYERS = {"grammar"}


def layer(module: str) -> str:
    parts = module.split(".")
    if parts == ["tilec"]:
        return "top"
    head = parts[1]
    if head in ("compiler", "grammar", "passes", "runtime"):
        return head
    if head in ("pipeline", "api", "cli"):
        return head
    if head in BASE:
        return "base"
    return "tools"


BASE = {"cache_dir"}
"""Top-level leaf modules that any layer may build on: they import no
other part of tilec."""


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, name: str) -> list:
    """(imported module, line, certain) for every import in the file, also
    those inside functions (a lazy import is still a dependency); `from m
    import x` also lists `m.x`, not certain: it is a module only if one
    exists."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, True) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            out.append((target, node.lineno, True))
            out += [(f"{target}.{a.name}", node.lineno, False) for a in node.names]
    return out


def is_variant(path: Path) -> bool:
    """A dispatch variant: a module under `dispatch/<op>/` that registers a
    lowering with `@register(...)`."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                if isinstance(d, ast.Call) and getattr(d.func, "id", None) == "register":
                    return True
    return False


def pass_unit(module: str) -> str:
    """The pass a module of `tilec.passes` belongs to: `tilec.passes.unroll`,
    or the package `tilec.passes.dispatch` for all of dispatch."""
    return ".".join(module.split(".")[:3])


def violations(root: Path) -> list:
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    variants = {
        m for m, p in files.items()
        if m.startswith(f"{root.name}.passes.dispatch.") and m.count(".") == 4 and is_variant(p)
    }
    out = []
    for mod, path in files.items():
        mine = layer(mod)
        for target, line, certain in imports(path, mod):
            if not certain and target not in files:
                continue  # a name, not a module
            where = f"{path.relative_to(root.parent)}:{line}"
            if target.split(".")[0] == "lark" and mine not in LARK_LAYERS:
                out.append(f"{where}: {mod} ({mine}) imports lark")
                continue
            if not (target == root.name or target.startswith(root.name + ".")):
                continue
            if target == root.name:
                continue  # the root package: its __version__
            theirs = layer(target)
            if theirs != mine:
                if theirs not in MAY_IMPORT[mine]:
                    out.append(f"{where}: {mod} ({mine}) imports {target} ({theirs})")
            elif mine == "passes" and pass_unit(target) != pass_unit(mod):
                out.append(f"{where}: pass module {mod} imports {target}, a module of another pass")
            elif mod in variants and target in variants and target != mod:
                out.append(f"{where}: dispatch variant {mod} imports variant {target}")
    return out


def test_imports_point_down():
    assert violations(PACKAGE) == []


def _tree(tmp_path, files: dict) -> Path:
    root = tmp_path / "tilec"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for d in [root, *[p for p in root.rglob("*") if p.is_dir()]]:
        (d / "__init__.py").touch()
    return root


_VARIANT = "from tilec.passes.dispatch import register\n@register('copy')\ndef lower(op, ctx):\n    pass\n"


@pytest.mark.parametrize(
    "files, found",
    [
        ({"compiler/printer.py": "def f():\n    from tilec.grammar.parser import parse\n"},
         "tilec.compiler.printer (compiler) imports tilec.grammar.parser (grammar)"),
        ({"compiler/ir.py": "import lark\n"}, "imports lark"),
        ({"passes/unroll.py": "from tilec.passes.dispatch.registry import NameGen\n"},
         "pass module tilec.passes.unroll imports tilec.passes.dispatch.registry"),
        ({"passes/dispatch/copy/ldst.py": _VARIANT,
          "passes/dispatch/copy/ldsm.py": _VARIANT + "from tilec.passes.dispatch.copy.ldst import lower\n"},
         "dispatch variant tilec.passes.dispatch.copy.ldsm imports variant tilec.passes.dispatch.copy.ldst"),
        ({"runtime/launch.py": "from tilec import pipeline\n", "pipeline.py": ""},
         "tilec.runtime.launch (runtime) imports tilec.pipeline (pipeline)"),
    ],
)
def test_the_check_finds_an_upward_import(tmp_path, files, found):
    (problem,) = violations(_tree(tmp_path, files))
    assert found in problem


def test_shared_dispatch_modules_and_lower_layers_are_allowed(tmp_path):
    root = _tree(tmp_path, {
        "passes/dispatch/copy/ldst.py": _VARIANT + "from tilec.passes.dispatch.copy.operands import f\n",
        "passes/dispatch/copy/operands.py": "from tilec.compiler.fold import fold\ndef f():\n    pass\n",
        "compiler/fold.py": "",
        "pipeline.py": "from tilec.passes.dispatch.copy import ldst\nimport tilec\n",
    })
    assert violations(root) == []


def test_the_tilec_under_test_is_this_trees():
    """The layer rules above read this tree's files; the suite must import the
    same tree, wherever pytest is started (pyproject's `pythonpath`), not a
    tilec installed elsewhere."""
    import tilec

    assert Path(tilec.__file__).resolve().parent == PACKAGE
