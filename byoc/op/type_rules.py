"""Type rules: the output types of a call from its argument types and attributes.

A few cheap hand rules cover the ops passes create most (elementwise, broadcast, compare);
every other op asks ONNX's own shape inference for that one node, so every op with a schema
has a correct rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from ..ir import UNKNOWN, Dim, TensorType, Type
from . import onnx_bridge

# (attrs, argument types (None = omitted), number of outputs, constant argument values) -> types
TypeRule = Callable[[dict[str, Any], Sequence[Type | None], int, Sequence[np.ndarray | None]],
                    list[Type]]


def broadcast_shapes(*shapes: tuple[Dim, ...] | None) -> tuple[Dim, ...] | None:
    """numpy broadcasting over dims that may be symbolic (None where it cannot be known)."""
    if any(s is None for s in shapes):
        return None
    rank = max(len(s) for s in shapes)  # type: ignore[arg-type]
    out: list[Dim] = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}  # type: ignore
        dims.discard(1)
        if not dims:
            out.append(1)
        elif len(dims) == 1:
            out.append(dims.pop())
        else:
            ints = {d for d in dims if isinstance(d, int)}
            out.append(ints.pop() if len(ints) == 1 else None)
    return tuple(out)


def same_as_first(attrs, types, n, values) -> list[Type]:
    return [types[0] or UNKNOWN]


def dtype_of_first(attrs, types, n, values) -> list[Type]:
    """Outputs of the first input's dtype and an unknown shape (ops no schema describes)."""
    first = types[0] if types else None
    return [TensorType(None, first.dtype) if isinstance(first, TensorType) else UNKNOWN] * n


def broadcast(attrs, types, n, values) -> list[Type]:
    tensors = [t for t in types if isinstance(t, TensorType)]
    if not tensors:
        return [UNKNOWN]
    return [TensorType(broadcast_shapes(*(t.shape for t in tensors)), tensors[0].dtype)]


def compare(attrs, types, n, values) -> list[Type]:
    return [TensorType(broadcast(attrs, types, n, values)[0].shape, "bool")]  # type: ignore


def where(attrs, types, n, values) -> list[Type]:
    t = broadcast(attrs, types, n, values)[0]
    dtype = types[1].dtype if isinstance(types[1], TensorType) else None
    return [TensorType(t.shape, dtype)]  # type: ignore[union-attr]


def onnx_inference(op: str, opset_version: int) -> TypeRule:
    """A rule that runs ONNX shape inference on the single node."""
    domain, op_type = onnx_bridge.split_op(op)

    def rule(attrs, types, n, values) -> list[Type]:
        schema = onnx.defs.get_schema(op_type, opset_version, domain)
        ins = [f"i{k}" if t is not None else "" for k, t in enumerate(types)]
        outs = [f"o{k}" for k in range(n)]
        node = helper.make_node(op_type, ins, outs, domain=domain)
        node.attribute.extend(onnx_bridge.attr_to_proto(k, v) for k, v in attrs.items()
                              if not k.startswith("_"))
        in_types = {name: onnx_bridge.type_to_proto(t) for name, t in zip(ins, types) if name}
        data = {name: numpy_helper.from_array(v, name) for name, v in zip(ins, values)
                if name and v is not None and v.dtype != object}
        result = shape_inference.infer_node_outputs(
            schema, node, in_types, data,
            opset_imports=[helper.make_opsetid(domain, opset_version)])
        out = [onnx_bridge.type_from_proto(result[o]) if o in result else UNKNOWN for o in outs]
        return ceil_pool_types(attrs, types, out) if pools_by_spec else out

    pools_by_spec = not domain and op_type in CEIL_POOLS
    return rule


CEIL_POOLS = frozenset({"MaxPool", "AveragePool", "LpPool"})
CONVS = frozenset({"Conv", "ConvTranspose"})


def conv_shape_problem(op: str, x_shape: Sequence[Dim] | None, w_shape: Sequence[Dim] | None,
                       group: int, b_shape: Sequence[Dim] | None = None) -> str | None:
    """What is wrong between a Conv's (or ConvTranspose's) input, weights and bias, where their
    dims are known, or None: ONNX's shape inference takes the channels as given, and a kernel
    would read its weights or bias short or past their end."""
    if x_shape is None or w_shape is None:
        return None
    if not isinstance(group, int) or group < 1:
        return f"group {group!r}: it must be a positive integer"
    out = (w_shape[0] if op == "Conv" else
           w_shape[1] * group if len(w_shape) > 1 and isinstance(w_shape[1], int) else None)
    if b_shape is not None and (len(b_shape) != 1 or (isinstance(b_shape[0], int)
                                                      and isinstance(out, int)
                                                      and b_shape[0] != out)):
        return f"bias of shape {tuple(b_shape)} for {out} output channels"
    if len(w_shape) != len(x_shape):
        return f"weights of rank {len(w_shape)} for an input of rank {len(x_shape)}"
    if len(x_shape) < 3:
        return f"an input of rank {len(x_shape)}: it needs a batch, channels and spatial dims"
    c, w0, w1 = x_shape[1], w_shape[0], w_shape[1]
    if op == "Conv":
        if isinstance(c, int) and isinstance(w1, int) and c != w1 * group:
            return (f"input has {c} channels, its weights {w_shape} take {w1} x group {group} "
                    f"= {w1 * group}")
        if isinstance(w0, int) and w0 % group:
            return f"{w0} output channels do not split into group {group}"
    elif isinstance(c, int) and isinstance(w0, int) and c != w0:
        return f"input has {c} channels, its weights {w_shape} take {w0}"
    elif isinstance(c, int) and c % group:
        return f"{c} input channels do not split into group {group}"
    return None


