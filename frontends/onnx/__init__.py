"""The ONNX frontend: import a model into byoc's IR (and, later, export one back)."""

from .importer import load_onnx, read_model

__all__ = ["load_onnx", "read_model"]
