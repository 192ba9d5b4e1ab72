"""Reproduce a backend bug in seconds: one region, with its real inputs, as an ONNX test case.

    extract(model, "ccompiler", region=3, out_dir="case")   # case/model.onnx, test_data_set_0/
    extract(model, "ccompiler", region=5, out_dir="case", iteration=2)  # a region in a body
    repro("case", "ccompiler")                              # run it on the backend, compare
    bisect(model, "ccompiler")                              # first bad region, then first bad node

A case directory is in ONNX's own test-case layout (``model.onnx`` plus
``test_data_set_0/input_N.pb`` and ``output_N.pb``), so onnxruntime or any ONNX tool replays it
without byoc. The tensors are the real boundary tensors of a reference run of the whole model,
and the region is specialized to their shapes: a model with symbolic or unnamed dims extracts
on every backend, and a C backend's case holds the C it generates for those shapes.

Regions are numbered from 0 as ``byoc partition`` lists them (its ``#`` column), main's first,
then those of each If, Loop and Scan body; ``bisect`` numbers them the same way (and runs main's:
it counts the others). A region inside a body gets the tensors of one run of that body: the
first by default, the K-th (from 0) with ``iteration=K``; for an If branch, its K-th run is the
K-th time the branch was taken.
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
from .compare import OutputComparison, compare_output, rounding_steps
from .errors import ByocError, InputError
from .files.outputs import OutputFolder, check_output_folder
from .files.reading import read_regular
from .ir import (
    NO_ATTRS,
    Call,
    Constant,
    Function,
    GlobalVar,
    IRModule,
    Span,
    Tuple,
    TupleGetItem,
    Var,
    post_order,
)
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


CASE_BACKEND = "byoc.backend"  # the model's metadata key naming the case's backend


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
    return {**{n: np.asarray(inputs[n]) for n in names if n in inputs}, **run}


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
    _declare_unknown_ranks(model, dict(zip(region.input_names + region.output_names,
                                           [*inputs, *outputs])))
    onnx.checker.check_model(model, full_check=True)
    onnx.helper.set_model_props(model, {CASE_BACKEND: backend})  # what repro replays it on
    with OutputFolder(out_dir, force=force, protect=protect) as out:
        onnx.save(model, out.path("model.onnx"))
        for kind, names, arrays in (("input", region.input_names, inputs),
                                    ("output", region.output_names, outputs)):
            for k, (name, arr) in enumerate(zip(names, arrays)):
                with open(out.path(f"test_data_set_0/{kind}_{k}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(np.asarray(arr), name).SerializeToString())
        source, why = _source(backend, region.func, inputs)
        if source is not None:
            with open(out.path("region.c"), "w") as f:
                f.write(source)
        with open(out.path("README.md"), "w") as f:
            f.write(_readme(region, backend, inputs, outputs, why))
    files = out.files
    return Case(out_dir, region, backend, files)


def _declare_unknown_ranks(model: onnx.ModelProto, arrays: Mapping[str, np.ndarray]) -> None:
    """ONNX's checker wants a shape on every graph input and output: where the region's type
    has no rank (a value in a body ONNX's shape inference did not reach), the recorded tensor's
    shape stands in, as the case holds only that tensor."""
    for value in (*model.graph.input, *model.graph.output):
        tensor = value.type.tensor_type
        if value.type.HasField("tensor_type") and not tensor.HasField("shape") \
                and value.name in arrays:
            tensor.shape.SetInParent()
            for d in np.shape(arrays[value.name]):
                tensor.shape.dim.add().dim_value = d


def _source(backend: str, func: Function, inputs: list[np.ndarray]) -> tuple[str | None, str]:
    """The backend's C for the region specialized to ``inputs`` (a C backend's ``c_source``),
    or None and why there is none (a backend that writes no C says nothing)."""
    try:
        module = importlib.import_module(f"byoc.backends.{backend}")
    except ImportError:
        return None, ""
    emit = getattr(module, "c_source", None)
    if not callable(emit):
        return None, ""
    try:
        return emit(func, inputs), ""
    except Exception as exc:  # the case is still worth writing: its inputs show the bug
        return None, f"{backend} generates no C for these shapes: {type(exc).__name__}: {exc}"


def _readme(region: Region, backend: str, inputs, outputs, why_no_c: str = "") -> str:
    def cell(name: str) -> str:  # one line, printable, and no `|` ending a table cell
        return show(name).replace("|", "\\|")

    def rows(names, arrays):
        return "\n".join(f"| `{cell(n)}` | {tuple(np.shape(a))} | {np.asarray(a).dtype} |"
                         for n, a in zip(names, arrays))

    return f"""# A byoc repro case: region `{region.name}` on `{backend}`

