"""Random ONNX graphs through every backend, compared with onnxruntime (see harness.py)."""
