"""The README's code map: one line per module, and no line for a module that is gone."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Folders the map gives one line, as one module per family of the same kind.
FAMILIES = ("byoc/op/kernels/", "byoc/autodiff/rules/")


def _map() -> set[str]:
    text = (ROOT / "README.md").read_text()
    return set(re.findall(r"^\| `([^`]+)` \|", text, flags=re.MULTILINE))


def test_every_module_has_a_line_in_the_code_map():
    listed = _map()
    missing = []
    for top in ("byoc", "backends", "frontends"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if path.name == "__init__.py" and rel != "byoc/__init__.py":
                continue
            if rel.startswith(FAMILIES) or "/vendor/" in rel:
                continue
            if rel not in listed:
                missing.append(rel)
    assert not missing, f"README code map lacks: {missing}"


def test_every_line_of_the_code_map_names_a_file_that_exists():
    gone = [p for p in _map() if "/" in p and not (ROOT / p.rstrip("/")).exists()]
    assert not gone, f"README code map lists what does not exist: {gone}"
