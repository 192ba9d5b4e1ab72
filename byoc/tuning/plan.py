"""The plan file: where each node runs, what was measured, and why (docs/plan-format.md).

    plan = Plan.load("plan.json")        # checked against the schema; PlanError names the field
    plan.save("plan.json")               # written beside, renamed into place
    print(plan.show())                   # the `byoc plan show` table
    plan.data["regions"][0]["backend"]   # the JSON as a dict

``to_json`` is deterministic: keys in schema order, times rounded to the nanosecond, so the same
model and measurements give the same bytes.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..errors import InputError

FORMAT = "byoc-plan"
_MAX_BYTES = 256 << 20
VERSION = 1
HOST = "host"


class PlanError(InputError):
    """A plan file that is not a plan, or not one this byoc reads."""


def seconds(value: float | None) -> float | None:
    """A time as the plan writes it: rounded to the nanosecond (None stays None)."""
    return None if value is None else round(float(value), 9)


class Plan:
    """A placement plan: a dict in the documented schema, checked when made."""

    def __init__(self, data: dict[str, Any], source: str = "plan"):
        check(data, source)
        self.data = data
        self.source = source

    # -- reading and writing -------------------------------------------------------------------
    @classmethod
    def load(cls, where: str | os.PathLike | dict | Plan) -> Plan:
        """A plan from a path, a JSON dict or a Plan."""
        if isinstance(where, Plan):
            return where
        if isinstance(where, dict):
            return cls(where)
        from ..files.reading import read_regular

        path = os.fspath(where)
        try:
            text = read_regular(path, "plan", max_bytes=_MAX_BYTES, error=PlanError).decode()
        except (OSError, UnicodeDecodeError) as exc:
            raise PlanError(f"cannot read the plan {path!r}: {exc}") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise PlanError(f"{path}: not JSON: {exc}") from None
        return cls(data, path)

    def to_json(self) -> str:
        """The plan as text: small objects (a node, a tensor) on one line each, so that a diff
        of two plans shows the nodes that moved."""
        return _dump(self.data, 0) + "\n"

    def save(self, path: str | os.PathLike, *, force: bool = True, protect=()) -> None:
        """Write the plan beside ``path``, then rename it into place (byoc's output rules,
        ``byoc/files/outputs.py``; ``force=False`` refuses to replace a file)."""
        from ..files.outputs import output_file

        with output_file(path, force=force, protect=protect) as tmp:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(self.to_json())

    # -- what people read ----------------------------------------------------------------------
    @property
    def regions(self) -> list[dict]:
        return self.data["regions"]

    @property
    def backends(self) -> list[str]:
        return self.data["backends"]

    @property
    def predicted_s(self) -> float | None:
        return self.data.get("latency", {}).get("predicted_s")

    @property
    def measured_s(self) -> float | None:
        return self.data.get("latency", {}).get("measured_s")

    def placement(self) -> dict[str, str]:
        """Node name -> its backend ("host" for the host)."""
        backend = {r["id"]: r["backend"] for r in self.regions}
        return {n["node"]: backend.get(n["region"], HOST) for n in self.data["nodes"]}

    def show(self, nodes: bool = False) -> str:
        from .show import format_plan

        return format_plan(self.data, nodes=nodes)

    def __repr__(self) -> str:
        return (f"Plan({self.data['model'].get('name') or 'model'}: {len(self.regions)} regions "
                f"on {', '.join(self.backends) or 'the host'})")


def _dump(value: Any, level: int) -> str:
    compact = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, (dict, list)) or not value or level + len(compact) <= 100:
        return compact
    pad = " " * (level + 1)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k, ensure_ascii=False)}: {_dump(v, level + 1)}"
                 for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * level + "}"
    items = [pad + _dump(v, level + 1) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * level + "]"


# -- the schema ---------------------------------------------------------------------------------


def _need(cond: bool, source: str, where: str, what: str) -> None:
    if not cond:
        raise PlanError(f"{source}: {where} {what}")


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def check(data: Any, source: str = "plan") -> None:
    """Raise PlanError naming the first field that does not fit the schema."""
    _need(isinstance(data, dict), source, "the plan", "must be a JSON object")
    _need(data.get("format") == FORMAT, source, '"format"', f'must be "{FORMAT}" (not a plan?)')
    version = data.get("version")
    _need(isinstance(version, int) and not isinstance(version, bool), source, '"version"',
          "must be an integer")
    _need(version <= VERSION, source, '"version"',
          f"is {version}, newer than this byoc reads ({VERSION}): upgrade byoc")
    model = data.get("model")
    _need(isinstance(model, dict), source, '"model"', "must be an object")
    _need(isinstance(model.get("digest"), str), source, '"model.digest"', "must be a string")
    _need(_strings(data.get("backends")), source, '"backends"', "must be a list of names")
    regions = data.get("regions")
    _need(isinstance(regions, list), source, '"regions"', "must be a list")
    ids = set()
    for k, r in enumerate(regions):
        where = f"regions[{k}]"
        _need(isinstance(r, dict), source, f'"{where}"', "must be an object")
        _need(isinstance(r.get("id"), str) and r["id"] != HOST, source, f'"{where}.id"',
              'must be a string other than "host"')
        _need(r["id"] not in ids, source, f'"{where}.id"', f"repeats region {r['id']!r}")
        ids.add(r["id"])
        _need(isinstance(r.get("backend"), str), source, f'"{where}.backend"',
              "must be a string")
        _need(_strings(r.get("nodes")), source, f'"{where}.nodes"',
              "must be a list of node names")
    nodes = data.get("nodes")
    _need(isinstance(nodes, list), source, '"nodes"', "must be a list")
    for k, n in enumerate(nodes):
        where = f"nodes[{k}]"
        _need(isinstance(n, dict), source, f'"{where}"', "must be an object")
        for field in ("node", "op", "fingerprint", "region"):
            _need(isinstance(n.get(field), str), source, f'"{where}.{field}"',
                  "must be a string")
    bodies = data.get("bodies", {})
    _need(isinstance(bodies, dict) and all(_strings(v) for v in bodies.values()), source,
          '"bodies"', "must map control-flow nodes to lists of backends")
