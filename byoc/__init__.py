"""byoc: bring your own codegen to ONNX models.

    import byoc
    mod = byoc.load_onnx("model.onnx")      # IRModule, spans = ONNX node names
    exe = byoc.build(mod)
    outputs = exe.run({"input": x})         # {onnx output name: array}

    part = byoc.partition(mod, backends=["reference"])   # regions as external functions
    byoc.explain(part)                      # {node name: why it stayed on the host}

    plan = byoc.tune(mod, ["native", "onnxruntime"], inputs)   # measured placement
    part = byoc.partition(mod, plan=plan)   # replayed, nothing measured

The API is imported at its first use (``byoc.build`` imports the runtime, numpy and onnx then):
``import byoc`` alone, which the ``byoc`` command does before parsing its arguments, stays
quick (``import onnx`` costs most of a second, most of it ml_dtypes).
"""

from __future__ import annotations

import importlib
import sys
import types

from .errors import ByocError, InputError, KernelError, ModelError

__version__ = "0.1.0"

#: public name -> (module, attribute in it, or None for the module itself)
_LAZY = {
    "ir": (".ir", None), "op": (".op", None), "IRModule": (".ir", "IRModule"),
    "gradient": (".autodiff", "gradient"),
    "get_backend": (".backend", "get_backend"), "register_backend": (".backend", "register_backend"),
    "annotate_range": (".partition", "annotate_range"), "explain": (".partition", "explain"),
    "partition": (".partition", "partition"),
    "Executable": (".runtime", "Executable"), "build": (".runtime", "build"),
    "set_threads": (".runtime.threads", "set_threads"),
    "tune": (".tuning", "tune"), "Plan": (".tuning", "Plan"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'byoc' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = importlib.import_module(module, __name__)
    value = value if attr is None else getattr(value, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Package(types.ModuleType):
    """The submodule ``byoc.partition``, once imported, must not replace the function
    ``byoc.partition`` (importing a submodule sets it as an attribute of its package)."""

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, types.ModuleType) and _LAZY.get(name, (None, None))[1] is not None:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def load_onnx(path_or_model, **options):
    """Import an ONNX model (path, bytes or ModelProto) into an IRModule."""
    from .frontends.onnx import load_onnx as _load

    return _load(path_or_model, **options)


def to_onnx(obj):
    """A module as ONNX (one local function per region), or one function as a model."""
    from .frontends.onnx.exporter import export_function, module_to_onnx
    from .ir import IRModule

    return module_to_onnx(obj) if isinstance(obj, IRModule) else export_function(obj)


__all__ = ["ByocError", "Executable", "IRModule", "InputError", "KernelError", "ModelError",
           "Plan", "annotate_range", "build", "explain", "get_backend", "gradient", "ir",
           "load_onnx", "op", "partition", "register_backend", "set_threads", "to_onnx", "tune"]
