"""byoc as an ``onnx.backend.base`` backend, so ONNX's conformance suite can run against it.

    import onnx.backend.test
    import byoc.frontends.onnx.backend as byoc_backend
    tests = onnx.backend.test.BackendTest(byoc_backend, __name__)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from byoc.runtime import build

from .importer import load_onnx


class ByocRep(BackendRep):
    """A prepared model: inputs by position or by name, outputs in graph order."""

    def __init__(self, model: onnx.ModelProto, **options: Any):
        self.mod = load_onnx(model)
        self.exe = build(self.mod)
        self.input_names = [p.name for p in self.mod.main.params]

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, dict):
            feeds = inputs
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            feeds = dict(zip(self.input_names, inputs))
        outs = self.exe.run(feeds)
        return tuple(outs.values())


class ByocBackend(Backend):
    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return device == "CPU" or device.startswith("CPU")

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> ByocRep:
        super().prepare(model, device, **kwargs)
        return ByocRep(model, **kwargs)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Sequence[np.ndarray], device: str = "CPU",
                 outputs_info: Sequence[tuple] | None = None, **kwargs: Any) -> tuple:
        from onnx import helper

        in_infos = [helper.make_tensor_value_info(f"{n}", helper.np_dtype_to_tensor_dtype(
            np.asarray(x).dtype), np.asarray(x).shape) for n, x in zip(node.input, inputs) if n]
        out_infos = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
        graph = helper.make_graph([node], "run_node", in_infos, out_infos)
        model = helper.make_model(graph)
        return cls.run_model(model, [x for n, x in zip(node.input, inputs) if n], device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return Device(device).type == DeviceType.CPU


prepare = ByocBackend.prepare
run_model = ByocBackend.run_model
run_node = ByocBackend.run_node
supports_device = ByocBackend.supports_device
is_compatible = ByocBackend.is_compatible
