"""Conversions between ONNX protobufs and byoc's types, attributes and calls.

Kernels that borrow onnx.reference or onnxruntime, the generic type rule and the exporter all
need to turn a Call back into a NodeProto; this module is the one place that knows how.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, TypeProto, helper, numpy_helper

from ..ir import Call, Function, OpaqueType, TensorType, Type

_ELEM_TO_NAME: dict[int, str] = {}
for _code in TensorProto.DataType.values():
    if _code == TensorProto.UNDEFINED:
        continue
    try:
        _ELEM_TO_NAME[_code] = np.dtype(helper.tensor_dtype_to_np_dtype(_code)).name
    except (KeyError, TypeError, ValueError):  # a type this numpy cannot hold
        pass
_NAME_TO_ELEM = {name: code for code, name in _ELEM_TO_NAME.items()}
_NAME_TO_ELEM["object"] = TensorProto.STRING


def dtype_name(elem_type: int) -> str | None:
    """numpy dtype name of an ONNX elem_type code (None for UNDEFINED)."""
    return _ELEM_TO_NAME.get(elem_type)


def elem_type(dtype: str | np.dtype | None) -> int:
    """ONNX elem_type code of a numpy dtype (or its name)."""
    if dtype is None:
        return TensorProto.UNDEFINED
    return _NAME_TO_ELEM[np.dtype(dtype).name]


def type_from_proto(tp: TypeProto) -> Type:
    """byoc type of an ONNX TypeProto: tensors keep symbolic dims; others become opaque."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        tt = tp.tensor_type
        shape = None
        if tt.HasField("shape"):
            # Some exporters (Paddle) write dim_value -1 or dim_param "?" for "dynamic": those
            # are unknown dims, not one symbol shared by every such dim.
            shape = tuple(
                (d.dim_value if d.dim_value >= 0 else None) if d.HasField("dim_value")
                else (d.dim_param if d.dim_param not in ("", "?") else None) for d in tt.shape.dim)
        return TensorType(shape, dtype_name(tt.elem_type))
    return OpaqueType(kind or "unknown")


def type_to_proto(t: Type) -> TypeProto:
    """ONNX TypeProto of a byoc tensor type (unknown parts left unset)."""
    tp = TypeProto()
    if not isinstance(t, TensorType):
        return tp
    tp.tensor_type.elem_type = elem_type(t.dtype)
    if t.shape is not None:
        shape = tp.tensor_type.shape
        shape.SetInParent()  # a scalar's empty shape is still a known shape (rank 0)
        for d in t.shape:
            dim = shape.dim.add()
            if isinstance(d, int):
                dim.dim_value = d
            elif isinstance(d, str):
                dim.dim_param = d
    return tp


def attr_value(attr: AttributeProto, graph: Callable[[onnx.GraphProto], Any] | None = None) -> Any:
    """Python value of an ONNX attribute: strings decoded, tensors as arrays, graphs via ``graph``."""
    if attr.type == AttributeProto.GRAPH:
        if graph is None:
            raise ValueError(f"attribute {attr.name!r} is a graph, which needs an importer")
        return graph(attr.g)
    if attr.type == AttributeProto.GRAPHS:
        if graph is None:
            raise ValueError(f"attribute {attr.name!r} holds graphs, which need an importer")
        return [graph(g) for g in attr.graphs]
    if attr.type == AttributeProto.TENSOR:
        return numpy_helper.to_array(attr.t)
    if attr.type == AttributeProto.TENSORS:
        return [numpy_helper.to_array(t) for t in attr.tensors]
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", errors="replace") for v in value]
    return value


def attr_to_proto(name: str, value: Any,
                  graph: Callable[[Function], onnx.GraphProto] | None = None) -> AttributeProto:
    """ONNX attribute for a Python value; ``graph`` exports Function-valued attributes."""
    if isinstance(value, Function):
        if graph is None:
            raise ValueError(f"attribute {name!r} is a function, which needs an exporter")
        return helper.make_attribute(name, graph(value))
    if isinstance(value, np.ndarray):
        return helper.make_attribute(name, numpy_helper.from_array(value))
    if isinstance(value, list) and value and isinstance(value[0], np.ndarray):
        return helper.make_attribute(name, [numpy_helper.from_array(v) for v in value])
    if isinstance(value, list) and value and isinstance(value[0], Function):
        assert graph is not None
        return helper.make_attribute(name, [graph(v) for v in value])
    if isinstance(value, list) and not value:
        # An empty list carries no element type; ints is the common case (e.g. axes=[]).
        return helper.make_attribute(name, [], attr_type=AttributeProto.INTS)
    return helper.make_attribute(name, value)


def split_op(op: str) -> tuple[str, str]:
    """("com.microsoft", "Gelu") for "com.microsoft.Gelu"; ("", "Conv") for "Conv"."""
    domain, _, op_type = op.rpartition(".")
    return domain, op_type


def node_proto(call: Call, inputs: list[str], outputs: list[str], name: str = "",
               graph: Callable[[Function], onnx.GraphProto] | None = None) -> onnx.NodeProto:
    """An ONNX node for ``call`` reading and writing the given value names ("" = omitted)."""
    assert isinstance(call.op, str)
    domain, op_type = split_op(call.op)
    node = helper.make_node(op_type, inputs, outputs, name=name, domain=domain)
    node.attribute.extend(
        attr_to_proto(k, v, graph) for k, v in call.attrs.items() if not k.startswith("_"))
    return node


def num_outputs(call: Call) -> int:
    """How many ONNX outputs a call has."""
    from ..ir import TupleType

    return len(call.type.fields) if isinstance(call.type, TupleType) else 1