Replay it on the backend, comparing with the recorded outputs (exit 0 if they match):

    byoc repro .                 # on {backend}, recorded in model.onnx; or --backend NAME

The outputs in `test_data_set_0/` come from byoc's host executor on the whole model; the
comparison is element-wise, `|got - want| <= atol + rtol * |want|` (float32: rtol 1e-4, atol
1e-5 or 1e-5 of the largest recorded value if that is more; `--atol`/`--rtol` set them), integers
and bools must be equal. onnxruntime replays
the same files: `model.onnx` with `test_data_set_0/input_*.pb`.{chr(10) + chr(10) + show(why_no_c) if why_no_c else ""}

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


def _case_array(tensor: onnx.TensorProto, file: str) -> np.ndarray:
    """A case file's tensor as an array: its data in the file itself (onnx would open an
    external data file named by the case: a FIFO there blocks), its shape filled by it."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL or tensor.external_data:
        raise InputError(f"case file {file!r}: tensor {tensor.name!r} points to external data; "
                         f"a case file holds its data itself")
    if any(d < 0 for d in tensor.dims):
        raise InputError(f"case file {file!r}: tensor {tensor.name!r} has a negative dim: "
                         f"{list(tensor.dims)}")
    try:
        return numpy_helper.to_array(tensor)
    except Exception as exc:  # a declared shape its data does not fill, a bad type
        raise InputError(f"case file {file!r}: tensor {tensor.name!r} (shape "
                         f"{list(tensor.dims)}): its data does not match "
                         f"({str(exc).splitlines()[0][:200]})") from None


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
            out[tensor.name] = _case_array(tensor, file)
        return out

    inits = {t.name for t in model.graph.initializer}
    n_in = sum(1 for i in model.graph.input if i.name not in inits)
    return model, read("input", n_in), read("output", len(model.graph.output))


def case_backend(model: onnx.ModelProto) -> str | None:
    """The backend a case was extracted for, as its model records it (None: not recorded)."""
    return next((p.value for p in model.metadata_props if p.key == CASE_BACKEND), None)


def repro(case_dir: str, backend: str | None = None, *, atol: float | None = None,
          rtol: float | None = None) -> list[OutputComparison]:
    """Run a case on ``backend`` (default: the one it was extracted for, as it records) (all
    of it offloaded where it can be) against its outputs."""
    from .frontends.onnx import load_onnx

    model, inputs, expected = load_case(case_dir)
    if backend is None:
        backend = case_backend(model)
        if not backend:
            raise InputError(f"{case_dir}: the case records no backend; pass --backend")
    mod = load_onnx(model)
    part = partition(mod, backends=[backend])
    got = build(part).run(inputs)
    steps = rounding_steps(mod.main)
    return [compare_output(n, got[n], w, rtol, atol, steps.get(n, "")) for n, w in expected.items()]


@dataclass
class BisectResult:
    """The first region (in the order main runs them, numbered from 0 as ``byoc partition``
    numbers them) whose outputs are out of tolerance or whose backend fails, and its node."""

    region: Region | None
    node: str | None
    node_op: str | None
    comparisons: list[OutputComparison]
    checked: int  # how many regions were run
    case: Case | None = None
    index: int | None = None  # the bad region's number
    error: str = ""  # what the backend said, if it failed rather than differed
    in_bodies: int = 0  # regions inside If/Loop/Scan bodies, not bisected (numbered after main's)


def region_module(region: Region, attrs: Mapping | None = None) -> IRModule:
    """A module whose main calls the region alone, its inputs and outputs named as in ONNX:
    ``build`` gives it the backend's device copies and its result checks, as in a whole run."""
    func = region.func
    params = tuple(Var(n, p.type) for n, p in zip(region.input_names, func.params))
    span = Span(region.name, "", tuple(region.output_names))
    call = Call(GlobalVar(region.name), params, NO_ATTRS, func.ret_type, span)
    body = Tuple(tuple(TupleGetItem(call, k) for k in range(len(region.output_names)))) \
        if isinstance(func.body, Tuple) else call
    main = Function(params, body, {"output_names": list(region.output_names)})
    return IRModule({"main": main, region.name: func}, dict(attrs or {}))


