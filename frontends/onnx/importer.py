"""Import an ONNX model into an IRModule.

Initializers and Constant nodes become constants, graph inputs become parameters, every node a
Call whose span is the ONNX node's name (a stable generated one where the node has none). Types
come from ONNX shape inference, symbolic dims kept, except where it departs from the spec (pools
with ceil_mode, and what reads them: see ``Importer._retype``). If/Loop/Scan bodies become
functions whose captured outer values are trailing parameters (see ``byoc.op.control_flow``).

Every node goes through here once, so the per-node path is kept lean: each protobuf field is
read once (``_Node``), types are converted and size-checked once per distinct type, and the
cyclic garbage collector is paused for the import (``byoc.ir.collector``).
"""

from __future__ import annotations

import itertools
import math
import os
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
import onnx.inliner
from onnx import external_data_helper
from google.protobuf.message import DecodeError, EncodeError
from onnx import numpy_helper

from byoc.errors import ModelError
from byoc.files.reading import read_regular
from byoc.ir import (DEFAULTS, NO_ATTRS, UNKNOWN, Call, Constant, Expr, Function, IRModule, Span, TensorType,
                     Tuple, TupleGetItem, TupleType, Type, Var, incomplete)
from byoc.ir.collector import collector_paused
from byoc.op import CANONICAL_OPSET, onnx_bridge, registry, type_rules
from byoc.op.type_rules import CEIL_POOLS, SHAPE_CHECKED, shape_problem
from byoc.runtime import limits

from .external_data import external_array, maybe_external, prepare_external_data
from . import shape_inference
from .upgrade import upgrade_opset


MAX_MODEL_BYTES = (2 << 30) - 1  # protobuf parses no bigger message: such a file is no model


def read_model(path_or_model: str | os.PathLike | bytes | onnx.ModelProto) -> tuple[onnx.ModelProto, str | None]:
    """Parse a model from a path, bytes or a ModelProto; returns it and its folder."""
    if isinstance(path_or_model, onnx.ModelProto):
        return path_or_model, None
    if isinstance(path_or_model, bytes):
        data, base = path_or_model, None
    else:
        path = os.fspath(path_or_model)
        # Only a regular file: a FIFO would block forever, /dev/zero read until memory ends.
        data = read_regular(path, "model", max_bytes=MAX_MODEL_BYTES, error=ModelError,
                            why=" (protobuf's limit for one message: bigger weights go in "
                                "external data files)")
        base = os.path.dirname(os.path.abspath(path))
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ModelError(f"not an ONNX model: truncated or not a ModelProto ({exc})") from None
    if not model.HasField("graph"):
        raise ModelError("not an ONNX model: it has no graph")
    return model, base


def _utf8(what: str, *texts: str | bytes) -> None:
    """Refuse a name that is not UTF-8. ONNX's strings must be; protobuf hands one that is not
    to Python as bytes, which nothing downstream expects. Checked where the importer reads the
    names anyway, so a big model pays no second walk over its protobuf."""
    for text in texts:
        if type(text) is bytes:
            raise ModelError(f"{what} is not valid UTF-8: {text[:60]!r}")


def _all_utf8(what: str, texts: list[str | bytes]) -> None:
    """``_utf8`` for many names at once, at C speed in the usual case: str.join refuses a
    bytes element, and only then are the names looked at one by one for the message."""
    try:
        "".join(texts)  # type: ignore[arg-type]
    except TypeError:
        _utf8(what, *texts)


