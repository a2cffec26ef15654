"""The package reads as one: every error drawn in the tree of ``errors.py`` with a code of
its own, no two classes of one name, modules small enough to read in one sitting."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import hookinbox
from hookinbox import errors

PACKAGE = Path(hookinbox.__file__).parent
#: A line of the drawn tree: ``├── Name   code_or_note   ...``.
_DRAWN = re.compile(r"[├└]── (\w+)\s+(\S+)")
_CODE = re.compile(r"[a-z][a-z0-9_]*")


def _classes() -> list[tuple[str, str, ast.ClassDef]]:
    """``(module, class name, node)`` of every class defined in the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(("hookinbox", *path.relative_to(PACKAGE).with_suffix("").parts))
        module = module.removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                found.append((module, node.name, node))
    return found


def _error_classes() -> dict[str, type[errors.HookinboxError]]:
    """Every subclass of HookinboxError the package defines, by name (found in the
    source, then imported from its module)."""
    bases = {
        (module, name): {
            b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
        }
        for module, name, node in _classes()
    }
    names = {"HookinboxError"}
    grew = True
    while grew:
        grew = False
        for (_module, name), of in bases.items():
            if name not in names and of & names:
                names.add(name)
                grew = True
    return {
        name: getattr(importlib.import_module(module), name)
        for (module, name) in bases
        if name in names
    }


def test_every_error_is_drawn_in_the_tree_with_its_code() -> None:
    drawn = dict(_DRAWN.findall(errors.__doc__ or ""))
    found = _error_classes()
    assert sorted(found.keys() - {"HookinboxError"}) == sorted(drawn)
    for name, shown in drawn.items():
        if _CODE.fullmatch(shown):
            assert found[name].code == shown, name


def test_no_two_errors_share_a_code() -> None:
    own = [
        (cls.__dict__["code"], name)
        for name, cls in _error_classes().items()
        if "code" in cls.__dict__
    ]
    codes = [code for code, _ in own]
    assert len(codes) == len(set(codes)), sorted(own)


def test_errors_become_statuses_only_in_http_errors() -> None:
    """An error's status is read in ``http/errors.py`` alone; the endpoint, the API, the
    admin and the spans ask it there."""
    reads = re.compile(r"\b(?:exc|error|err|failure)\.http_status\b")
    found = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).as_posix() not in ("http/errors.py", "errors.py")
        and reads.search(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_no_two_classes_share_a_name() -> None:
    where: dict[str, set[str]] = {}
    for module, name, _node in _classes():
        where.setdefault(name, set()).add(module)
    shared = {name: sorted(modules) for name, modules in where.items() if len(modules) > 1}
    assert shared == {}


def test_no_module_of_the_worker_is_over_400_lines() -> None:
    sizes = {
        path.name: len(path.read_text(encoding="utf-8").splitlines())
        for path in (PACKAGE / "work").glob("*.py")
    }
    assert {name: lines for name, lines in sizes.items() if lines > 400} == {}
