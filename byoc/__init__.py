"""byoc: bring your own codegen to ONNX models.

    import byoc
    mod = byoc.load_onnx("model.onnx")      # IRModule, spans = ONNX node names
    exe = byoc.build(mod)
    outputs = exe.run({"input": x})         # {onnx output name: array}

    part = byoc.partition(mod, backends=["reference"])   # regions as external functions
    byoc.explain(part)                      # {node name: why it stayed on the host}
"""

from . import ir, op
from .autodiff import gradient
from .backend import get_backend, register_backend
from .errors import ByocError, InputError, KernelError, ModelError
from .ir import IRModule
from .partition import annotate_range, explain, partition
from .runtime import Executable, build
from .runtime.threads import set_threads

__version__ = "0.1.0"


def load_onnx(path_or_model, **options):
    """Import an ONNX model (path, bytes or ModelProto) into an IRModule."""
    from .frontends.onnx import load_onnx as _load

    return _load(path_or_model, **options)


def to_onnx(obj):
    """A module as ONNX (one local function per region), or one function as a model."""
    from .frontends.onnx.exporter import export_function, module_to_onnx

    return module_to_onnx(obj) if isinstance(obj, IRModule) else export_function(obj)


__all__ = ["ByocError", "Executable", "IRModule", "InputError", "KernelError", "ModelError",
           "annotate_range", "build", "explain", "get_backend", "gradient", "ir", "load_onnx",
           "op", "partition", "register_backend", "set_threads", "to_onnx"]