def _read_only(value: np.ndarray) -> np.ndarray:
    """A constant as byoc holds it: nothing may write into a weight (an output that is one is
    copied before the caller sees it, see byoc/runtime/owned.py)."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    return value


def _constant_value(node: onnx.NodeProto) -> np.ndarray:
    if len(node.attribute) != 1:
        raise ModelError("a Constant needs exactly one value attribute", node.name, "Constant")
    attr = node.attribute[0]
    if attr.name == "sparse_value":
        return _sparse_to_dense(attr.sparse_tensor)
    value = onnx_bridge.attr_value(attr)
    if attr.name in ("value_float", "value_int", "value_string"):
        dtype = {"value_float": np.float32, "value_int": np.int64, "value_string": object}[attr.name]
        return np.array(value, dtype=dtype)
    if attr.name in ("value_floats", "value_ints", "value_strings"):
        dtype = {"value_floats": np.float32, "value_ints": np.int64, "value_strings": object}[attr.name]
        return np.array(value, dtype=dtype)
    if attr.name == "value":
        return value
    raise ModelError(f"unknown Constant attribute {attr.name!r}", node.name, "Constant")


def _sparse_to_dense(sparse: onnx.SparseTensorProto) -> np.ndarray:
    """A sparse tensor made dense; its declared size and every index are checked first."""
    name = sparse.values.name
    dims = [int(d) for d in sparse.dims]
    values = numpy_helper.to_array(sparse.values)
    why = limits.too_big(dims, values.dtype.itemsize)
    if why:
        raise ModelError(f"sparse tensor {name!r}: its dense {why}")
    indices = numpy_helper.to_array(sparse.indices).astype(np.int64, copy=False)
    size = math.prod(dims)
    if indices.ndim == 2:
        if indices.shape[1:] != (len(dims),) or np.any(indices < 0) or np.any(indices >= dims):
            raise ModelError(f"sparse tensor {name!r}: an index is outside its shape {dims}")
        indices = np.ravel_multi_index(indices.T, tuple(dims)) if indices.size else indices[:, 0]
    flat = indices.reshape(-1)
    if flat.size != values.size:
        raise ModelError(f"sparse tensor {name!r}: {values.size} values for {flat.size} indices")
    if np.any(flat < 0) or np.any(flat >= size):
        raise ModelError(f"sparse tensor {name!r}: an index is outside its shape {dims}")
    dense = np.zeros(size, dtype=values.dtype)
    dense[flat] = values.reshape(-1)
    return dense.reshape(tuple(dims))


_GRAPH_ATTRS = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


class _Node:
    """The parts of a NodeProto the importer reads, pulled out of protobuf once: each protobuf
    field read makes a new Python object, which at 100,000 nodes is most of the import."""

    __slots__ = ("proto", "name", "op_type", "domain", "inputs", "outputs", "has_attrs",
                 "has_graph")

    def __init__(self, proto: onnx.NodeProto, op_types: dict[str, str]):
        self.name = name = proto.name
        # One string per op type, shared by every node of it and by their calls and spans.
        op_type = proto.op_type
        self.op_type = op_type = op_types.setdefault(op_type, op_type)
        self.domain = domain = proto.domain
        # A slice copies a repeated field in one C call; tuple() over it iterates in Python.
        self.inputs = inputs = tuple(proto.input[:])
        self.outputs = outputs = tuple(proto.output[:])
        try:  # every name UTF-8 (see _all_utf8), checked in one C call
            "".join((name, op_type, domain, *inputs, *outputs))
        except TypeError:
            _utf8("a node name", name)
            _utf8("a node's op type, domain or a tensor it reads or writes", op_type, domain,
                  *inputs, *outputs)
        attributes = proto.attribute
        self.has_attrs = bool(attributes)
        # Kept only where its attributes are read later: every wrapper kept alive is one more
        # entry in protobuf's table of live wrappers, and most nodes have no attributes.
        self.proto = proto if attributes or op_type == "Constant" else None
        self.has_graph = self.has_attrs and any(a.type in _GRAPH_ATTRS for a in attributes)


def _topological(nodes: list[_Node], names: list[str], known: set[str], outer) -> list[int]:
    """Node indices in an order where every input is produced first; errors name the culprit.

    A graph already in order (the usual case) keeps its order; otherwise Kahn's algorithm.
    """
    producer: dict[str, int] = {}
    ahead: list[tuple[int, str]] = []  # (node, input) not written by an earlier node, not known
    for i, node in enumerate(nodes):  # one pass: the usual graph is in order
        for name in _all_inputs(node) if node.has_graph else node.inputs:
            if name and name not in producer and name not in known:
                ahead.append((i, name))
        for out in node.outputs:
            if not out:
                continue
            if out in producer:
                other = names[producer[out]]
                raise ModelError(f"writes tensor {out!r}, which node {other!r} writes too",
                                 names[i], node.op_type)
            if out in known:
                raise ModelError(f"writes tensor {out!r}, which is a graph input or initializer",
                                 names[i], node.op_type)
            producer[out] = i
    in_order = True
    for i, name in ahead:  # written by a later node (out of order), an outer graph, or none
        if name in producer:
            in_order = False
        elif not outer(name):
            raise ModelError(f"reads tensor {name!r}, which no node, input or initializer "
                             "provides", names[i], nodes[i].op_type)
    if in_order:  # the usual case: no dependency sets needed
        return list(range(len(nodes)))
    deps = [{producer[n] for n in _all_inputs(node) if n in producer} for node in nodes]
    waiting = [len(d) for d in deps]
    readers: list[list[int]] = [[] for _ in nodes]
    for i, mine in enumerate(deps):
        for d in mine:
            readers[d].append(i)
    order = [i for i in range(len(nodes)) if waiting[i] == 0]
    k = 0
    while k < len(order):
        for r in readers[order[k]]:
            waiting[r] -= 1
            if waiting[r] == 0:
                order.append(r)
        k += 1
    if len(order) != len(nodes):
        stuck = [names[i] for i in range(len(nodes)) if waiting[i] > 0][:5]
        raise ModelError(f"the graph has a cycle through nodes {stuck}")
    return order


def _all_inputs(node: _Node) -> list[str]:
    """Inputs of a node, including outer values its subgraphs read (implicit inputs)."""
    names = [n for n in node.inputs if n]
    if node.has_graph:
        for attr in node.proto.attribute:
            for g in ([attr.g] if attr.HasField("g") else list(attr.graphs)):
                names.extend(_free_names(g))
    return names


def _free_names(graph: onnx.GraphProto) -> list[str]:
    """Names a subgraph (or its subgraphs) reads but does not define."""
    free: list[str] = []
    stack = [(graph, frozenset())]
    while stack:
        g, outer_defined = stack.pop()
        defined = set(outer_defined)
        defined.update(i.name for i in g.input)
        defined.update(t.name for t in g.initializer)
        defined.update(t.name for t in g.sparse_initializer)
        for node in g.node:
            defined.update(node.output)
        for node in g.node:
            free.extend(n for n in node.input if n and n not in defined)
            for attr in node.attribute:
                for sub in ([attr.g] if attr.HasField("g") else list(attr.graphs)):
                    stack.append((sub, frozenset(defined)))
        free.extend(o.name for o in g.output if o.name not in defined)
    return free


class _Scope:
    """Values by ONNX name in one graph; reads of outer names become captured parameters."""

    def __init__(self, parent: _Scope | None):
        self.parent = parent
        self.values: dict[str, Expr] = {}
        self.captures: dict[str, Var] = {}

    def has(self, name: str) -> bool:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.values:
                return True
            scope = scope.parent
        return False

    def get(self, name: str) -> Expr:
        if name in self.values:
            return self.values[name]
        if name in self.captures:
            return self.captures[name]
        if self.parent is None or not self.parent.has(name):
            raise KeyError(name)
        outer = self.parent.get(name)
        if isinstance(outer, Constant):  # needs no capture: the body holds the constant itself,
            return outer  # so backends see it as one (a Slice's ends, an Unsqueeze's axes)
        var = Var(name, outer.type)
        self.captures[name] = var
        return var


class Importer:
    """Turns one (already upgraded and shape-inferred) ModelProto into an IRModule."""

    def __init__(self, model: onnx.ModelProto, spans: bool = True, base_dir: str | None = None):
        self.model = model
        self.base_dir = base_dir
        # Every static output shape is checked against the allocation limit: read it once.
        self.max_bytes = limits.max_tensor_bytes()
        self.itemsize: dict[str, int] = {name: np.dtype(name).itemsize for name in (
            "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
            "uint64", "uint32", "uint16", "uint8", "bool", "complex64", "complex128")}
        self.keep_spans = spans
        self.opsets = {o.domain or "": o.version for o in model.opset_import}
        _utf8("an opset domain", *self.opsets)
        self.opsets.pop("ai.onnx", None)
        self.used_names: set[str] = set()  # every node name given, and every one generated
        self.generated: Counter[str] = Counter()
        # Each value's type as its serialized TypeProto: a cheap key for the conversion cache,
        # and no protobuf object kept alive per value.
        self.type_keys: dict[str, bytes] = {}
        # Serialized TypeProto -> (type, fully known, why a node output of it is too big).
        self._type_cache: dict[bytes, tuple[Type, bool, str | None]] = {}
        # Each graph's nodes, read once here (names are needed up front for spans): by id of
        # the GraphProto, which the entry keeps alive so that the id stays its own.
        self._nodes: dict[int, tuple[onnx.GraphProto, list[_Node]]] = {}
        # Values whose type byoc corrected from ONNX's inference (see _retype).
        self.retyped: set[str] = set()
        self.entries: dict[str, Any] = {}  # registry entries by op, looked up once per op
        # One bytes object per distinct type, shared by every value of it: the conversion cache
        # then matches it by identity, and 100,000 copies do not stay alive until the end.
        shared: dict[bytes, bytes] = {}
        self.op_types: dict[str, str] = {}
        named = 0  # node names given, counted with their repeats
        stack = [model.graph]
        while stack:  # every graph, subgraphs included: declared types and node names
            g = stack.pop()
            _utf8("a graph name", g.name)
            value_names = []
            # One wrapper at a time (a tuple of them all is 100,000 live wrappers on a big graph).
            for vi in itertools.chain(g.input, g.output, g.value_info):
                name = vi.name
                value_names.append(name)
                key = vi.type.SerializeToString()  # empty when unset: then ask (rarely)
                if key or vi.HasField("type"):
                    self.type_keys[name] = shared.setdefault(key, key)
            _all_utf8("a value name", value_names)
            nodes = [_Node(n, self.op_types) for n in g.node]
            self._nodes[id(g)] = (g, nodes)
            names = [n.name for n in nodes if n.name]
            self.used_names.update(names)
            named += len(names)
            for node in nodes:
                if node.has_graph:
                    for attr in node.proto.attribute:
                        if attr.type == onnx.AttributeProto.GRAPH:
                            stack.append(attr.g)
                        elif attr.type == onnx.AttributeProto.GRAPHS:
                            stack.extend(attr.graphs)
        # The names more than one node gives itself: usually none (then the set of names is as
        # long as their list), so that naming a node asks a small set rather than the big one.
        self.repeated: set[str] = set()
        if len(self.used_names) != named:
            counts = Counter(n.name for _, nodes in self._nodes.values() for n in nodes if n.name)
            self.repeated = {name for name, count in counts.items() if count > 1}

    def initializer(self, t: onnx.TensorProto) -> np.ndarray:
        """An initializer's value: external data memory-mapped, declared size checked."""
        _utf8("an initializer name", t.name)
        if any(d < 0 for d in t.dims):  # numpy would read -1 as "whatever fits"
            raise ModelError(f"initializer {t.name!r} has a negative dim: {list(t.dims)}")
        if external_data_helper.uses_external_data(t):
            return _read_only(external_array(t, self.base_dir))
        try:
            return _read_only(numpy_helper.to_array(t))
        except Exception as exc:  # a declared shape its data does not fill, a bad type
            raise ModelError(f"initializer {t.name!r} (shape {list(t.dims)}): its data does not "
                             f"match ({str(exc).splitlines()[0][:200]})") from None

    def defaulted_input(self, name: str, init: Any) -> tuple[Var, np.ndarray]:
        """A graph input with an initializer (dense or sparse): a parameter and its default,
        that initializer, checked against the input's declared type (feeds must match it)."""
        value = self.initializer(init) if isinstance(init, onnx.TensorProto) else \
            _read_only(_sparse_to_dense(init))
        declared = self.type_of(name)
        if not isinstance(declared, TensorType) or declared.dtype is None:
            return Var(name, TensorType(tuple(value.shape), value.dtype.name)), value
        shape = declared.shape
        fits = declared.dtype == value.dtype.name and (shape is None or (
            len(shape) == value.ndim and all(not isinstance(d, int) or d == n
                                             for d, n in zip(shape, value.shape))))
        if not fits:
            raise ModelError(f"graph input {name!r} is {declared}, but its initializer (its "
                             f"default value) is {value.dtype.name}{list(value.shape)}")
        return Var(name, declared), value

    def type_of(self, name: str) -> Type:
        """The declared or inferred type of a value (converted once per distinct type)."""
        return self.type_info(name)[0]

    def type_info(self, name: str) -> tuple[Type, bool, str | None]:
        """A value's type, whether it is fully known, and why a node output of it would be too
        big to allocate (None if it is not): worked out once per distinct type."""
        key = self.type_keys.get(name)
        if key is None:
            return _UNKNOWN_INFO
        info = self._type_cache.get(key)
        if info is None:
            t = onnx_bridge.type_from_proto(onnx.TypeProto.FromString(key))
            info = self._type_cache[key] = (t, not incomplete(t), self.oversized(t))
        return info

    def oversized(self, t: Type) -> str | None:
        """Why a node output of type ``t`` is more than byoc will allocate (None if it is not)."""
        if isinstance(t, TensorType) and t.dtype in self.itemsize and t.is_static:
            itemsize = self.itemsize[t.dtype]  # type: ignore[index]
            if math.prod(t.shape) * itemsize > self.max_bytes:  # type: ignore[arg-type]
                return limits.too_big(t.shape, itemsize)  # type: ignore[arg-type]
        return None

    def graph_nodes(self, graph: onnx.GraphProto) -> list[_Node]:
        """The nodes of a graph, as read up front (read again for a graph not seen then)."""
        entry = self._nodes.get(id(graph))
        if entry is not None and entry[0] is graph:
            return entry[1]
        return [_Node(n, self.op_types) for n in graph.node]

    def span(self, node: _Node) -> Span:
        name = given = node.name
        if not name or name in self.repeated:
            # Stable across runs: op type and how many nodes of that type came before.
            base = name or node.op_type
            while True:
                self.generated[base] += 1
                name = f"{base}_{self.generated[base] - (0 if given else 1)}"
                if name not in self.used_names:
                    break
            self.used_names.add(name)
        return Span(name, node.op_type, tuple(node.outputs))

    def run(self) -> IRModule:
        graph = self.model.graph
        func = self.import_graph(graph, None, top=True)
        attrs = {"opset_imports": dict(self.opsets), "ir_version": self.model.ir_version,
                 "producer": self.model.producer_name, "graph_name": graph.name}
        return IRModule({"main": func}, attrs)

    def import_graph(self, graph: onnx.GraphProto, parent: _Scope | None, top: bool = False) -> Function:
        scope = _Scope(parent)
        init_names = {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}
        # A graph input with an initializer is an input with a default (ONNX IR 4+, as
        # onnxruntime reads it); before IR 4 every initializer had to be listed as an input,
        # and such models mean constants (onnxruntime refuses to feed them).
        overridable = top and self.model.ir_version >= 4
        defaults: dict[str, Any] = {}  # name -> its initializer, for the inputs that have one
        if overridable and any(vi.name in init_names for vi in graph.input):
            defaults = {t.name: t for t in graph.initializer}
            defaults.update((sp.values.name, sp) for sp in graph.sparse_initializer)
        default_values: dict[str, np.ndarray] = {}  # main.attrs[DEFAULTS]
        params: list[Var] = []
        for vi in graph.input:
            if vi.name in init_names and top and not overridable:
                continue
            if vi.name in init_names and overridable:
                var, default_values[vi.name] = self.defaulted_input(vi.name, defaults[vi.name])
                params.append(var)
                scope.values[vi.name] = var
                continue
            var = Var(vi.name, self.type_of(vi.name))
            t = var.type
            sized = isinstance(t, TensorType) and t.is_static and t.dtype not in (None, "object")
            if top and sized:
                why = limits.too_big(t.shape, np.dtype(t.dtype).itemsize)  # type: ignore[arg-type]
                if why:  # no run could be given it, and made-up inputs must not try
                    raise ModelError(f"graph input {vi.name!r}: its {why}")
            params.append(var)
            scope.values[vi.name] = var
        for t in graph.initializer:
            if t.name in scope.values and (not top or overridable):
                continue  # a body's input shadows it; main's input has it as its default
            scope.values[t.name] = Constant(self.initializer(t), t.name)
        for sp in graph.sparse_initializer:
            if sp.values.name in defaults:
                continue
            scope.values[sp.values.name] = Constant(_read_only(_sparse_to_dense(sp)),
                                                    sp.values.name)

        nodes = self.graph_nodes(graph)
        spans = [self.span(n) for n in nodes] if self.keep_spans else [None] * len(nodes)
        names = [s.name for s in spans] if self.keep_spans else [n.name for n in nodes]
        known = set(scope.values)
        order = _topological(nodes, names, known, scope.has)
        for i in order:
            self.import_node(nodes[i], spans[i], scope)

        outs: list[Expr] = []
        for o in graph.output:
            try:
                outs.append(scope.get(o.name))
            except KeyError:
                raise ModelError(f"graph output {o.name!r} is never computed") from None
        body: Expr = outs[0] if len(outs) == 1 and top else Tuple(tuple(outs))
        params.extend(scope.captures.values())
        attrs: dict[str, Any] = {"output_names": [o.name for o in graph.output]}
        if default_values:
            attrs[DEFAULTS] = default_values
        if scope.captures:
            attrs["captures"] = len(scope.captures)
        return Function(tuple(params), body, attrs)

    def import_node(self, node: _Node, span: Span | None, scope: _Scope) -> None:
        # Runs once per node of the model: scope and type lookups are inlined where they hit.
        label = span.name if span is not None else node.name
        domain = node.domain if node.domain != "ai.onnx" else ""
        op = f"{domain}.{node.op_type}" if domain else node.op_type
        if op == "Constant":
            try:
                value = _constant_value(node.proto)
            except (TypeError, ValueError) as exc:
                raise ModelError(f"bad value: {exc}", label, "Constant") from None
            scope.values[node.outputs[0]] = Constant(_read_only(value), node.outputs[0])
            return
        entry = self.entries.get(op)
        if entry is None:
            entry = registry.lookup(op)
            if entry is None:
                where = f" in domain {domain!r}" if domain else ""
                raise ModelError(f"unknown op {node.op_type!r}{where}", label, node.op_type)
            self.entries[op] = entry
        attrs = self.import_attrs(node.proto, label, entry, scope) if node.has_attrs else NO_ATTRS
        values = scope.values
        args: list[Expr | None] = [(values.get(name) or scope.get(name)) if name else None
                                   for name in node.inputs]
        while args and args[-1] is None:
            args.pop()
        if node.has_graph and any(isinstance(v, Function) for v in attrs.values()):
            args.extend(self._captures_for(node, attrs, scope))
        if op in SHAPE_CHECKED:
            _check_shapes(node.op_type, args, attrs, label)
        outputs = node.outputs
        while len(outputs) > 1 and not outputs[-1]:
            outputs = outputs[:-1]
        n = len(outputs)
        # Types ONNX got wrong (see _retype); an empty set in almost every model.
        retype = (op in CEIL_POOLS and "ceil_mode" in attrs) or (
            self.retyped and not self.retyped.isdisjoint(node.inputs))
        if n == 1 and not retype:  # the usual case, spared the lists of the general one
            out = outputs[0]
            t, known, why = self.type_info(out) if out else _UNKNOWN_INFO
            if not known:
                t = self._infer(entry, attrs, args, 1, [t])[0]
                why = self.oversized(t)
            if why:
                raise ModelError(f"its output {why}", label, node.op_type)
            if out:
                values[out] = Call(op, tuple(args), attrs, t, span)
            return
        infos = [self.type_info(o) if o else _UNKNOWN_INFO for o in outputs]
        types = [t for t, _, _ in infos]
        if retype:
            types = self._retype(node, entry, attrs, args, outputs, types)
            whys = [self.oversized(t) for t in types]
        elif all(known for _, known, _ in infos):
            whys = [why for _, _, why in infos]
        else:
            types = self._infer(entry, attrs, args, n, types)
            whys = [self.oversized(t) for t in types]
        for why in whys:
            if why:
                raise ModelError(f"its output {why}", label, node.op_type)
        if n == 1:
            if outputs[0]:
                values[outputs[0]] = Call(op, tuple(args), attrs, types[0], span)
            return
        call = Call(op, tuple(args), attrs, TupleType(tuple(types)), span)
        for i, o in enumerate(outputs):
            if o:
                values[o] = TupleGetItem(call, i)

    def _retype(self, node: _Node, entry, attrs: dict[str, Any], args: list,
                outputs: tuple[str, ...], onnx_types: list[Type]) -> list[Type]:
        """Types byoc derives itself rather than take ONNX's: a pool's with ``ceil_mode`` (see
        ``type_rules.ceil_pool_types``), and those of every node reading a value whose type
        that changed, by byoc's type rules over the corrected types (bodies that read one
        directly are typed that way too; an If, Loop or Scan keeps ONNX's output types). Its
        outputs are then marked changed where they differ from ONNX's."""
        if node.has_graph:
            types = onnx_types
        elif not self.retyped.isdisjoint(node.inputs):
            types = self._infer(entry, attrs, args, len(outputs), [UNKNOWN] * len(outputs))
        else:
            types = type_rules.ceil_pool_types(attrs, [a and a.type for a in args], onnx_types)
        for o, old, t in zip(outputs, onnx_types, types):
            if o and t != old:
                self.retyped.add(o)
        return types

    def _infer(self, entry, attrs, args, n, known: list[Type]) -> list[Type]:
        if entry.kernel_source == "control_flow":
            body = attrs.get("then_branch") or attrs.get("body")
            fields = body.body.fields if isinstance(body.body, Tuple) else (body.body,)
            skip = 1 if "body" in attrs and entry.name == "Loop" else 0
            inferred = [f.type for f in fields[skip:skip + n]]
        else:
            try:
                inferred = entry.type_rule(
                    attrs, [None if a is None else a.type for a in args], n,
                    [a.value if isinstance(a, Constant) else None for a in args])
            except Exception:  # inference is best effort; the run still checks real shapes
                inferred = [UNKNOWN] * n
        return [k if k is not UNKNOWN else (inferred[i] if i < len(inferred) else UNKNOWN)
                for i, k in enumerate(known)]

    def import_attrs(self, node: onnx.NodeProto, label: str, entry, scope: _Scope) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        schema = entry.schema
        for attr in node.attribute:
            _utf8("an attribute name", attr.name)
            if attr.ref_attr_name:
                raise ModelError(f"attribute {attr.name!r} refers to a function attribute outside "
                                 "a function", label, node.op_type)
            if schema is not None and attr.name not in schema.attributes \
                    and entry.kernel_source != "onnxruntime":
                raise ModelError(f"unknown attribute {attr.name!r}", label, node.op_type)
            if schema is not None and attr.name in schema.attributes:
                expected = int(schema.attributes[attr.name].type)
                if attr.type != expected and attr.type != onnx.AttributeProto.UNDEFINED:
                    got = onnx.AttributeProto.AttributeType.Name(attr.type)
                    want = onnx.AttributeProto.AttributeType.Name(expected)
                    raise ModelError(f"attribute {attr.name!r} is {got}, the op wants {want}",
                                     label, node.op_type)
            try:
                attrs[attr.name] = onnx_bridge.attr_value(
                    attr, graph=lambda g: self.import_graph(g, scope))
            except ModelError:
                raise
            except Exception as exc:
                raise ModelError(f"bad attribute {attr.name!r}: {exc}", label,
                                 node.op_type) from None
        return attrs

    def _captures_for(self, node: onnx.NodeProto, attrs: dict[str, Any], scope: _Scope) -> list[Expr]:
        """Give every body of a control-flow node the same trailing capture parameters."""
        bodies = {k: v for k, v in attrs.items() if isinstance(v, Function)}
        names: list[str] = []
        for f in bodies.values():
            c = f.attrs.get("captures", 0)
            for p in f.params[len(f.params) - c:]:
                if p.name not in names:
                    names.append(p.name)
        if not names:
            return []
        for key, f in bodies.items():
            c = f.attrs.get("captures", 0)
            formal = f.params[:len(f.params) - c]
            mine = {p.name: p for p in f.params[len(f.params) - c:]}
            caps = [mine.get(n) or Var(n, scope.get(n).type) for n in names]
            attrs[key] = Function(formal + tuple(caps), f.body, {**f.attrs, "captures": len(names)})
        return [scope.get(n) for n in names]


