"""Quantized models and their integer kernels on byoc's host and on onnxruntime, side by side.

    python benchmarks/bench_quantized.py [--repeat 50] [--threads 1,0] [--json out.json]

Models: the tiny ResNet quantized by onnxruntime's quantizer as tests/test_quantized_models.py
makes it (QOperator: QLinearConv; dynamic: DynamicQuantizeLinear, ConvInteger, MatMulInteger)
and the tiny BERT of the model zoo through quantize_dynamic (MatMulInteger). Kernels: one-node
models of MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv, QuantizeLinear,
DequantizeLinear and DynamicQuantizeLinear at the sizes of those models and of bigger ones
(BERT-base, ResNet-50 layers). Each result is checked bit-equal to onnxruntime's first.

Runs are interleaved (byoc, onnxruntime, byoc, ...) and timed in CPU time of the calling thread
at one thread (wall time at more threads), so other processes on a shared machine slow neither
side's clock; printed are medians and the ratio byoc / onnxruntime. ``--threads 0`` is the
default count (the physical cores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import byoc  # noqa: E402
from byoc.cli import default_model_path  # noqa: E402
from byoc.compare import onnxruntime_session  # noqa: E402
from byoc.inputs import random_inputs  # noqa: E402
from byoc.runtime.threads import physical_cores  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def quantized_models(folder: str) -> dict[str, tuple[str, dict]]:
    """{name: (path, dims)} of the quantized models, made in ``folder``."""
    from onnxruntime import quantization

    src = default_model_path()
    model = onnx.load(src)
    inp = model.graph.input[0]
    shape = [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.left = iter([{inp.name: np.random.default_rng(i).standard_normal(shape)
                               .astype(np.float32)} for i in range(4)])

        def get_next(self):
            return next(self.left, None)

    out = {}
    path = os.path.join(folder, "resnet_qoperator.onnx")
    quantization.quantize_static(src, path, Reader(),
                                 quant_format=quantization.QuantFormat.QOperator)
    out["tiny_resnet QOperator"] = (path, {})
    path = os.path.join(folder, "resnet_dynamic.onnx")
    quantization.quantize_dynamic(src, path)
    out["tiny_resnet dynamic"] = (path, {})
    bert = os.path.join(HERE, "..", "tests", "models", "files", "bert_tiny.onnx")
    if os.path.exists(bert):
        path = os.path.join(folder, "bert_tiny_dynamic.onnx")
        quantization.quantize_dynamic(bert, path)
        out["bert_tiny dynamic (seq 128)"] = (path, {"batch": 1, "sequence": 128})
    return out


def interleaved(fns, repeat: int, clock) -> list[float]:
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, acc in zip(fns, times):
            t0 = clock()
            fn()
            acc.append(clock() - t0)
    return [statistics.median(t) for t in times]


def side_by_side(model: onnx.ModelProto | str, feeds: dict, threads: int, repeat: int) -> dict:
    exe = byoc.build(byoc.load_onnx(model), threads=threads)
    session = onnxruntime_session(model, threads=threads)
    ours, theirs = list(exe.run(feeds).values()), session.run(None, feeds)
    # Integer results must be bit-equal; a model's float outputs are compared by the project's
    # tolerance elsewhere (tests/test_quantized_models.py), here only reported.
    equal = all(np.array_equal(a, b) for a, b in zip(ours, theirs) if a.dtype.kind in "iu")
    err = max((float(np.max(np.abs(a - b), initial=0)) / max(float(np.max(np.abs(b))), 1e-30)
               for a, b in zip(ours, theirs) if a.dtype.kind == "f"), default=0.0)
    clock = time.thread_time if threads == 1 else time.perf_counter
    byoc_s, ort_s = interleaved([lambda: exe.run(feeds), lambda: session.run(None, feeds)],
                                repeat, clock)
    return {"byoc_ms": byoc_s * 1e3, "onnxruntime_ms": ort_s * 1e3, "ratio": byoc_s / ort_s,
            "bit_equal": equal, "float_rel_err": err}


def one_node(op: str, feeds: dict, constants: dict, **attrs) -> onnx.ModelProto:
    outs = {"DynamicQuantizeLinear": ["y", "y_scale", "y_zero_point"]}.get(op, ["y"])
    node = helper.make_node(op, list(feeds) + list(constants), outs, **attrs)
    inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
              for k, v in feeds.items()]
    graph = helper.make_graph([node], op, inputs, [onnx.ValueInfoProto(name=o) for o in outs],
                              [numpy_helper.from_array(v, k) for k, v in constants.items()])
    model = onnx.shape_inference.infer_shapes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))
    del model.graph.output[:]
    model.graph.output.extend(v for v in model.graph.value_info if v.name in outs)
    return model


def kernel_cases(rng: np.random.Generator):
    u8, i8, f32 = np.uint8, np.int8, np.float32

    def q(dtype, *shape):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max + 1, shape).astype(dtype)

    def s(*shape):
        return rng.uniform(0.001, 0.02, shape).astype(f32)

    for m, k, n in ((128, 64, 64), (128, 64, 256), (128, 768, 768), (128, 768, 3072)):
        yield f"MatMulInteger {m}x{k}x{n}", one_node(
            "MatMulInteger", {"a": q(u8, 1, m, k)},
            {"b": q(i8, k, n), "az": np.array(131, u8), "bz": np.array(0, i8)})
        yield f"QLinearMatMul {m}x{k}x{n}", one_node(
            "QLinearMatMul", {"a": q(u8, m, k)},
            {"as": s(), "az": np.array(128, u8), "b": q(i8, k, n), "bs": s(),
             "bz": np.array(0, i8), "ys": np.array(0.5, f32), "yz": np.array(128, u8)})
    for c, hw, co in ((3, 32, 16), (16, 16, 16), (64, 4, 64), (64, 56, 64), (256, 14, 256)):
        yield f"ConvInteger {c}x{hw}x{hw}->{co} 3x3", one_node(
            "ConvInteger", {"x": q(u8, 1, c, hw, hw)},
            {"w": q(u8, co, c, 3, 3), "xz": np.array(128, u8), "wz": np.array(120, u8)},
            pads=[1, 1, 1, 1])
        yield f"QLinearConv {c}x{hw}x{hw}->{co} 3x3", one_node(
            "QLinearConv", {"x": q(u8, 1, c, hw, hw)},
            {"xs": s(), "xz": np.array(128, u8), "w": q(i8, co, c, 3, 3), "ws": s(co),
             "wz": np.zeros(co, i8), "ys": np.array(0.05, f32), "yz": np.array(3, u8),
             "B": rng.integers(-1000, 1000, co).astype(np.int32)}, pads=[1, 1, 1, 1])
    for shape in ((1, 16, 32, 32), (1, 128, 768)):
        x = rng.standard_normal(shape).astype(f32)
        yield f"QuantizeLinear {shape}", one_node(
            "QuantizeLinear", {"x": x}, {"s": np.array(0.02, f32), "z": np.array(3, u8)})
        yield f"DequantizeLinear {shape}", one_node(
            "DequantizeLinear", {"x": q(u8, *shape)}, {"s": np.array(0.02, f32),
                                                       "z": np.array(3, u8)})
        yield f"DynamicQuantizeLinear {shape}", one_node("DynamicQuantizeLinear", {"x": x}, {})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--threads", default="1,0", help="counts to run at; 0: the default")
    parser.add_argument("--json", metavar="OUT.json")
    args = parser.parse_args()
    counts = [int(t) or physical_cores() for t in args.threads.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        models = quantized_models(folder)
        for threads in counts:
            print(f"-- {threads} thread(s); ratio = byoc / onnxruntime (medians, interleaved)")
            for name, (path, dims) in models.items():
                mod = byoc.load_onnx(path)
                feeds = random_inputs(mod.main, dims, seed=0)
                rows.append({"case": name, "threads": threads,
                             **side_by_side(path, feeds, threads, args.repeat)})
                _print(rows[-1])
            for name, model in kernel_cases(np.random.default_rng(0)):
                feeds = {i.name: v for i, v in zip(model.graph.input, _feeds(model))}
                repeat = max(5, args.repeat // 5) if "768x3072" in name or "56x56" in name \
                    else args.repeat
                rows.append({"case": name, "threads": threads,
                             **side_by_side(model, feeds, threads, repeat)})
                _print(rows[-1])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["bit_equal"] for r in rows) else 1


def _feeds(model: onnx.ModelProto) -> list[np.ndarray]:
    """The inputs the kernel case was made with are not kept in the model; draw them again."""
    rng = np.random.default_rng(1)
    out = []
    for i in model.graph.input:
        t = i.type.tensor_type
        dtype = helper.tensor_dtype_to_np_dtype(t.elem_type)
        shape = [d.dim_value for d in t.shape.dim]
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            out.append(rng.integers(info.min, info.max + 1, shape).astype(dtype))
        else:
            out.append(rng.standard_normal(shape).astype(dtype))
    return out


def _print(row: dict) -> None:
    note = "" if row["bit_equal"] else "  INTEGERS NOT EQUAL"
    if row["float_rel_err"]:
        note += f"  (float outputs within {row['float_rel_err']:.1e} of the largest)"
    print(f"  {row['case']:40s} byoc {row['byoc_ms']:9.3f} ms  onnxruntime "
          f"{row['onnxruntime_ms']:9.3f} ms  ratio {row['ratio']:5.2f}{note}")


if __name__ == "__main__":
    sys.exit(main())
