"""OpenVINO as byoc uses it: one Core, the CPU settings of every compile, ONNX bytes read from
memory, its tensors as a device, and what a failed conversion says in one line.

OpenVINO is an optional extra; everything here imports it on first use, and ``load()`` turns
its absence into one line saying how to install it.
"""

from __future__ import annotations

import io
import threading
from typing import Any

import numpy as np

from byoc.backend import BackendError
from byoc.runtime.devices import Device

NAME = "openvino"
PLUGIN = "CPU"
INSTALL = "pip install 'byoc[openvino]'"

_core = None
_lock = threading.Lock()


def load():
    """The ``openvino`` module, or a BackendError saying how to install it."""
    try:
        import openvino
    except ImportError as exc:
        raise BackendError(f"backend 'openvino' needs OpenVINO, which is not installed: "
                           f"{INSTALL}") from exc
    return openvino


def core():
    """The process's one ``ov.Core`` (it loads plugins: made once, thread-safe to share)."""
    global _core
    with _lock:
        if _core is None:
            _core = load().Core()
        return _core


def config(threads: int = 1) -> dict[str, Any]:
    """The CPU plugin's settings for every compile and query.

    fp32 inference precision: the plugin would otherwise run float32 models in bf16 or fp16 on
    CPUs that have them. Dynamic quantization off: it would quantize activations in int8 next to
    int8 weights (a QDQ model's DequantizeLinear on constants), which the model never asked for.
    Threads not pinned to cores: byoc's host work and other engines share the cores, and a
    pinned thread waits for its own core however idle the others are (bert_tiny at one thread
    on a busy 2-core machine: a median of 8 ms pinned, 0.64 ms not).
    """
    import openvino.properties as props
    import openvino.properties.hint as hint

    ov = load()
    return {hint.inference_precision(): ov.Type.f32,
            hint.performance_mode(): hint.PerformanceMode.LATENCY,
            props.inference_num_threads(): threads,
            hint.enable_cpu_pinning(): False,
            hint.dynamic_quantization_group_size(): 0}


def read(onnx_bytes: bytes):
    """An ``ov.Model`` from serialized ONNX, converted whole (raises if any node fails)."""
    return core().read_model(onnx_bytes)


def read_partially(onnx_bytes: bytes):
    """An ``ov.Model`` where each node the ONNX frontend cannot convert stays a placeholder."""
    from openvino.frontend import FrontEndManager

    frontend = FrontEndManager().load_by_framework("onnx")
    return frontend.convert_partially(frontend.load(io.BytesIO(onnx_bytes)))


_NOISE = ("Check '", "Exception from", "FrontEnd API failed", "Model wasn't fully converted",
          "While validating", "Summary:", "To facilitate", "Failed operations detailed log")


def reason(exc: BaseException) -> str:
    """OpenVINO's message in one line: what failed, without its source locations and banners."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith(_NOISE) and not ln.endswith("with a message:")]
    text = (useful or lines or [type(exc).__name__])[0]
    return text[3:] if text.startswith("-- ") else text


def compile_model(model, threads: int = 1):
    """``model`` compiled for the CPU plugin with :func:`config`, its precision checked."""
    ov = load()
    compiled = core().compile_model(model, PLUGIN, config(threads))
    got = compiled.get_property("INFERENCE_PRECISION_HINT")
    if got != ov.Type.f32:  # never silently: a plugin that ignored the setting is an error
        raise BackendError(f"OpenVINO's {PLUGIN} plugin compiled with inference precision {got}, "
                           f"not f32")
    return compiled


# -- the device: OpenVINO tensors -----------------------------------------------------------


def to_device(array: np.ndarray):
    """A new ``ov.Tensor`` holding a copy of ``array`` (the host may reuse its buffer)."""
    return load().Tensor(np.asarray(array, order="C"))


def to_host(tensor) -> np.ndarray:
    """The tensor's data as numpy, without a copy: the backend hands out tensors it owns alone
    (outputs are fresh per call), and the view keeps the tensor alive."""
    return tensor.data


def describe(tensor) -> tuple[tuple[int, ...], str]:
    """Shape and numpy dtype name, for the executor's check of a region's results."""
    data = tensor.data  # a view: nothing copied
    return tuple(data.shape), data.dtype.name


DEVICE = Device(NAME, to_device=to_device, to_host=to_host, nbytes=lambda t: int(t.byte_size),
                describe=describe)