_UNKNOWN_INFO: tuple[Type, bool, str | None] = (UNKNOWN, False, None)


def load_onnx(path_or_model: Any, *, upgrade: bool = True, infer_shapes: bool = True,
              spans: bool = True, input_shapes: Mapping[str, tuple] | None = None) -> IRModule:
    """Import an ONNX model (a path, bytes or a ModelProto) into an IRModule.

    The model is upgraded to the canonical opset where onnx's version converter can, its local
    functions are inlined, and ONNX shape inference fills in the types. ``spans=False`` leaves
    spans out (only to measure what they cost: errors then name nodes less well).
    ``input_shapes`` declares graph inputs' shapes first (a dim: an int, a name, or None for
    unnamed), so the types inferred are those of these shapes.
    """
    with collector_paused():  # see collector_paused: a big model is many small objects
        return _load(path_or_model, upgrade, infer_shapes, spans, input_shapes or {})


def _load(path_or_model: Any, upgrade: bool, infer_shapes: bool, spans: bool,
          input_shapes: Mapping[str, tuple] | None = None) -> IRModule:
    model, base_dir = read_model(path_or_model)
    if input_shapes:
        model = _copy_if_needed(model, path_or_model)
        _declare_shapes(model, input_shapes)
    # Serialized again even when read from bytes: protobuf writes each field one way, and the
    # test for external data counts on that (a file may spell a field in other ways, e.g. an
    # over-long varint). Shape inference then takes these bytes.
    data = _serialized(model)
    if data is None or maybe_external(data):
        model = _copy_if_needed(model, path_or_model)
        if prepare_external_data(model, base_dir):
            data = None  # attribute tensors were filled in: the bytes are not the model's now
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    # The opsets as the file declares them (``opset_imports``: as byoc runs it, upgraded).
    declared = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}
    if opset is not None and opset > CANONICAL_OPSET:
        raise ModelError(f"opset {opset} is newer than the newest this byoc supports "
                         f"({CANONICAL_OPSET})")
    if model.functions:
        try:
            model = onnx.inliner.inline_local_functions(model)
        except Exception as exc:
            raise ModelError(f"cannot inline the model's local functions: {exc}") from None
        data = None
    if upgrade and opset is not None and opset < CANONICAL_OPSET:
        model = upgrade_opset(model, CANONICAL_OPSET)
        data = None
    if infer_shapes:
        model = shape_inference.infer_shapes(model, data)
    mod = Importer(model, spans=spans, base_dir=base_dir).run()
    mod.attrs["declared_opsets"] = declared
    return mod


