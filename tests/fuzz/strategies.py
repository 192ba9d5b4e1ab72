"""A hypothesis strategy for random valid ONNX graphs made of the ops byoc's backends support.

    @given(fuzz_graphs())
    def test_it(case):            # case.model: onnx.ModelProto, case.inputs: {name: array}
        ...

A graph grows one node at a time from one to three graph inputs: each step draws an op and
picks its operands among the values made so far (recent ones more often, so graphs are deep as
well as wide, and a value read twice makes a diamond), or makes a fresh constant or graph input
of a shape that broadcasts with them. Output shapes come from ONNX's own shape inference for the
node, so an op whose attributes do not fit its input is simply drawn again. Every value no node
reads is a graph output, and a few intermediates are outputs too.

Two facts are kept per value so that every graph compares well with onnxruntime:

- ``bound``, an upper bound of ``|value|``: ops that grow values (Mul, MatMul, Exp...) take
  only operands below ``GROW_LIMIT``, squashing a bigger one with Tanh first, so nothing
  overflows and the relative tolerance means the same thing for every output;
- ``exact``: whether every engine computes the value bit for bit alike (inputs, constants and
  moves of them). Discontinuous ops (comparisons, Cast to an integer) read exact values only:
  a one-ulp difference upstream must not flip a branch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

FLOAT, INT64, BOOL, DOUBLE = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL, \
    TensorProto.DOUBLE
NUMPY = {FLOAT: np.float32, INT64: np.int64, BOOL: np.bool_, DOUBLE: np.float64}
OPSET = 21  # recent enough for every op here in its current form; byoc upgrades it to 28
GROW_LIMIT = 50.0  # operands of value-growing ops stay below this (see the module docstring)
INPUT_BOUND = 3.0  # graph inputs are uniform in [-3, 3]
MAX_INPUTS = 3


@dataclass(frozen=True)
class Value:
    """A tensor of the graph being built: its name, concrete shape, ONNX dtype and facts."""

    name: str
    shape: tuple[int, ...]
    dtype: int = FLOAT
    bound: float = INPUT_BOUND
    exact: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass
class FuzzGraph:
    """A drawn graph: the model, inputs to run it on, and the op types it uses."""

    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    ops: frozenset[str]

    def __repr__(self) -> str:  # what hypothesis prints for a failing example
        shapes = {k: (v.shape, v.dtype.name) for k, v in self.inputs.items()}
        return f"FuzzGraph(inputs={shapes})\n{onnx.printer.to_text(self.model)}"


@dataclass
class Builder:
    """The graph under construction, drawing its choices from hypothesis."""

    draw: Callable
    seed: int
    symbolic: bool
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    inits: list[TensorProto] = field(default_factory=list)
    inputs: list[Value] = field(default_factory=list)
    values: list[Value] = field(default_factory=list)
    read: set[str] = field(default_factory=set)
    counter: int = 0

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # -- leaves ----------------------------------------------------------------------------------
    def graph_input(self, shape: tuple[int, ...], dtype: int = FLOAT) -> Value:
        v = Value(self.name("x"), tuple(shape), dtype, INPUT_BOUND, exact=True)
        self.inputs.append(v)
        self.values.append(v)
        return v

    def const(self, array: np.ndarray, *, usable: bool = False) -> Value:
        """An initializer (or, one time in four, a Constant node) holding ``array``."""
        array = np.asarray(array)
        name = self.name("c")
        if self.draw(st.integers(0, 3)) == 0:
            self.nodes.append(helper.make_node("Constant", [], [name], name=f"n_{name}",
                                               value=numpy_helper.from_array(array, name)))
        else:
            self.inits.append(numpy_helper.from_array(array, name))
        bound = float(np.max(np.abs(array), initial=0.0)) if array.dtype.kind in "fi" else 1.0
        v = Value(name, tuple(array.shape), _onnx_dtype(array.dtype), bound, exact=True)
        if usable:  # a data constant later nodes may read too; shape constants are not
            self.values.append(v)
        return v

    def floats(self, shape: tuple[int, ...], low: float = -1.0, high: float = 1.0) -> np.ndarray:
        """Seeded float32 data of ``shape``: weights and the like."""
        self.counter += 1
        rng = np.random.default_rng([self.seed, self.counter])
        return rng.uniform(low, high, shape).astype(np.float32)

    def ints(self, values) -> Value:
        return self.const(np.asarray(values, np.int64))

    # -- picking operands ------------------------------------------------------------------------
    def pick(self, ok: Callable[[Value], bool] = lambda v: True) -> Value | None:
        """A value that satisfies ``ok``: recent ones more often."""
        pool = [v for v in self.values if ok(v)]
        if not pool:
            return None
        if self.draw(st.booleans()):
            return pool[len(pool) - 1 - self.draw(st.integers(0, min(len(pool) - 1, 4)))]
        return self.draw(st.sampled_from(pool))

    def pick_float(self, grows: bool = False, ok: Callable[[Value], bool] = lambda v: True,
                   limit: float | None = None) -> Value | None:
        """A float value; for value-growing ops one below GROW_LIMIT, else below ``limit``
        (squashed with Tanh if need be)."""
        v = self.pick(lambda v: v.dtype == FLOAT and ok(v))
        limit = GROW_LIMIT if grows else limit
        if v is not None and limit is not None and v.bound > limit:
            v = self.squash(v)
        return v

    def squash(self, v: Value) -> Value:
        (out,) = self.node("Tanh", [v], bound=1.0) or (v,)
        return out

    def partner(self, v: Value, dtype: int = FLOAT) -> Value:
        """An operand that broadcasts with ``v``: an existing value, a constant or an input."""
        fits = [u for u in self.values if u.dtype == dtype and _broadcasts(u.shape, v.shape)
                and (dtype != FLOAT or u.bound <= GROW_LIMIT)]
        choice = self.draw(st.integers(0, 3))
        if choice == 0 and fits:
            return self.draw(st.sampled_from(fits))
        shape = self.broadcast_shape(v.shape)
        if choice == 1 and len(self.inputs) < MAX_INPUTS and dtype == FLOAT:
            return self.graph_input(shape)
        if dtype == FLOAT:
            return self.const(self.floats(shape, -2.0, 2.0), usable=True)
        return self.const(np.asarray(self.floats(shape, -3, 3)).round().astype(NUMPY[dtype]))

    def broadcast_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts with ``shape``: leading dims dropped or added, dims set to 1
        (or grown from 1)."""
        lead = self.draw(st.integers(0, len(shape)))
        out = [1 if self.draw(st.integers(0, 2)) == 0 else d for d in shape[lead:]]
        out = [self.draw(st.integers(2, 3)) if d == 1 and self.draw(st.integers(0, 3)) == 0
               else d for d in out]
        if len(shape) < 4 and self.draw(st.integers(0, 5)) == 0:
            out.insert(0, self.draw(st.integers(1, 2)))
        return tuple(out)

    # -- nodes -----------------------------------------------------------------------------------
    def node(self, op: str, ins: list[Value | None], n_out: int = 1, *, bound: float,
             exact: bool = False, **attrs) -> list[Value] | None:
        """Add ``op`` reading ``ins`` if ONNX infers positive static output shapes for it."""
        names = [self.name("v") for _ in range(n_out)]
        node = helper.make_node(op, [i.name if i else "" for i in ins], names,
                                name=f"n{self.counter}_{op}", **attrs)
        shapes = _infer(node, [i for i in ins if i is not None],
                        {t.name: t for t in self.inits} | _constant_nodes(self.nodes))
        if shapes is None:
            return None
        self.nodes.append(node)
        self.read.update(i.name for i in ins if i is not None)
        outs = [Value(n, s, dt, bound, exact) for n, (s, dt) in zip(names, shapes)]
        self.values.extend(outs)
        return outs

    # -- the model -------------------------------------------------------------------------------
    def model(self, extra_outputs: list[Value]) -> FuzzGraph:
        made = [v for v in self.values if v not in self.inputs
                and any(v.name in n.output for n in self.nodes)]
        outs = [v for v in made if v.name not in self.read]
        outs += [v for v in extra_outputs if v not in outs]
        if self.draw(st.integers(0, 9)) == 0:  # a graph input returned as it is
            outs.append(self.inputs[0])
        if self.inits and self.draw(st.integers(0, 9)) == 0:  # and an initializer
            t = self.inits[0]
            outs.append(Value(t.name, tuple(t.dims), t.data_type))
        declared = not self.symbolic

        def info(v: Value, symbolic_dim0: bool) -> onnx.ValueInfoProto:
            shape: list = list(v.shape)
            if symbolic_dim0 and shape and shape[0] > 1:
                shape[0] = f"d{shape[0]}"
            if not (declared or symbolic_dim0):  # outputs of a graph with symbolic inputs
                shape = [None] * len(shape)
            return helper.make_tensor_value_info(v.name, v.dtype, shape)

        graph = helper.make_graph(self.nodes, "fuzz", [info(v, self.symbolic) for v in self.inputs],
                                  [info(v, False) for v in outs], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  ir_version=10)
        rng = np.random.default_rng(self.seed)
        inputs = {v.name: (rng.uniform(-INPUT_BOUND, INPUT_BOUND, v.shape).astype(np.float32)
                           if v.dtype == FLOAT else rng.integers(0, 2, v.shape).astype(bool))
                  for v in self.inputs}
        return FuzzGraph(model, inputs, frozenset(n.op_type for n in self.nodes))


