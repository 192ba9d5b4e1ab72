"""byoc: bring your own codegen to ONNX models.

    import byoc
    mod = byoc.load_onnx("model.onnx")      # IRModule, spans = ONNX node names
    exe = byoc.build(mod)
    outputs = exe.run({"input": x})         # {onnx output name: array}
"""

from . import ir, op
from .errors import ByocError, InputError, KernelError, ModelError
from .ir import IRModule
from .runtime import Executable, build

__version__ = "0.1.0"


def load_onnx(path_or_model, **options):
    """Import an ONNX model (path, bytes or ModelProto) into an IRModule."""
    from .frontends.onnx import load_onnx as _load

    return _load(path_or_model, **options)


__all__ = ["ByocError", "Executable", "IRModule", "InputError", "KernelError", "ModelError",
           "build", "ir", "load_onnx", "op"]