def _declare_shapes(model: onnx.ModelProto, shapes: Mapping[str, tuple]) -> None:
    """Give graph inputs these shapes (in place)."""
    for value in model.graph.input:
        shape = shapes.get(value.name)
        if shape is None or not value.type.HasField("tensor_type"):
            continue
        tensor = value.type.tensor_type
        tensor.ClearField("shape")
        tensor.shape.SetInParent()
        for d in shape:
            dim = tensor.shape.dim.add()
            if isinstance(d, str):
                dim.dim_param = d
            elif d is not None:
                dim.dim_value = int(d)


def _serialized(model: onnx.ModelProto) -> bytes | None:
    """A ModelProto's bytes, or None where protobuf cannot serialize it (over 2 GB)."""
    try:
        return model.SerializeToString()
    except EncodeError:
        return None


def _copy_if_needed(model: onnx.ModelProto, original: Any) -> onnx.ModelProto:
    """Never change a ModelProto the caller handed us (external data is filled in place)."""
    if isinstance(original, onnx.ModelProto):
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        return copy
    return model


def _check_shapes(op: str, args: list, attrs: Mapping[str, Any], label: str) -> None:
    """An op's input shapes against each other (a Conv's channels and weights, a MatMul's
    inner dims, ...), where they are known."""
    shapes = [a.type.shape if a is not None and isinstance(a.type, TensorType) else None
              for a in args]
    problem = shape_problem(op, shapes, dict(attrs))
    if problem:
        raise ModelError(problem, label, op)