def _known(d: Dim) -> bool:
    return isinstance(d, int)


def matmul_shape_problem(a: Sequence[Dim] | None, b: Sequence[Dim] | None) -> str | None:
    """What is wrong between a MatMul's operands' shapes, where known, or None."""
    if a is None or b is None:
        return None
    if not a or not b:
        return "a scalar operand: MatMul takes tensors of rank 1 or more"
    k_a, k_b = a[-1], (b[-2] if len(b) > 1 else b[0])
    if _known(k_a) and _known(k_b) and k_a != k_b:
        return (f"inner dims differ: A {tuple(a)} has {k_a} columns, B {tuple(b)} has {k_b} "
                "rows")
    batch_a, batch_b = a[:-2], b[:-2]
    for x, y in zip(reversed(batch_a), reversed(batch_b)):
        if _known(x) and _known(y) and 1 not in (x, y) and x != y:
            return f"batch dims of A {tuple(a)} and B {tuple(b)} do not broadcast"
    return None


def gemm_shape_problem(a: Sequence[Dim] | None, b: Sequence[Dim] | None,
                       c: Sequence[Dim] | None, attrs: dict[str, Any]) -> str | None:
    """What is wrong between a Gemm's A, B and C shapes, where known, or None."""
    if a is None or b is None:
        return None
    if len(a) != 2 or len(b) != 2:
        return f"A {tuple(a)} and B {tuple(b)}: Gemm takes matrices (rank 2)"
    ta, tb = attrs.get("transA", 0), attrs.get("transB", 0)
    (m, k_a), (k_b, n) = (a[::-1] if ta else a), (b[::-1] if tb else b)
    if _known(k_a) and _known(k_b) and k_a != k_b:
        return (f"inner dims differ: A {tuple(a)}{' transposed' if ta else ''} has {k_a} "
                f"columns, B {tuple(b)}{' transposed' if tb else ''} has {k_b} rows")
    if c is not None:
        if len(c) > 2:
            return f"C {tuple(c)} does not broadcast to the {m} x {n} product"
        for x, y in zip(reversed(c), (n, m)):
            if _known(x) and _known(y) and x not in (1, y):
                return f"C {tuple(c)} does not broadcast to the {m} x {n} product"
    return None


_BN_PARAMS = ("scale", "B", "mean", "var")


def batch_norm_shape_problem(shapes: Sequence[Sequence[Dim] | None],
                             attrs: dict[str, Any]) -> str | None:
    """What is wrong between a BatchNormalization's input and its per-channel parameters
    (per element with opset 7's ``spatial=0``: not checked)."""
    x = shapes[0]
    if x is None or attrs.get("spatial", 1) == 0:
        return None
    if len(x) < 2:
        return f"an input of rank {len(x)}: it needs a batch and channels"
    for name, p in zip(_BN_PARAMS, shapes[1:5]):
        if p is None:
            continue
        if len(p) != 1:
            return f"{name} of shape {tuple(p)}: one value a channel (rank 1)"
        if _known(p[0]) and _known(x[1]) and p[0] != x[1]:
            return f"{name} has {p[0]} values for {x[1]} channels"
    return None


def shape_problem(op: str, shapes: Sequence[Sequence[Dim] | None], attrs: dict[str, Any]
                  ) -> str | None:
    """What is wrong between an op's input shapes that ONNX's shape inference lets through
    (it takes them as given, and a kernel would read short or past an end), or None; for the
    ops in SHAPE_CHECKED."""
    def at(k: int) -> Sequence[Dim] | None:
        return shapes[k] if k < len(shapes) else None

    if op in CONVS:
        return conv_shape_problem(op, at(0), at(1), attrs.get("group", 1), at(2))
    if op == "MatMul":
        return matmul_shape_problem(at(0), at(1))
    if op == "Gemm":
        return gemm_shape_problem(at(0), at(1), at(2), attrs)
    if op == "BatchNormalization":
        return batch_norm_shape_problem([at(k) for k in range(5)], attrs)
    return None


SHAPE_CHECKED = CONVS | {"MatMul", "Gemm", "BatchNormalization"}


def ceil_pool_types(attrs: dict[str, Any], types: Sequence[Type | None], out: list[Type]
                    ) -> list[Type]:
    """A pool's output types with ``ceil_mode`` set, spatial dims as the spec says.

    ONNX's shape inference (onnx 1.23) keeps a last window that starts past the input when
    ``pads`` is given; the spec drops a window that would start in the right padding (if
    ``(out - 1) * stride >= in + pad_begin``, one fewer), and so do byoc's kernels and
    onnxruntime. Shapes come from the kernels' own window geometry, so type and run agree.
    Types are left as they are where the input's spatial dims are not all known.
    """
    x = types[0] if types else None
    kernel = attrs.get("kernel_shape")
    if not attrs.get("ceil_mode") or not isinstance(x, TensorType) or x.shape is None \
            or not kernel:
        return out
    spatial = x.shape[2:]
    if len(kernel) != len(spatial) or not all(isinstance(d, int) for d in spatial):
        return out
    from .kernels._window import window  # here: the kernels package imports the registry

    dims = window(attrs, spatial, kernel, ceil_mode=True).out  # type: ignore[arg-type]
    return [TensorType((*t.shape[:2], *dims), t.dtype)
            if isinstance(t, TensorType) and t.shape is not None and len(t.shape) == len(x.shape)
            else t for t in out]
