"""Reproduce a backend bug in seconds: one region, with its real inputs, as an ONNX test case.

    extract(model, "ccompiler", region=3, out_dir="case")   # case/model.onnx, test_data_set_0/
    extract(model, "ccompiler", region=5, out_dir="case", iteration=2)  # a region in a body
    repro("case", "ccompiler")                              # run it on the backend, compare
    bisect(model, "ccompiler")                              # first bad region, then first bad node

A case directory is in ONNX's own test-case layout (``model.onnx`` plus
``test_data_set_0/input_N.pb`` and ``output_N.pb``), so onnxruntime or any ONNX tool replays it
without byoc. The tensors are the real boundary tensors of a reference run of the whole model.

Regions are numbered as ``byoc partition`` lists them: main's first, then those of each If,
Loop and Scan body. A region inside a body gets the tensors of one run of that body: the first
by default, the K-th (from 0) with ``iteration=K``; for an If branch, its K-th run is the K-th
time the branch was taken.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from .analysis import Scope, unique, value_name, walk_functions
from .backend import get_backend
from .compare import OutputComparison, compare_output
from .errors import ByocError, InputError
from .files.outputs import OutputFolder, check_output_folder
from .files.reading import read_regular
from .ir import Call, Constant, Function, GlobalVar, IRModule, Tuple, post_order
from .partition import annotate_range, partition
from .report import show
from .runtime import build


@dataclass
class Region:
    """One external function of a partitioned module, with its boundary named as in ONNX."""

    name: str
    func: Function
    call: Call
    input_names: list[str]
    output_names: list[str]
    scope: Scope = ()  # the path of the body it lives in (analysis.bodies), () for main

    @property
    def nodes(self) -> list[str]:
        return [e.span.name for e in post_order(self.func.body) if isinstance(e, Call) and e.span]


def regions(part: IRModule, bodies: bool = True) -> list[Region]:
    """The regions of a partitioned module, in the order main runs them, then (with
    ``bodies``) those of each If, Loop and Scan body, as ``byoc partition`` lists them."""
    out = []
    for scope, f in walk_functions(part.main):
        if scope and not bodies:
            break
        for e in post_order(f.body):
            if isinstance(e, Call) and isinstance(e.op, GlobalVar) \
                    and part[e.op.name].attrs.get("Compiler"):
                func = part[e.op.name]
                taken: set[str] = set()
                ins = [unique(value_name(a) or p.name, taken) for a, p in zip(e.args, func.params)]
                fields = func.body.fields if isinstance(func.body, Tuple) else (func.body,)
                outs = [unique(value_name(v) or f"output_{k}", taken)
                        for k, v in enumerate(fields)]
                out.append(Region(e.op.name, func, e, ins, outs, scope))
    return out


def select(mod: IRModule, backend: str, *, region: int | None = None,
           nodes: tuple[str, str] | None = None, name_regex: str | None = None) -> Region:
    """The region to extract: the K-th of a normal partition, or one made from a node range."""
    if sum(x is not None for x in (region, nodes, name_regex)) != 1:
        raise InputError("choose exactly one of --region, --nodes and --name-regex")
    if region is not None:
        found = regions(partition(mod, backends=[backend]))
        if not 0 <= region < len(found):
            raise InputError(f"--region {region}: backend {backend!r} makes {len(found)} "
                             f"region(s), numbered 0 to {len(found) - 1}")
        return found[region]
    if nodes is not None:
        marked = annotate_range(mod, backend, nodes[0], nodes[1])
    else:
        try:
            pattern = re.compile(name_regex or "")
        except re.error as exc:
            raise InputError(f"--name-regex {name_regex!r}: {exc}") from None
        marked = annotate_range(mod, backend, pattern)
    found = regions(partition(marked, backends=[backend], annotated=True))
    if len(found) != 1:
        raise InputError(f"the range makes {len(found)} regions, not one (did the backend "
                         "reject it?)")
    return found[0]


def reference_values(mod: IRModule, inputs: Mapping[str, np.ndarray], names: list[str],
                     iteration: int = 0, scope: Scope = ()) -> dict[str, np.ndarray]:
    """The named tensors of a host run of the whole model (the reference); for ``scope`` (a
    body's path), those of that body's ``iteration``-th run."""
    if scope:
        # The record of one run of the body, read from that run alone: the name of a captured
        # value is also its outer name, recorded by another run of an outer body.
        body = dict(walk_functions(mod.main)).get(scope)
        if body is None:
            raise InputError(f"no body at {'/'.join(scope)} in the model")
        run = build(mod).run(inputs, capture=names, iteration=iteration)
        record = run.bodies.get(body, {})
        missing = [n for n in names if n not in record]
        if missing:
            raise InputError(f"capture: no value named {missing[0]!r} in run {iteration} of "
                             f"body {'/'.join(scope)}")
        return {n: record[n] for n in names}
    wanted = [n for n in names if n not in inputs]
    run = build(mod).run(inputs, capture=wanted, iteration=iteration)
    return {**{n: np.asarray(inputs[n]) for n in names if n in inputs}, **run.tensors}


def _region_inputs(region: Region, values: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    out = []
    for arg, name in zip(region.call.args, region.input_names):
        out.append(arg.value if isinstance(arg, Constant) else values[name])
    return out


@dataclass
class Case:
    """What extract wrote."""

    out_dir: str
    region: Region
    backend: str
    files: list[str] = field(default_factory=list)


def extract(mod: IRModule, backend: str, out_dir: str, inputs: Mapping[str, np.ndarray], *,
            region: int | None = None, nodes: tuple[str, str] | None = None,
            name_regex: str | None = None, opsets: Mapping[str, int] | None = None,
            iteration: int = 0, force: bool = False, protect=()) -> Case:
    """Write one region as a standalone ONNX test case with its real boundary tensors (for a
    region in a body, those of the body's ``iteration``-th run). ``out_dir`` follows byoc's
    output rules (``byoc/files/outputs.py``): an existing folder that is not empty only with
    ``force``, and never over a file in ``protect`` (the model being read)."""
    check_output_folder(out_dir, force)
    if iteration < 0:
        raise InputError(f"--iteration {iteration}: iterations count from 0")
    chosen = select(mod, backend, region=region, nodes=nodes, name_regex=name_regex)
    names = [n for a, n in zip(chosen.call.args, chosen.input_names)
             if not isinstance(a, Constant)] + chosen.output_names
    try:
        values = reference_values(mod, inputs, names, iteration, chosen.scope)
    except InputError:
        if not chosen.scope:
            raise
        path = "/".join(chosen.scope)
        raise InputError(f"region {chosen.name} lives in body {path}, which does not run "
                         f"{iteration + 1} time(s) on these inputs (an If branch not taken, or "
                         "fewer iterations): try other inputs or a smaller --iteration") from None
    return write_case(chosen, backend, out_dir, _region_inputs(chosen, values),
                      [values[n] for n in chosen.output_names],
                      opsets or mod.attrs.get("opset_imports"), force=force, protect=protect)


def write_case(region: Region, backend: str, out_dir: str, inputs: list[np.ndarray],
               outputs: list[np.ndarray], opsets: Mapping[str, int] | None, *,
               force: bool = False, protect=()) -> Case:
    """The case directory, staged and moved into place (``OutputFolder``): never half written,
    never over a user's file."""
    from .frontends.onnx.exporter import export_function

    model = export_function(region.func, dict(opsets or {}) or None,
                            input_names=region.input_names, output_names=region.output_names)
    onnx.checker.check_model(model, full_check=True)
    with OutputFolder(out_dir, force=force, protect=protect) as out:
        onnx.save(model, out.path("model.onnx"))
        for kind, names, arrays in (("input", region.input_names, inputs),
                                    ("output", region.output_names, outputs)):
            for k, (name, arr) in enumerate(zip(names, arrays)):
                with open(out.path(f"test_data_set_0/{kind}_{k}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(np.asarray(arr), name).SerializeToString())
        source = _source(backend, region.func)
        if source is not None:
            with open(out.path("region.c"), "w") as f:
                f.write(source)
        with open(out.path("README.md"), "w") as f:
            f.write(_readme(region, backend, inputs, outputs))
    files = out.files
    return Case(out_dir, region, backend, files)


def _source(backend: str, func: Function) -> str | None:
    """The backend's generated source for the region, if it is a C backend (emit_c)."""
    try:
        module = importlib.import_module(f"byoc.backends.{backend}")
    except ImportError:
        return None
    emit = getattr(module, "emit_c", None)
    return emit(func) if callable(emit) else None


def _readme(region: Region, backend: str, inputs, outputs) -> str:
    def cell(name: str) -> str:  # one line, printable, and no `|` ending a table cell
        return show(name).replace("|", "\\|")

    def rows(names, arrays):
        return "\n".join(f"| `{cell(n)}` | {tuple(np.shape(a))} | {np.asarray(a).dtype} |"
                         for n, a in zip(names, arrays))

    return f"""# A byoc repro case: region `{region.name}` on `{backend}`

Replay it on the backend, comparing with the recorded outputs (exit 0 if they match):

    byoc repro . --backend {backend}

The outputs in `test_data_set_0/` come from byoc's host executor on the whole model; the
comparison allows, for float32, a max absolute error of 1e-4 times the output's largest
magnitude (integers and bools must be equal). onnxruntime replays the same files:
`model.onnx` with `test_data_set_0/input_*.pb`.

ONNX nodes in the region: {", ".join(f"`{show(n)}`" for n in region.nodes[:50])}{" ..." if len(region.nodes) > 50 else ""}

| input | shape | dtype |
|---|---|---|
{rows(region.input_names, inputs)}

| output | shape | dtype |
|---|---|---|
{rows(region.output_names, outputs)}
"""


def _parsed(parse, path: str):
    """A protobuf file of a case, read only if it is a regular file (never a FIFO or device)."""
    data = read_regular(path, "case file", error=InputError)
    try:
        return parse(data)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise InputError(f"case file {path!r} cannot be parsed: {exc}") from None


def load_case(case_dir: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A case directory's model, inputs and expected outputs (by name)."""
    path = os.path.join(case_dir, "model.onnx")
    if not os.path.lexists(path):
        raise InputError(f"{case_dir}: no model.onnx (is this a byoc extract directory?)")
    model = _parsed(onnx.load_model_from_string, path)
    data = os.path.join(case_dir, "test_data_set_0")

    def read(kind: str, count: int) -> dict[str, np.ndarray]:
        out = {}
        for k in range(count):
            file = os.path.join(data, f"{kind}_{k}.pb")
            if not os.path.lexists(file):
                raise InputError(f"{case_dir}: missing test_data_set_0/{kind}_{k}.pb")
            tensor = _parsed(onnx.load_tensor_from_string, file)
            out[tensor.name] = numpy_helper.to_array(tensor)
        return out

    inits = {t.name for t in model.graph.initializer}
    n_in = sum(1 for i in model.graph.input if i.name not in inits)
    return model, read("input", n_in), read("output", len(model.graph.output))


def repro(case_dir: str, backend: str) -> list[OutputComparison]:
    """Run a case on ``backend`` (all of it offloaded where it can be) against its outputs."""
    from .frontends.onnx import load_onnx

    model, inputs, expected = load_case(case_dir)
    part = partition(load_onnx(model), backends=[backend])
    got = build(part).run(inputs)
    return [compare_output(n, got[n], w) for n, w in expected.items()]


@dataclass
class BisectResult:
    """The first region (in the order main runs them) that is out of tolerance, and its node."""

    region: Region | None
    node: str | None
    node_op: str | None
    comparisons: list[OutputComparison]
    checked: int
    case: Case | None = None


def _run_region(backend: str, func: Function, args: list[np.ndarray]) -> list[np.ndarray]:
    """The region on its backend, its tensors moved to the backend's device and back."""
    from .runtime.devices import get_device

    chosen = get_backend(backend)
    device = get_device(chosen.device)
    outs = chosen.compile(func)(*(device.to_device(np.asarray(a, order="C")) for a in args))
    return [np.asarray(device.to_host(o)) for o in outs]


def _bad(region: Region, backend: str, values: Mapping[str, np.ndarray]) -> list[OutputComparison]:
    try:
        got = _run_region(backend, region.func, _region_inputs(region, values))
    except ByocError:
        raise
    except Exception as exc:
        raise ByocError(f"region {region.name!r} failed on {backend}: {type(exc).__name__}: "
                        f"{exc}".splitlines()[0]) from exc
    checks = [compare_output(n, g, values[n]) for n, g in zip(region.output_names, got)]
    return [c for c in checks if not c.ok]


def bisect(mod: IRModule, backend: str, inputs: Mapping[str, np.ndarray],
           out_dir: str | None = None, progress=None, force: bool = False,
           protect=()) -> BisectResult:
    """Find the first region whose outputs are off, then the first node inside it.

    Every region runs on ``backend`` with the real intermediate tensors of a host run; inside
    the first bad one, a binary search over prefixes of its nodes (each prefix annotated with
    annotate_range: a prefix of a topological order is always convex) finds the first node
    whose output is off, and a repro case of that node alone is extracted to ``out_dir``
    (checked first, as ``extract`` checks it: ``force``, ``protect``).
    """
    if out_dir is not None:
        check_output_folder(out_dir, force)
    # main's regions only: the node search below annotates ranges of main.
    found = regions(partition(mod, backends=[backend]), bodies=False)
    values = build(mod).run(inputs, capture="all").tensors
    values.update({k: np.asarray(v) for k, v in inputs.items()})
    for k, region in enumerate(found):
        if progress:
            progress(f"region {k + 1}/{len(found)} {region.name} ({len(region.nodes)} nodes)")
        bad = _bad(region, backend, values)
        if not bad:
            continue
        names = region.nodes
        lo, hi = 0, len(names) - 1  # the first bad prefix ends in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            prefix = "|".join(re.escape(n) for n in names[:mid + 1])
            sub = select(mod, backend, name_regex=f"^(?:{prefix})$")
            if _bad(sub, backend, values):
                hi = mid
            else:
                lo = mid + 1
        node = names[lo]
        op = next(e.op_name for e in post_order(region.func.body)
                  if isinstance(e, Call) and e.span and e.span.name == node)
        case = None
        if out_dir is not None:
            case = extract(mod, backend, out_dir, inputs, nodes=(node, node), force=force,
                           protect=protect)
        return BisectResult(region, node, op, bad, k + 1, case)
    return BisectResult(None, None, None, [], len(found))
