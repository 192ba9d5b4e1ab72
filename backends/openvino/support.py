"""What the openvino backend takes: OpenVINO's own answer, asked once per kind of node.

A call is taken when OpenVINO's ONNX frontend converts it and the CPU plugin's ``query_model``
says it runs every operation the conversion made. What it declines is declined with OpenVINO's
reason: the frontend's message, or the operations the plugin does not run. No op list is kept
here, so nothing goes stale when OpenVINO changes.

Asking is batched: every candidate whose signature (op, attributes, input dtypes and shapes,
small constant inputs by value, large ones by shape) has not been asked before becomes one
subgraph of a single ONNX model, converted once (partially: a node the frontend cannot convert
stays a placeholder) and queried once; the subgraphs share nothing, so the operations of each
are told apart by connectivity. If OpenVINO rejects the batch as a whole, it is split in halves
until the culprit is alone and its error is its reason.

Dtypes are asked once each, by compiling a small model for the dtype and reading, in the
plugin's runtime model, the precision it holds the values in: a float dtype held narrower
(float64 as float32) is declined, since every value would round; an integer dtype held narrower
(int64 as int32) is taken, and region.py checks the range of such region inputs at every call.

Nodes writing int8 or uint8 are also run once (see ``_verify``): OpenVINO rounds quantized ops
its own way. Every answer is kept on disk for the next process (``answers.py``).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from byoc.ir import (
    Call,
    Constant,
    Function,
    OpaqueType,
    Span,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Var,
)
from byoc.op import CANONICAL_OPSET, onnx_bridge

from . import answers, engine

# Constants up to this size are part of a signature by value (shapes, axes, pads decide what a
# node is); larger ones (weights) by dtype and shape, and a query sees them as inputs.
SMALL_CONSTANT_BYTES = 4096
# Nodes writing these are run once to check OpenVINO's numbers, not only asked (see _verify).
QUANTIZED = frozenset({"int8", "uint8"})

_verdicts: dict[tuple, bool | str] = {}
_lock = threading.RLock()


# -- dtypes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Held:
    """How the CPU plugin holds values of one dtype: taken or why not, and for an integer dtype
    it narrows, the range it keeps exact (None when it keeps every value)."""

    verdict: bool | str
    exact_range: tuple[int, int] | None = None


_held: dict[str, Held] = {}


def held(dtype: str) -> Held:
    """OpenVINO's answer for ``dtype``, probed once (see :func:`probe`)."""
    with _lock:
        if dtype not in _held:
            probe([dtype])
        return _held[dtype]


def probe(dtypes: Iterable[str]) -> None:
    """Ask OpenVINO how it holds each dtype not asked before, in one model: per dtype, a Concat
    compiled, run (values must come back as they went in) and its precision read from the
    plugin's runtime model. If the model fails whole, each dtype is asked alone."""
    names = []
    known = answers.load()["held"]
    for name in dict.fromkeys(dtypes):
        if name in _held:
            continue
        if name in known:  # an earlier process asked
            verdict, limits = known[name]
            _held[name] = Held(verdict, None if limits is None else (limits[0], limits[1]))
            continue
        try:  # what OpenVINO refuses before any model: the dtype's tensors themselves
            onnx_bridge.elem_type(name)
            engine.to_device(_sample(np.dtype(name)))
            names.append(name)
        except Exception as exc:
            shown = "string" if name == "object" else name
            _held[name] = Held(f"openvino: cannot hold {shown} tensors: {engine.reason(exc)}")
    if not names:
        return
    try:
        found = _probe(names)
    except Exception as exc:  # a dtype the plugin cannot compile a Concat for
        if len(names) > 1:
            for name in names:
                probe([name])
            return
        found = {names[0]: Held(f"openvino: cannot compute on {names[0]}: {engine.reason(exc)}")}
    _held.update(found)
    answers.save({}, {name: [h.verdict, h.exact_range] for name, h in found.items()})


