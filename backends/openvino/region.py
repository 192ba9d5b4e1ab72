"""A region compiled by OpenVINO: ONNX bytes read once, one compiled model per input shapes.

The region is exported with byoc's exporter and read from memory. Each new combination of input
shapes gets the model reshaped to those static shapes and compiled (the plugin then folds shape
arithmetic at compile time, in 64 bits, and picks kernels for the sizes); after
``MAX_STATIC_SHAPES`` of them, further shapes share one compile with the region's own dynamic
dims, so a model fed ever-new sizes does not compile at every call. Compiled models stay in
memory for the life of the region.

Calls take and return ``ov.Tensor``s (the backend's device). Outputs are fresh tensors per call
(the plugin writes into tensors set before inference when their shape is known; where it keeps
its own, a data-dependent shape or an output that is a constant, that is copied), so a tensor
handed out is never overwritten by a later call. Infer requests
are pooled, so concurrent calls each get their own.

Integer inputs of a dtype the plugin holds narrower (int64 as int32, see support.py) are
range-checked at every call; a call with values beyond that range runs on the host, exactly,
with a warning, instead of wrapping around inside OpenVINO.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable

import numpy as np

from byoc.backend import BackendError
from byoc.codegen.build_cache import BuildError
from byoc.ir import Function, Tuple
from byoc.runtime.threads import build_threads

from . import engine
from .support import held

MAX_STATIC_SHAPES = 8


class Compiled:
    """One compiled model: which of its ports each region input and output is, and a pool of
    infer requests."""

    def __init__(self, compiled, inputs: list[str], outputs: list[str]):
        self.compiled = compiled
        port_of = {name: i for i, port in enumerate(compiled.inputs) for name in port.get_names()}
        self.in_ports = [port_of.get(name) for name in inputs]  # None: an input nothing reads
        out_of = {name: i for i, port in enumerate(compiled.outputs) for name in port.get_names()}
        self.out_ports = [out_of[name] for name in outputs]
        self.out_specs = []  # (shape, numpy dtype) where the shape is static, else None
        for i in self.out_ports:
            port = compiled.outputs[i]
            shape = port.get_partial_shape()
            self.out_specs.append((tuple(shape.to_shape()), port.get_element_type().to_dtype())
                                  if shape.is_static else None)
        self._idle: list = []
        self._lock = threading.Lock()

    def __call__(self, tensors: tuple) -> tuple:
        ov = engine.load()
        with self._lock:
            request = self._idle.pop() if self._idle else self.compiled.create_infer_request()
        try:
            for port, tensor in zip(self.in_ports, tensors):
                if port is not None:
                    request.set_input_tensor(port, tensor)
            outs: list = []
            arrays: list = []
            for port, spec in zip(self.out_ports, self.out_specs):
                # A tensor on numpy's memory: a third of the cost of one OpenVINO allocates.
                arrays.append(None if spec is None else np.empty(*spec))
                outs.append(None if spec is None else ov.Tensor(arrays[-1], shared_memory=True))
                if spec is not None:
                    request.set_output_tensor(port, outs[-1])
            request.infer(share_outputs=True)  # the outputs are ours already: no copies made
            for k, port in enumerate(self.out_ports):
                theirs = request.get_output_tensor(port)
                if outs[k] is None:  # a data-dependent shape: the plugin's own tensor, copied
                    outs[k] = ov.Tensor(np.array(theirs.data), shared_memory=True)
                elif _address(theirs.data) != _address(arrays[k]):
                    theirs.copy_to(outs[k])  # the plugin kept its own (a constant output)
            return tuple(outs)
        finally:
            with self._lock:
                self._idle.append(request)


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


class Region:
    """A region as OpenVINO runs it: ``ov.Tensor``s in, a tuple of ``ov.Tensor``s out."""

    def __init__(self, func: Function):
        from byoc.frontends.onnx.exporter import export_function

        self.func = func
        self.threads = build_threads()  # the build's: compiles happen later, at calls
        self.name = func.attrs.get("global_symbol") or "region"
        n_out = len(func.body.fields) if isinstance(func.body, Tuple) else 1
        self.outputs = [f"out_{k}" for k in range(n_out)]
        proto = export_function(func.with_attrs(output_names=self.outputs))
        # The exporter writes one graph input per parameter, in order (names made unique).
        self.inputs = [i.name for i in proto.graph.input]
        self.onnx = proto.SerializeToString()
        try:
            self.model = engine.read(self.onnx)
        except Exception as exc:
            raise BackendError(f"region {self.name}: OpenVINO cannot read it: "
                               f"{engine.reason(exc)}") from exc
        self.narrowed = [(k, held(p.type.dtype).exact_range) for k, p in enumerate(func.params)
                         if held(p.type.dtype).exact_range is not None]
        self.variants: dict[tuple, Compiled] = {}
        self.dynamic: Compiled | None = None
        self.host: Callable | None = None
        self._lock = threading.Lock()

    def __call__(self, *values) -> tuple:
        ov = engine.load()
        tensors = tuple(v if isinstance(v, ov.Tensor) else engine.to_device(v) for v in values)
        if self.narrowed and self._out_of_range(tensors):
            return self._on_host(tensors)
        shapes = tuple(t.data.shape for t in tensors)  # numpy's view: ov.Shape iterates slowly
        variant = self.variants.get(shapes) or self._variant(shapes)
        return variant(tensors)

    def _variant(self, shapes: tuple) -> Compiled:
        with self._lock:
            if shapes in self.variants:
                return self.variants[shapes]
            if len(self.variants) < MAX_STATIC_SHAPES:
                variant = self._compile(shapes)
            else:
                if self.dynamic is None:
                    self.dynamic = self._compile(None)
                variant = self.dynamic
            self.variants[shapes] = variant
            return variant

    def _compile(self, shapes: tuple | None) -> Compiled:
        """Compiled for ``shapes`` (static), or for the region's own dims when None."""
        ov = engine.load()
        model = self.model
        if shapes is not None:
            model = model.clone()
            new = {}
            for param in model.get_parameters():
                k = self.inputs.index(param.get_friendly_name())
                new[param.output(0)] = ov.PartialShape(list(shapes[k]))
            model.reshape(new)
        try:
            compiled = engine.compile_model(model, self.threads)
        except Exception as exc:
            what = "" if shapes is None else f" for input shapes {list(shapes)}"
            raise BuildError(f"region {self.name}: OpenVINO cannot compile it{what}: "
                             f"{engine.reason(exc)}") from exc
        return Compiled(compiled, self.inputs, self.outputs)

    def _out_of_range(self, tensors: tuple) -> bool:
        for k, (lo, hi) in self.narrowed:
            data = tensors[k].data
            if data.size and (int(data.min()) < lo or int(data.max()) > hi):
                return True
        return False

    def _on_host(self, tensors: tuple) -> tuple:
        if self.host is None:
            from byoc.backends.reference import compile_region

            warnings.warn(f"region {self.name}: integer inputs beyond the range OpenVINO's "
                          f"{engine.PLUGIN} plugin computes them in; such calls run on the host",
                          RuntimeWarning, stacklevel=3)
            self.host = compile_region(self.func)
        outs = self.host(*(engine.to_host(t) for t in tensors))
        return tuple(engine.to_device(np.asarray(o)) for o in outs)


def compile_region(func: Function) -> Region:
    """The region read by OpenVINO (errors now); compiled per input shapes at calls."""
    return Region(func)
