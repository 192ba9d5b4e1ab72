"""``byoc info``: opset, op histogram, inputs and outputs."""

from __future__ import annotations

import json
from collections import Counter

from .common import load_model, model_arg, show


def cmd_info(args) -> int:
    from ..ir import Call, Function, post_order

    path, mod = load_model(args)
    ops: Counter[str] = Counter()
    stack = [mod.main]
    while stack:
        func = stack.pop()
        for e in post_order(func.body):
            if isinstance(e, Call):
                ops[e.op_name] += 1
                stack.extend(v for v in e.attrs.values() if isinstance(v, Function))
    opsets = mod.attrs.get("opset_imports", {})  # as byoc runs the model
    declared = mod.attrs.get("declared_opsets", opsets)  # as the file says
    info = {
        "model": path,
        "opset": opsets.get("", None),
        "opset_imports": opsets,
        "declared_opset": declared.get("", None),
        "declared_opset_imports": declared,
        "nodes": sum(ops.values()),
        "ops": dict(ops.most_common()),
        "inputs": {p.name: str(p.type) for p in mod.main.params},
        "outputs": {},
    }
    body = mod.main.body
    outs = list(getattr(body, "fields", None) or [body]) if len(mod.main.attrs["output_names"]) > 1 else [body]
    for name, e in zip(mod.main.attrs["output_names"], outs):
        info["outputs"][name] = str(e.type)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"model   {show(path)}")
    print(f"opset   declared {_opsets(declared)}")
    print(f"        {_runs_at(declared.get(''), opsets.get(''))}")
    print(f"nodes   {info['nodes']}")
    print("inputs")
    for p in mod.main.params:
        print(f"  {show(p.name)}: {type_text(p.type)}")
    print("outputs")
    for name, e in zip(mod.main.attrs["output_names"], outs):
        print(f"  {show(name)}: {type_text(e.type)}")
    print("ops")
    width = max((len(show(k)) for k in ops), default=0)
    for op, n in ops.most_common():
        print(f"  {show(op):<{width}}  {n}")
    return 0


def _opsets(opsets: dict[str, int]) -> str:
    """"17 (also com.microsoft 1)": the default domain's opset, then the others."""
    others = ", ".join(f"{show(d)} {v}" for d, v in opsets.items() if d)
    return f"{opsets.get('', '-')}" + (f" (also {others})" if others else "")


def _runs_at(declared: int | None, running: int | None) -> str:
    from ..op import CANONICAL_OPSET

    if running is None:
        return "runs with no default-domain opset"
    if declared == running == CANONICAL_OPSET:
        return f"runs at {running}, as declared"
    if declared != running:
        return f"runs at {running}: byoc upgraded it on import (onnx's version converter)"
    return (f"runs at {running}: onnx's version converter could not upgrade it to "
            f"{CANONICAL_OPSET}, so its ops run as opset {running} defines them")


def type_text(t) -> str:
    """A type as text, every model string in it (a dim's name) shown escaped."""
    from ..ir import TensorType

    return t.text(show) if isinstance(t, TensorType) else show(str(t))


def register(sub) -> None:
    p = sub.add_parser("info", help="opset, nodes, op histogram, inputs and outputs")
    model_arg(p, optional=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_info)
