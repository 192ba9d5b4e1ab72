"""The ``openvino`` backend: each region becomes an ONNX model compiled by Intel's OpenVINO.

An optional extra (``pip install 'byoc[openvino]'``): a second real engine beside onnxruntime.
A region is exported with byoc's exporter, read by OpenVINO from memory and compiled for its CPU
plugin with fp32 inference precision, byoc's thread count and the latency hint, once per region
and input shapes (``region.py``). What it takes, OpenVINO says itself (``support.py``: its ONNX
frontend and ``query_model``, asked in batches). Its tensors are a device: consecutive OpenVINO
regions pass ``ov.Tensor``s to each other, and the device planner copies where the host reads.

Threads: the build's (``byoc.build(mod, threads=N)``, ``$BYOC_THREADS``, else the physical cores;
read with ``byoc.runtime.threads.build_threads()`` when the region is built).
"""

from __future__ import annotations

from byoc.backend import Backend, register_backend
from byoc.runtime.devices import register_device

from . import engine
from .region import compile_region
from .support import openvino_runs, prefetch

__all__ = ["compile_region", "openvino_runs", "prefetch", "register"]


def register() -> Backend:
    engine.load()  # without OpenVINO: one line saying how to install it
    register_device(engine.DEVICE)
    return register_backend(engine.NAME, supports=openvino_runs, compile=compile_region,
                            device=engine.DEVICE.name, prefetch=prefetch)