def _onnx_dtype(dtype: np.dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether ``a`` broadcasts to ``b`` without changing ``b``'s shape."""
    if len(a) > len(b):
        return False
    return all(x in (1, y) for x, y in zip(reversed(a), reversed(b)))


def _constant_nodes(nodes: list[onnx.NodeProto]) -> dict[str, TensorProto]:
    return {n.output[0]: n.attribute[0].t for n in nodes if n.op_type == "Constant"}


def _infer(node: onnx.NodeProto, ins: list[Value], data: dict[str, TensorProto]
           ) -> list[tuple[tuple[int, ...], int]] | None:
    """(shape, dtype) of each output by ONNX's inference, or None if it fails or is not
    static and positive (a drawn attribute that does not fit its input)."""
    types = {v.name: helper.make_tensor_type_proto(v.dtype, v.shape) for v in ins}
    try:
        schema = onnx.defs.get_schema(node.op_type, OPSET)
        out = onnx.shape_inference.infer_node_outputs(
            schema, node, types, {k: data[k] for k in node.input if k in data},
            opset_imports=[helper.make_opsetid("", OPSET)])
    except Exception:  # noqa: BLE001 - onnx raises several kinds for a node that does not fit
        return None
    shapes = []
    for name in node.output:
        t = out.get(name)
        if t is None or not t.tensor_type.HasField("shape"):
            return None
        dims = tuple(d.dim_value if d.HasField("dim_value") else -1
                     for d in t.tensor_type.shape.dim)
        if any(d <= 0 for d in dims) or math.prod(dims) > 4096:
            return None
        shapes.append((dims, t.tensor_type.elem_type))
    return shapes


# -- one function per op: pick operands, draw attributes, add the node (or return None) ----------

Gen = Callable[[Builder], "list[Value] | None"]


def _unary(op: str, bound: Callable[[float], float] = lambda b: b, exact: bool = False,
           limit: float | None = None) -> Gen:
    def gen(b: Builder) -> list[Value] | None:
        v = b.pick_float(limit=limit)
        return v and b.node(op, [v], bound=bound(v.bound), exact=exact and v.exact)

    return gen


def _binary(op: str) -> Gen:
    def gen(b: Builder) -> list[Value] | None:
        v = b.pick_float(grows=op == "Mul")
        if v is None:
            return None
        w = b.partner(v)
        if op == "Div":  # a divisor bounded away from zero: |w| + 0.5
            w = (b.node("Abs", [w], bound=w.bound) or [w])[0]
            w = (b.node("Add", [w, b.const(np.float32(0.5))], bound=w.bound + 0.5) or [w])[0]
            return b.node("Div", [v, w], bound=v.bound * 2)
        bound = v.bound * w.bound if op == "Mul" else v.bound + w.bound
        pair = [v, w] if b.draw(st.booleans()) else [w, v]
        return b.node(op, pair, bound=bound, exact=False)

    return gen


def gen_leaky_relu(b: Builder) -> list[Value] | None:
    v = b.pick_float()
    alpha = b.draw(st.sampled_from([0.01, 0.2, 1.5]))
    return v and b.node("LeakyRelu", [v], bound=v.bound * max(1.0, alpha), alpha=alpha)


def gen_exp(b: Builder) -> list[Value] | None:
    v = b.pick_float()
    if v is None:
        return None
    if v.bound > 4:
        (v,) = b.node("Clip", [v, b.const(np.float32(-4)), b.const(np.float32(4))],
                      bound=4.0) or (None,)
    return v and b.node("Exp", [v], bound=math.exp(min(v.bound, 4.0)))


def gen_clip(b: Builder) -> list[Value] | None:
    v = b.pick_float()
    if v is None:
        return None
    lo, hi = sorted(b.draw(st.lists(st.sampled_from([-2.0, -0.5, 0.0, 0.5, 1.0]), min_size=2,
                                    max_size=2)))
    which = b.draw(st.sampled_from(["both", "min", "max"]))
    ins = [v, b.const(np.float32(lo)) if which != "max" else None,
           b.const(np.float32(hi)) if which != "min" else None]
    while ins[-1] is None:
        ins.pop()
    return b.node("Clip", ins, bound=v.bound if which == "min" else max(abs(lo), abs(hi)))


def gen_matmul(b: Builder) -> list[Value] | None:
    v = b.pick_float(grows=True, ok=lambda v: v.rank >= 1)
    if v is None:
        return None
    k, n = v.shape[-1], b.draw(st.integers(1, 4))
    kind = b.draw(st.integers(0, 3))
    if kind == 0:  # a vector on the right: the result loses a dim
        return b.node("MatMul", [v, b.const(b.floats((k,)), usable=True)], bound=k * v.bound)
    if kind == 1 and v.rank >= 2:  # the constant on the left: (n, rows) @ v
        rows = v.shape[-2]
        return b.node("MatMul", [b.const(b.floats((n, rows))), v], bound=rows * v.bound)
    batch = [b.draw(st.sampled_from([1, d])) for d in v.shape[:-2]] if kind == 2 else []
    return b.node("MatMul", [v, b.const(b.floats((*batch, k, n)))], bound=k * v.bound)


def gen_gemm(b: Builder) -> list[Value] | None:
    v = b.pick_float(grows=True, ok=lambda v: v.rank == 2)
    if v is None:
        return None
    trans_a, trans_b = b.draw(st.integers(0, 1)), b.draw(st.integers(0, 1))
    m, k = v.shape[::-1] if trans_a else v.shape
    n = b.draw(st.integers(1, 4))
    w = b.const(b.floats((n, k) if trans_b else (k, n)))
    alpha, beta = b.draw(st.sampled_from([1.0, 0.5, -2.0])), b.draw(st.sampled_from([1.0, 0.25]))
    ins = [v, w]
    c_shape = b.draw(st.sampled_from([None, (), (n,), (1, n), (m, 1), (m, n)]))
    if c_shape is not None:
        ins.append(b.const(b.floats(c_shape)))
    return b.node("Gemm", ins, bound=abs(alpha) * k * v.bound + beta, alpha=alpha, beta=beta,
                  transA=trans_a, transB=trans_b)


def _spatial_attrs(b: Builder, v: Value, dilate: bool, pad_below_kernel: bool) -> dict | None:
    """kernel_shape, strides, pads (or auto_pad) and dilations for a conv or pool over ``v``;
    None if the window does not fit the padded input."""
    spatial = v.shape[2:]
    kernel = [b.draw(st.integers(1, min(3, d + 1))) for d in spatial]
    attrs: dict = {"kernel_shape": kernel,
                   "strides": [b.draw(st.integers(1, 2)) for _ in spatial]}
    auto = b.draw(st.sampled_from(["NOTSET"] * 4 + ["SAME_UPPER", "SAME_LOWER", "VALID"]))
    dilations = [1] * len(spatial)
    if dilate and not auto.startswith("SAME") and b.draw(st.integers(0, 3)) == 0:
        attrs["dilations"] = dilations = [b.draw(st.integers(1, 2)) for _ in spatial]
    pads = [0] * (2 * len(spatial))
    if auto != "NOTSET":
        attrs["auto_pad"] = auto
        if pad_below_kernel and auto.startswith("SAME"):  # ORT's MaxPool: negative pads
            attrs["strides"] = [min(s, k) for s, k in zip(attrs["strides"], kernel)]
    else:
        top = [k - 1 if pad_below_kernel else k for k in kernel]
        attrs["pads"] = pads = [b.draw(st.integers(0, t)) for t in top * 2]
    n = len(spatial)
    # ONNX's inference (and onnxruntime) round a window that does not fit up to one output
    # instead of refusing it, so the fit is checked here.
    if not auto.startswith("SAME") and any(
            (k - 1) * dl + 1 > d + pads[i] + pads[i + n]
            for i, (k, dl, d) in enumerate(zip(kernel, dilations, spatial))):
        return None
    return attrs


def gen_conv(b: Builder) -> list[Value] | None:
    v = b.pick_float(grows=True, ok=lambda v: v.rank in (3, 4))
    if v is None:
        return None
    c = v.shape[1]
    group = b.draw(st.sampled_from([g for g in (1, 2, c) if c % g == 0]))
    m = group * b.draw(st.integers(1, 2))
    attrs = _spatial_attrs(b, v, dilate=True, pad_below_kernel=False)
    if attrs is None:
        return None
    k = attrs["kernel_shape"]
    ins = [v, b.const(b.floats((m, c // group, *k)))]
    if b.draw(st.booleans()):
        ins.append(b.const(b.floats((m,))))
    if b.draw(st.booleans()):
        del attrs["kernel_shape"]  # optional: it is the weight's shape
    return b.node("Conv", ins, bound=(c // group) * math.prod(k) * v.bound + 1, group=group,
                  **attrs)


def _pool(op: str) -> Gen:
    def gen(b: Builder) -> list[Value] | None:
        v = b.pick_float(ok=lambda v: v.rank in (3, 4))
        if v is None:
            return None
        attrs = _spatial_attrs(b, v, dilate=op == "MaxPool", pad_below_kernel=True)
        if attrs is None:
            return None
        if "pads" in attrs and _ceil_is_safe(v.shape[2:], attrs) and b.draw(st.integers(0, 3)) == 0:
            attrs["ceil_mode"] = 1  # (onnxruntime: not with auto_pad)
        if op == "AveragePool" and b.draw(st.booleans()):
            attrs["count_include_pad"] = 1
        return b.node(op, [v], bound=v.bound, exact=op == "MaxPool" and v.exact, **attrs)

    return gen


def _ceil_is_safe(spatial: tuple[int, ...], attrs: dict) -> bool:
    """Whether ceil_mode=1 keeps no window that starts past the input and its leading pad.
    Where it would, the spec (and byoc, and onnxruntime's kernel) drop that window but ONNX's
    shape inference keeps it. byoc now retypes such a pool (see test_fuzz_regressions.py), but
    onnxruntime itself may refuse the model: its memory planner re-uses buffers by the inferred
    shape ("Shape mismatch attempting to re-use buffer")."""
    n, pads = len(spatial), attrs["pads"]
    for i, (d, k, s) in enumerate(zip(spatial, attrs["kernel_shape"], attrs["strides"])):
        dl = attrs.get("dilations", [1] * n)[i]
        span = d + pads[i] + pads[i + n] - ((k - 1) * dl + 1)
        if (-(-span // s)) * s >= d + pads[i]:  # the last window's start under ceil
            return False
    return True


def gen_concat(b: Builder) -> list[Value] | None:
    v = b.pick(lambda v: v.rank >= 1 and v.dtype in (FLOAT, INT64))
    if v is None:
        return None
    axis = b.draw(st.integers(-v.rank, v.rank - 1))
    parts = [v]
    for _ in range(b.draw(st.integers(1, 2))):
        same = [u for u in b.values if u.dtype == v.dtype and u.rank == v.rank and all(
            a == c for i, (a, c) in enumerate(zip(u.shape, v.shape)) if i != axis % v.rank)]
        if same and b.draw(st.booleans()):
            parts.append(b.draw(st.sampled_from(same)))  # v itself, or a value that fits
        else:
            shape = list(v.shape)
            shape[axis] = b.draw(st.integers(1, 3))
            data = b.floats(tuple(shape))
            parts.append(b.const(data if v.dtype == FLOAT else data.round().astype(np.int64)))
    return b.node("Concat", parts, bound=max(p.bound for p in parts),
                  exact=all(p.exact for p in parts), axis=axis)


def gen_transpose(b: Builder) -> list[Value] | None:
    v = b.pick(lambda v: v.rank >= 1)
    if v is None:
        return None
    attrs = {}
    if b.draw(st.integers(0, 4)):  # no perm: the dims reversed
        attrs["perm"] = list(b.draw(st.permutations(range(v.rank))))
    return b.node("Transpose", [v], bound=v.bound, exact=v.exact, **attrs)


def _factor(b: Builder, size: int) -> list[int]:
    """A random shape of ``size`` elements: its prime factors grouped at random."""
    factors, n, p = [], size, 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    dims = [1] * b.draw(st.integers(1, 4))
    for f in factors:
        dims[b.draw(st.integers(0, len(dims) - 1))] *= f
    return dims


def gen_reshape(b: Builder) -> list[Value] | None:
    v = b.pick()
    if v is None:
        return None
    dims = _factor(b, v.size)
    if b.draw(st.booleans()):
        dims[b.draw(st.integers(0, len(dims) - 1))] = -1
    k = b.draw(st.integers(0, len(dims) - 1))
    if k < v.rank and dims[k] == v.shape[k] and b.draw(st.booleans()):
        dims[k] = 0  # 0: copy the input's dim
    return b.node("Reshape", [v, b.ints(dims)], bound=v.bound, exact=v.exact)


def gen_flatten(b: Builder) -> list[Value] | None:
    v = b.pick()
    if v is None:
        return None
    axis = b.draw(st.integers(-v.rank, v.rank))
    return b.node("Flatten", [v], bound=v.bound, exact=v.exact, axis=axis)


def gen_softmax(b: Builder) -> list[Value] | None:
    v = b.pick_float(ok=lambda v: v.rank >= 1)
    if v is None:
        return None
    return b.node("Softmax", [v], bound=1.0, axis=b.draw(st.integers(-v.rank, v.rank - 1)))


def _reduce(op: str) -> Gen:
    def gen(b: Builder) -> list[Value] | None:
        v = b.pick_float(grows=op == "ReduceSum", ok=lambda v: v.rank >= 1)
        if v is None:
            return None
        axes = b.draw(st.lists(st.integers(-v.rank, v.rank - 1), max_size=v.rank,
                               unique_by=lambda a: a % v.rank))  # no axis twice
        ins = [v, b.ints(axes)] if axes or b.draw(st.booleans()) else [v]
        keep = b.draw(st.integers(0, 1))
        bound = v.bound * (v.size if op == "ReduceSum" else 1)
        return b.node(op, ins, bound=bound, keepdims=keep)

    return gen


def gen_slice(b: Builder) -> list[Value] | None:
    v = b.pick(lambda v: v.rank >= 1)
    if v is None:
        return None
    axes = b.draw(st.lists(st.integers(0, v.rank - 1), min_size=1, max_size=v.rank, unique=True))
    starts, ends, steps = [], [], []
    for a in axes:
        d = v.shape[a]
        step = b.draw(st.sampled_from([1, 1, 2, -1, -2]))
        lo, hi = b.draw(st.integers(-d - 2, d + 2)), b.draw(st.sampled_from(
            [d, 2**62, -(2**62), b.draw(st.integers(-d - 2, d + 2))]))
        starts.append(lo)
        ends.append(hi)
        steps.append(step)
    ins = [v, b.ints(starts), b.ints(ends)]
    if b.draw(st.integers(0, 3)):
        ins.append(b.ints([a - v.rank if b.draw(st.booleans()) else a for a in axes]))
        ins.append(b.ints(steps))
    elif any(s != 1 for s in steps):
        return None
    return b.node("Slice", ins, bound=v.bound, exact=v.exact)


def gen_squeeze(b: Builder) -> list[Value] | None:
    v = b.pick(lambda v: 1 in v.shape)
    if v is None:
        return None
    ones = [i for i, d in enumerate(v.shape) if d == 1]
    axes = b.draw(st.lists(st.sampled_from(ones), min_size=1, unique=True))
    ins = [v, b.ints(axes)] if b.draw(st.integers(0, 3)) else [v]
    return b.node("Squeeze", ins, bound=v.bound, exact=v.exact)


def gen_unsqueeze(b: Builder) -> list[Value] | None:
    v = b.pick(lambda v: v.rank <= 3)
    if v is None:
        return None
    n = b.draw(st.integers(1, 2))
    rank = v.rank + n
    axes = b.draw(st.lists(st.integers(-rank, rank - 1), min_size=n, max_size=n,
                           unique_by=lambda a: a % rank))
    return b.node("Unsqueeze", [v, b.ints(axes)], bound=v.bound, exact=v.exact)


def gen_where(b: Builder) -> list[Value] | None:
    v = b.pick_float()
    if v is None:
        return None
    w = b.partner(v)
    # The condition compares exact values only, so every engine takes the same branch.
    base = b.pick(lambda u: u.exact and u.dtype == FLOAT and _broadcasts(u.shape, v.shape))
    if base is None:
        base = b.const(b.floats(b.broadcast_shape(v.shape)))
    op = b.draw(st.sampled_from(["Greater", "Less"]))
    (cond,) = b.node(op, [base, b.const(np.float32(0.25))], bound=1.0, exact=True) or (None,)
    if cond is None:
        return None
    pair = [v, w] if b.draw(st.booleans()) else [w, v]
    return b.node("Where", [cond, *pair], bound=max(v.bound, w.bound),
                  exact=v.exact and w.exact)


def gen_batchnorm(b: Builder) -> list[Value] | None:
    v = b.pick_float(ok=lambda v: v.rank >= 2)
    if v is None:
        return None
    c = v.shape[1]
    scale, bias, mean = b.floats((c,)), b.floats((c,)), b.floats((c,))
    var = b.floats((c,), 0.5, 2.0)
    eps = b.draw(st.sampled_from([1e-5, 1e-3]))
    bound = (v.bound + 1) / math.sqrt(0.5) + 1
    return b.node("BatchNormalization", [v, *(b.const(a) for a in (scale, bias, mean, var))],
                  bound=bound, epsilon=eps)


def gen_layernorm(b: Builder) -> list[Value] | None:
    v = b.pick_float(ok=lambda v: v.rank >= 1)
    if v is None:
        return None
    axis = b.draw(st.integers(-v.rank, v.rank - 1))
    normalized = v.shape[axis:]
    ins = [v, b.const(b.floats(normalized, 0.5, 1.5))]
    if b.draw(st.booleans()):
        ins.append(b.const(b.floats(normalized)))
    n_out = 1 if b.draw(st.integers(0, 3)) else 3  # Mean and InvStdDev outputs, sometimes
    eps = b.draw(st.sampled_from([1e-5, 1e-2]))
    bound = 1.5 * math.sqrt(math.prod(normalized)) + 1  # |x - mean| / std <= sqrt(n)
    return b.node("LayerNormalization", ins, n_out, bound=bound, axis=axis, epsilon=eps)


def gen_gather(b: Builder) -> list[Value] | None:
    v = b.pick(lambda v: v.rank >= 1)
    if v is None:
        return None
    axis = b.draw(st.integers(-v.rank, v.rank - 1))
    d = v.shape[axis]
    shape = b.draw(st.sampled_from([(), (1,), (2,), (2, 2)]))
    index = np.asarray(b.draw(st.lists(st.integers(-d, d - 1), min_size=math.prod(shape),
                                       max_size=math.prod(shape))), np.int64).reshape(shape)
    return b.node("Gather", [v, b.const(index)], bound=v.bound, exact=v.exact, axis=axis)


def gen_split(b: Builder) -> list[Value] | None:
    v = b.pick(lambda v: v.rank >= 1 and max(v.shape) >= 2)
    if v is None:
        return None
    axis = b.draw(st.sampled_from([a for a, d in enumerate(v.shape) if d >= 2]))
    d = v.shape[axis]
    if b.draw(st.booleans()):
        n = b.draw(st.integers(2, min(d, 3)))
        return b.node("Split", [v], n, bound=v.bound, exact=v.exact, axis=axis, num_outputs=n)
    cut = b.draw(st.integers(1, d - 1))
    return b.node("Split", [v, b.ints([cut, d - cut])], 2, bound=v.bound, exact=v.exact,
                  axis=axis - v.rank if b.draw(st.booleans()) else axis)


def gen_cast(b: Builder) -> list[Value] | None:
    """float -> double -> float (inexact values), or exact float -> int64 and ops on ints."""
    v = b.pick_float()
    if v is None:
        return None
    if not v.exact or b.draw(st.booleans()):
        (d,) = b.node("Cast", [v], bound=v.bound, to=DOUBLE) or (None,)
        if d is None:
            return None
        # Not an operand or output of its own: float32 rounding upstream is far beyond
        # float64's tolerance.
        b.values.remove(d)
        return b.node("Cast", [d], bound=v.bound, to=FLOAT)
    (i,) = b.node("Cast", [v], bound=v.bound, exact=True, to=INT64) or (None,)
    if i is None:
        return None
    if b.draw(st.booleans()):  # integer arithmetic, exact on every engine
        op = b.draw(st.sampled_from(["Add", "Sub", "Mul", "Neg", "Abs"]))  # no int Relu in ORT
        ins = [i] if op in ("Neg", "Abs") else [i, b.partner(i, INT64)]
        (i,) = b.node(op, ins, bound=i.bound * 4, exact=True) or (i,)
    return b.node("Cast", [i], bound=i.bound, exact=True, to=FLOAT)


GENERATORS: dict[str, Gen] = {
    "Add": _binary("Add"), "Sub": _binary("Sub"), "Mul": _binary("Mul"), "Div": _binary("Div"),
    # Sigmoid far below 0 is tiny, and engines' approximations differ there by more than 1e-4
    # of it: inputs beyond 8 are squashed first.
    "Relu": _unary("Relu", exact=True), "Sigmoid": _unary("Sigmoid", lambda b: 1.0, limit=8.0),
    "Tanh": _unary("Tanh", lambda b: 1.0), "Abs": _unary("Abs", exact=True),
    "Neg": _unary("Neg", exact=True), "Exp": gen_exp, "MatMul": gen_matmul, "Gemm": gen_gemm,
    "Conv": gen_conv, "MaxPool": _pool("MaxPool"), "AveragePool": _pool("AveragePool"),
    "Concat": gen_concat, "Transpose": gen_transpose, "Reshape": gen_reshape,
    "Flatten": gen_flatten, "Softmax": gen_softmax, "ReduceMean": _reduce("ReduceMean"),
    "ReduceSum": _reduce("ReduceSum"), "Slice": gen_slice, "Squeeze": gen_squeeze,
    "Unsqueeze": gen_unsqueeze, "Where": gen_where, "Clip": gen_clip,
    "LeakyRelu": gen_leaky_relu, "BatchNormalization": gen_batchnorm,
    "LayerNormalization": gen_layernorm, "Gather": gen_gather, "Split": gen_split,
    "Cast": gen_cast,
}
# Ops the generators may add besides the drawn one (Clip before Exp, Abs/Add in Div...).
OPS = frozenset(GENERATORS) | {"Greater", "Less", "Constant"}


def _input_shape(draw) -> tuple[int, ...]:
    """The first input: often an image batch (N, C, H, W) so convs and pools apply."""
    if draw(st.integers(0, 2)) == 0:
        return (draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(2, 6)),
                draw(st.integers(2, 6)))
    return tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))


@st.composite
def fuzz_graphs(draw, max_nodes: int = 10, ops: tuple[str, ...] = tuple(GENERATORS)
                ) -> FuzzGraph:
    """A random valid ONNX graph of up to ``max_nodes`` drawn ops (each may add a helper
    node or two), with seeded inputs."""
    b = Builder(draw, seed=draw(st.integers(0, 2**32 - 1)), symbolic=draw(st.integers(0, 4)) == 0)
    b.graph_input(_input_shape(draw))
    target = draw(st.integers(1, max_nodes))
    attempts = 0
    while len(b.nodes) < target and attempts < 4 * max_nodes:
        attempts += 1
        GENERATORS[draw(st.sampled_from(ops))](b)
    made = [v for v in b.values if any(v.name in n.output for n in b.nodes)
            and v not in b.inputs]
    if not made:  # every draw missed: one Relu keeps the graph non-empty
        made = b.node("Relu", [b.inputs[0]], bound=INPUT_BOUND) or []
    extra = draw(st.lists(st.sampled_from(made), max_size=2, unique=True))
    return b.model(extra)