def run_region(region: Region, arrays: list[np.ndarray], attrs: Mapping | None = None
               ) -> list[np.ndarray]:
    """The region's outputs on its backend for ``arrays`` (one per parameter)."""
    got = build(region_module(region, attrs)).run(dict(zip(region.input_names, arrays)))
    return [np.asarray(got[n]) for n in region.output_names]


def _bad(region: Region, values: Mapping[str, np.ndarray], attrs: Mapping | None,
         atol: float | None, rtol: float | None) -> tuple[list[OutputComparison], str]:
    """The region's outputs out of tolerance against the host's, or what its backend said."""
    try:
        got = run_region(region, _region_inputs(region, values), attrs)
    except ByocError as exc:
        return [], str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    steps = rounding_steps(region.func.with_attrs(output_names=region.output_names))
    checks = [compare_output(n, g, values[n], rtol, atol, steps.get(n, ""))
              for n, g in zip(region.output_names, got)]
    return [c for c in checks if not c.ok], ""


def bisect(mod: IRModule, backend: str, inputs: Mapping[str, np.ndarray],
           out_dir: str | None = None, progress=None, force: bool = False,
           protect=(), *, atol: float | None = None, rtol: float | None = None) -> BisectResult:
    """Find the first region whose outputs are off (or whose backend fails), then the first
    node inside it.

    Every region runs on ``backend`` with the real intermediate tensors of a host run; inside
    the first bad one, a binary search over prefixes of its nodes (each prefix annotated with
    annotate_range: a prefix of a topological order is always convex) finds the first node
    whose output is off, and a repro case of that node alone is extracted to ``out_dir``
    (checked first, as ``extract`` checks it: ``force``, ``protect``).
    """
    if out_dir is not None:
        check_output_folder(out_dir, force)
    # main's regions only (numbered first): the node search below annotates ranges of main.
    every = regions(partition(mod, backends=[backend]))
    found = [r for r in every if not r.scope]
    attrs = mod.attrs
    values: dict[str, np.ndarray] = dict(build(mod).run(inputs, capture="all"))
    values.update({k: np.asarray(v) for k, v in inputs.items()})
    for k, region in enumerate(found):
        if progress:
            progress(f"region {k} of 0..{len(found) - 1}: {region.name} "
                     f"({len(region.nodes)} nodes)")
        bad, error = _bad(region, values, attrs, atol, rtol)
        if not bad and not error:
            continue
        names = region.nodes
        lo, hi = 0, len(names) - 1  # the first bad prefix ends in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            prefix = "|".join(re.escape(n) for n in names[:mid + 1])
            sub = select(mod, backend, name_regex=f"^(?:{prefix})$")
            off, failed = _bad(sub, values, attrs, atol, rtol)
            if off or failed:
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
        return BisectResult(region, node, op, bad, k + 1, case, k, error)
    return BisectResult(None, None, None, [], len(found), in_bodies=len(every) - len(found))