def _sample(dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "O":
        return np.array(["a", "bc", ""], dtype=object)
    if dtype.kind == "b":
        return np.array([True, False, True])
    return np.arange(3).astype(dtype)


_PROBE = re.compile(r"probe(\d+)_")


def _probe(names: list[str]) -> dict[str, Held]:
    from onnx import helper

    nodes, inputs, outputs, samples = [], [], [], []
    for k, name in enumerate(names):
        elem = onnx_bridge.elem_type(name)
        nodes.append(helper.make_node("Concat", [f"probe{k}_in"] * 2, [f"probe{k}_out"], axis=0))
        inputs.append(helper.make_tensor_value_info(f"probe{k}_in", elem, [3]))
        outputs.append(helper.make_tensor_value_info(f"probe{k}_out", elem, [6]))
        samples.append(_sample(np.dtype(name)))
    graph = helper.make_graph(nodes, "probe", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", CANONICAL_OPSET)])
    compiled = engine.compile_model(engine.read(model.SerializeToString()))
    request = compiled.create_infer_request()
    port = {n: i for i, out in enumerate(compiled.outputs) for n in out.get_names()}
    for k, sample in enumerate(samples):
        request.set_input_tensor(k, engine.to_device(sample))
    request.infer()
    found: dict[str, Held] = {}
    for k, name in enumerate(names):
        got = engine.to_host(request.get_output_tensor(port[f"probe{k}_out"]))
        if not np.array_equal(got, np.concatenate([samples[k], samples[k]])):
            found[name] = Held(f"openvino: {name} tensors do not come back as they went in")
    ops_of: dict[int, list] = {}
    for ops in _components(compiled.get_runtime_model().get_ordered_ops()):
        for op in ops:
            m = _PROBE.search(op.get_friendly_name())
            if m:
                ops_of.setdefault(int(m.group(1)), []).extend(ops)
                break
    for k, name in enumerate(names):
        found.setdefault(name, _narrowing(name, ops_of.get(k, [])))
    return found


def _narrowing(name: str, ops: list) -> Held:
    """From the runtime model's layers of a dtype's probe: what the plugin holds it in."""
    ov = engine.load()
    dtype = np.dtype(name)
    lo, hi = None, None
    for op in ops:
        info = op.get_rt_info()
        if info["layerType"].astype(str) in ("Input", "Output", "Convert"):
            continue  # the boundary, and the conversion into what the layers hold
        precision = info["runtimePrecision"].astype(str)
        try:
            inner = getattr(ov.Type, precision).to_dtype()
        except Exception:
            continue  # a precision numpy has no dtype for: not a narrowing numpy can state
        if np.can_cast(dtype, inner, "safe"):
            continue
        if dtype.kind == "f" or inner.kind not in "iu":
            return Held(f"openvino: the {engine.PLUGIN} plugin computes {name} as {inner.name}")
        limits = np.iinfo(inner)
        lo = int(limits.min) if lo is None else max(lo, int(limits.min))
        hi = int(limits.max) if hi is None else min(hi, int(limits.max))
    return Held(True, None if lo is None else (lo, hi))


# -- calls ----------------------------------------------------------------------------------


def _types(call: Call) -> Iterable[object]:
    for a in call.args:
        if a is not None:
            yield a.type
    yield from call.type.fields if isinstance(call.type, TupleType) else (call.type,)


def precheck(call: Call) -> bool | str:
    """What is decided without asking OpenVINO about the node: ONNX ops on tensors of dtypes
    the plugin holds exactly (or, for integers, holds exactly within a range)."""
    if not isinstance(call.op, str) or call.op.startswith("annotation."):
        return "openvino: only ONNX ops"
    if any(isinstance(v, Function) for v in call.attrs.values()):
        return "openvino: ops with subgraphs run where their parents are"
    for t in _types(call):
        if isinstance(t, OpaqueType) or not isinstance(t, TensorType):
            return "openvino: only tensors (not sequences, maps or optionals)"
        if t.dtype is None:
            return "openvino: a dtype is unknown"
        verdict = held(t.dtype).verdict
        if verdict is not True:
            return verdict
    return True


def _is_small(c: Constant) -> bool:
    return c.value.nbytes <= SMALL_CONSTANT_BYTES


def _key(call: Call) -> tuple:
    """The node's signature: what OpenVINO's answer can depend on. Shapes count as the model
    gives them (a Conv needs its channels, a Reshape the length of its shape), symbolic dims
    by their pattern of equality."""
    attrs = tuple((k, v.tobytes() if isinstance(v, np.ndarray) else repr(v))
                  for k, v in sorted(call.attrs.items()))
    symbols: dict[str, int] = {}  # by first appearance: (b, s) and (n, t) are the same
    args = []
    for a in call.args:
        if a is None:
            args.append(None)
        elif isinstance(a, Constant) and _is_small(a):
            args.append(("c", a.value.dtype.name, a.value.shape, a.value.tobytes()))
        else:
            shape = a.type.shape
            args.append(("v", a.type.dtype, None if shape is None else tuple(
                ("s", symbols.setdefault(d, len(symbols))) if isinstance(d, str) else d
                for d in shape)))
    return (call.op, attrs, tuple(args), onnx_bridge.num_outputs(call))


def openvino_runs(call: Call) -> bool | str:
    """True if OpenVINO converts this call and its CPU plugin runs it, else OpenVINO's reason."""
    verdict = precheck(call)
    if verdict is not True:
        return verdict
    key = _key(call)
    with _lock:
        if key not in _verdicts and not _recall(key):
            _ask_and_keep([(key, call)])
        return _verdicts[key]


def prefetch(calls: Sequence[Call]) -> None:
    """Ask OpenVINO about every candidate not yet asked, in one batch."""
    pending: dict[tuple, Call] = {}
    with _lock:
        probe(t.dtype for call in calls if isinstance(call.op, str) for t in _types(call)
              if isinstance(t, TensorType) and t.dtype is not None)
        for call in calls:
            if precheck(call) is not True:
                continue
            key = _key(call)
            if key not in _verdicts and key not in pending and not _recall(key):
                pending[key] = call
        if pending:
            _ask_and_keep(list(pending.items()))


def _recall(key: tuple) -> bool:
    """The verdict an earlier process got for ``key``, if any, into the cache."""
    verdict = answers.load()["verdicts"].get(answers.digest(key))
    if verdict is True or isinstance(verdict, str):
        _verdicts[key] = verdict
        return True
    return False


def _ask_and_keep(items: list[tuple[tuple, Call]]) -> None:
    _ask(items)
    answers.save({answers.digest(key): _verdicts[key] for key, _ in items}, {})


# -- one query for many nodes ---------------------------------------------------------------


def _query_function(calls: Sequence[Call], constants: bool = False) -> Function:
    """Independent one-node subgraphs: candidate k reads c{k}_i{j}, writes c{k}_o{j}. Large
    constants become inputs of their shape, unless ``constants`` (to run, not only to ask)."""
    params: list[Var] = []
    fields: list = []
    names: list[str] = []
    for k, call in enumerate(calls):
        args = []
        for j, a in enumerate(call.args):
            if a is None:
                args.append(None)
            elif isinstance(a, Constant) and (constants or _is_small(a)):
                args.append(Constant(a.value, f"c{k}_i{j}"))
            else:
                shape = a.type.shape
                dims = None if shape is None else tuple(
                    f"c{k}_{d}" if isinstance(d, str) else d for d in shape)
                params.append(Var(f"c{k}_i{j}", TensorType(dims, a.type.dtype)))
                args.append(params[-1])
        n_out = onnx_bridge.num_outputs(call)
        outs = tuple(f"c{k}_o{j}" for j in range(n_out))
        loose = (TupleType(tuple(TensorType(None, t.dtype) for t in call.type.fields))
                 if isinstance(call.type, TupleType) else TensorType(None, call.type.dtype))
        node = Call(call.op, tuple(args), call.attrs, loose, Span(f"c{k}", call.op, outs))
        fields += [TupleGetItem(node, j) for j in range(n_out)] if n_out > 1 else [node]
        names += outs
    return Function(tuple(params), Tuple(tuple(fields)), {"output_names": names})


def _onnx_bytes(calls: Sequence[Call]) -> bytes:
    from byoc.frontends.onnx.exporter import export_function

    return export_function(_query_function(calls)).SerializeToString()


_CANDIDATE = re.compile(r"^c(\d+)_[io]\d+")
_BOUNDARY = ("Parameter", "Constant", "Result")


def _ask(items: list[tuple[tuple, Call]]) -> None:
    """Verdicts for ``items`` into the cache.

    A batch OpenVINO rejects whole is split in halves. So is what it declines in a batch of
    several: the plugin answers nothing at all for a model with one node it cannot take (a
    dynamic rank, say), so a refusal counts only once its candidate is asked alone or with
    others that pass.
    """
    calls = [call for _, call in items]
    try:
        verdicts = _query(calls)
    except Exception as exc:
        if len(items) == 1:
            _verdicts[items[0][0]] = f"openvino: {engine.reason(exc)}"
        else:
            _ask(items[:len(items) // 2])
            _ask(items[len(items) // 2:])
        return
    check = [k for k, (item, v) in enumerate(zip(items, verdicts)) if v is True and _quantized(item[1])]
    for k, verdict in zip(check, _verify([items[k] for k in check]) if check else []):
        verdicts[k] = verdict
    unsure = []
    for item, verdict in zip(items, verdicts):
        if verdict is True or isinstance(verdict, _Unconverted) or len(items) == 1:
            _verdicts[item[0]] = str(verdict) if isinstance(verdict, _Unconverted) else verdict
        else:
            unsure.append(item)
    if len(unsure) == 1:
        _ask(unsure)
    elif unsure:
        _ask(unsure[:len(unsure) // 2])
        _ask(unsure[len(unsure) // 2:])


def _quantized(call: Call) -> bool:
    outs = call.type.fields if isinstance(call.type, TupleType) else (call.type,)
    return any(isinstance(t, TensorType) and t.dtype in QUANTIZED for t in outs)


def _verify(items: list[tuple[tuple, Call]]) -> list[bool | str]:
    """The nodes run once on seeded inputs, by OpenVINO and by byoc's host kernels
    (onnxruntime's for contrib ops), as one model each way: a node is taken only if its values
    agree (see _steps_allowed). The plugin rounds quantized ops its own way; onnxruntime's
    QLinearAdd and QLinearSoftmax come out a step off alone, and a QOperator ResNet's output
    far off with them in its regions. Inputs are
    drawn from a seed of the node's signature, so the answer does not depend on what else is
    asked with it."""
    from byoc.backends.reference import compile_region
    from byoc.frontends.onnx.exporter import export_function

    calls = [call for _, call in items]
    func = _query_function(calls, constants=True)
    if any(p.type.shape is None for p in func.params):  # no shape to draw inputs for
        return _verify_apart(items)
    rngs = [np.random.default_rng(list(hashlib.sha256(repr(key).encode()).digest()))
            for key, _ in items]
    arrays = [_sample_input(p.type, rngs[int(_CANDIDATE.match(p.name).group(1))])
              for p in func.params]
    try:
        compiled = engine.compile_model(engine.read(export_function(func).SerializeToString()))
        request = compiled.create_infer_request()
        for k, a in enumerate(arrays):
            request.set_input_tensor(k, engine.to_device(a))
        request.infer()
        port = {n: i for i, out in enumerate(compiled.outputs) for n in out.get_names()}
        ours = dict(zip(func.attrs["output_names"], compile_region(func)(*arrays)))
    except Exception:
        return _verify_apart(items)
    verdicts: list[bool | str] = []
    for k, call in enumerate(calls):
        verdict: bool | str = True
        for j in range(onnx_bridge.num_outputs(call)):
            want = np.asarray(ours[f"c{k}_o{j}"])
            got = engine.to_host(request.get_output_tensor(port[f"c{k}_o{j}"]))
            off = (int(np.abs(got.astype(np.int64) - want.astype(np.int64)).max(initial=0))
                   if got.shape == want.shape else None)
            if off is None or off > _steps_allowed(call):
                verdict = (f"openvino: its {call.op_name} differs from onnxruntime's on seeded "
                           f"inputs (by {'a shape' if off is None else f'up to {off} step' + 's' * (off > 1)})")
                break
        verdicts.append(verdict)
    return verdicts


def _steps_allowed(call: Call) -> int:
    """A standard op may round a value to the next step (ONNX says x / scale rounded half to
    even; the plugin multiplies by 1 / scale, and onnxruntime's own fused kernels are a step
    off too); a contrib op is what onnxruntime computes, so exactly that."""
    return 0 if onnx_bridge.split_op(call.op)[0] else 1


def _verify_apart(items: list[tuple[tuple, Call]]) -> list[bool | str]:
    """In halves; a node that cannot be run on drawn inputs keeps the query's answer."""
    if len(items) == 1:
        return [True]
    half = len(items) // 2
    return _verify(items[:half]) + _verify(items[half:])


def _sample_input(t: TensorType, rng: np.random.Generator) -> np.ndarray:
    shape = tuple(d if isinstance(d, int) else 4 for d in t.shape)
    dtype = np.dtype(t.dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = max(int(info.min), -1000), min(int(info.max), 1000)
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    return (4 * rng.standard_normal(shape)).astype(dtype)


class _Unconverted(str):
    """A refusal by the ONNX frontend: about that node alone, whatever else is in the batch."""


def _query(calls: Sequence[Call]) -> list[bool | str]:
    model = engine.read_partially(_onnx_bytes(calls))
    supported = set(engine.core().query_model(model, engine.PLUGIN, engine.config()))
    ops_of: dict[int, list] = {k: [] for k in range(len(calls))}
    for ops in _components(model.get_ordered_ops()):
        k = _candidate(ops)
        if k is not None:
            ops_of[k] += ops
    verdicts: list[bool | str] = []
    for k, call in enumerate(calls):
        unconverted = [op for op in ops_of[k] if "Framework" in op.get_type_name()
                       or "NotSupported" in op.get_type_name()]
        if unconverted:
            verdicts.append(_Unconverted(_conversion_reason(call)))
            continue
        declined = sorted({op.get_type_name() for op in ops_of[k]
                           if op.get_type_name() not in _BOUNDARY
                           and op.get_friendly_name() not in supported})
        if not declined:
            verdicts.append(True)
            continue
        why = f"openvino: the {engine.PLUGIN} plugin does not run {', '.join(declined)}"
        if any(a is not None and a.type.shape is None for a in call.args):
            why += " (an input's rank is unknown: it runs only tensors of known rank)"
        verdicts.append(why)
    return verdicts


def _components(ops: list) -> list[list]:
    """The model's operations grouped by connectivity (union-find over their edges)."""
    parent = {op.get_name(): op.get_name() for op in ops}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for op in ops:
        for port in op.inputs():
            a, b = root(op.get_name()), root(port.get_source_output().get_node().get_name())
            if a != b:
                parent[a] = b
    groups: dict[str, list] = {}
    for op in ops:
        groups.setdefault(root(op.get_name()), []).append(op)
    return list(groups.values())


def _candidate(ops: list) -> int | None:
    """Which candidate a component belongs to, from its inputs' and outputs' names."""
    for op in ops:
        names = [op.get_friendly_name()]
        for out in op.outputs():
            names += out.get_names()
        if op.get_type_name() == "Result":
            names += op.input_value(0).get_names()
        for name in names:
            m = _CANDIDATE.match(name)
            if m:
                return int(m.group(1))
    return None


def _conversion_reason(call: Call) -> str:
    """Why the frontend cannot convert this node: converting it alone, whole, says."""
    try:
        engine.read(_onnx_bytes([call]))
    except Exception as exc:
        return f"openvino: {engine.reason(exc)}"
    return "openvino: the ONNX frontend converts it only alone"  # seen in no model so far
