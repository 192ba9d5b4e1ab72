"""Every conv and MaxPool shape of the slow suite's CNNs, one op at a time, native against
onnxruntime, interleaved.

    python benchmarks/bench_convs.py [--threads 1] [--models light_resnet50,...] [--top 40]

The shapes come from the models run with the zoo's inputs (ONNX shape inference with those
input shapes). Each distinct (op, input shape, weights shape, attributes) becomes a one-node
model with a Relu after a conv (what the models fuse), run by native and by onnxruntime at the
same thread count; the ratio is native / onnxruntime (< 1: faster). Printed per kind (3x3,
depthwise, pointwise, other conv, strided MaxPool): the median ratio and the FLOP-weighted
ratio (time summed over the kind's shapes, each counted as often as the models hold it), then
the slowest shapes.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import byoc  # noqa: E402
from benchmarks.bench_models import STATS, add_stat_option, interleaved  # noqa: E402
from byoc.compare import onnxruntime_session  # noqa: E402
from tests.models.zoo import MODELS, light_models  # noqa: E402

CNNS = ["light_bvlc_alexnet", "light_densenet121", "light_inception_v1", "light_inception_v2",
        "light_resnet50", "light_shufflenet", "light_squeezenet", "light_zfnet512",
        "ppocr_v4_det", "ppocr_mobile_v2_cls", "ppocr_v4_rec"]


def _shapes(proto: onnx.ModelProto, feeds: dict) -> dict[str, tuple[int, ...]]:
    """Every value's shape for these inputs."""
    proto = onnx.ModelProto.FromString(proto.SerializeToString())
    for i in proto.graph.input:
        if i.name in feeds:
            dims = i.type.tensor_type.shape.dim
            for d, n in zip(dims, feeds[i.name].shape):
                d.ClearField("dim_param")
                d.dim_value = n
    inferred = onnx.shape_inference.infer_shapes(proto)
    out = {}
    for v in (*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output):
        t = v.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            out[v.name] = tuple(d.dim_value for d in t.shape.dim)
    for init in proto.graph.initializer:
        out[init.name] = tuple(init.dims)
    return out


def _kind(op: str, x, w, attrs) -> str:
    if op == "MaxPool":
        return "maxpool s2" if max(attrs.get("strides", [1])) > 1 else "maxpool s1"
    group = attrs.get("group", 1)
    if group > 1 and w[1] == 1:
        return "depthwise"
    if w[2:] == (1, 1):
        return "pointwise"
    if w[2:] == (3, 3):
        return "3x3 s2" if max(attrs.get("strides", [1])) > 1 else "3x3"
    return "other conv"


def collect(names: list[str]) -> collections.Counter:
    zoo = {m.name: m for m in (*MODELS, *light_models())}
    found: collections.Counter = collections.Counter()
    for name in names:
        if name not in zoo:
            continue
        try:
            proto = zoo[name].load()
        except Exception as exc:  # a package not installed
            print(f"  {name} skipped: {exc}", file=sys.stderr)
            continue
        shapes = _shapes(proto, zoo[name].make_inputs(np.random.default_rng(0)))
        for node in proto.graph.node:
            if node.op_type not in ("Conv", "MaxPool") or node.input[0] not in shapes:
                continue
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            attrs = {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in attrs.items()
                     if not isinstance(v, bytes) or k == "auto_pad"}
            if isinstance(attrs.get("auto_pad"), bytes):
                attrs["auto_pad"] = attrs["auto_pad"].decode()
            w = shapes.get(node.input[1]) if node.op_type == "Conv" else None
            if node.op_type == "Conv" and w is None:
                continue
            bias = node.op_type == "Conv" and len(node.input) > 2 and bool(node.input[2])
            key = (node.op_type, shapes[node.input[0]], w, bias,
                   tuple(sorted((k, str(v)) for k, v in attrs.items())))
            found[key] += 1
    return found


def _attrs(key) -> dict:
    return {k: eval(v) if v[:1] in "[0123456789" else v for k, v in key[4]}  # noqa: S307


def one_node(key) -> tuple[onnx.ModelProto, dict]:
    op, x, w, bias, _ = key
    rng = np.random.default_rng(0)
    attrs = _attrs(key)
    inits, inputs = [], ["x"]
    if op == "Conv":
        inits.append(helper.make_tensor("w", TensorProto.FLOAT, w,
                                        (rng.standard_normal(w) * 0.1).astype(np.float32).ravel()))
        inputs.append("w")
        if bias:
            inits.append(helper.make_tensor("b", TensorProto.FLOAT, [w[0]],
                                            rng.standard_normal(w[0]).astype(np.float32)))
            inputs.append("b")
        nodes = [helper.make_node("Conv", inputs, ["c"], **attrs),
                 helper.make_node("Relu", ["c"], ["y"])]
    else:
        nodes = [helper.make_node("MaxPool", ["x"], ["y"], **attrs)]
    graph = helper.make_graph(nodes, "op", [helper.make_tensor_value_info("x", 1, x)],
                              [helper.make_tensor_value_info("y", 1, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, {"x": rng.standard_normal(x).astype(np.float32)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--models", default=",".join(CNNS))
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--top", type=int, default=25, help="slowest shapes to list")
    parser.add_argument("--kinds", help="comma-separated kinds to run (3x3, 3x3 s2, depthwise, "
                                        "pointwise, other conv, maxpool s1, maxpool s2)")
    parser.add_argument("--json", help="also write every shape's row to this file")
    parser.add_argument("--clock", choices=["wall", "thread"], default="wall",
                        help="thread: this thread's CPU time (one thread each side; on a "
                             "loaded machine wall time counts the waits for a core too)")
    add_stat_option(parser)
    args = parser.parse_args()
    stat = STATS[args.stat]
    clock = time.thread_time if args.clock == "thread" else time.perf_counter
    if args.clock == "thread" and args.threads != 1:
        parser.error("--clock thread measures one thread: use it with --threads 1")
    warnings.simplefilter("ignore")
    found = collect([n for n in args.models.split(",") if n])
    print(f"{len(found)} distinct shapes, {sum(found.values())} ops; {args.threads} thread(s) "
          f"each side; {args.stat} of the rounds, {args.clock} clock; load average {os.getloadavg()[0]:.1f}")
    kind_of = {key: _kind(key[0], key[1], key[2], _attrs(key)) for key in found}
    if args.kinds:
        wanted = set(args.kinds.split(","))
        found = collections.Counter({k: n for k, n in found.items() if kind_of[k] in wanted})
    rows = []
    for k, (key, count) in enumerate(found.items(), 1):
        print(f"[{k}/{len(found)}] {key[0]} {key[1]} {key[2]}", file=sys.stderr, flush=True)
        model, feeds = one_node(key)
        exe = byoc.build(byoc.partition(byoc.load_onnx(model), backends=["native"]),
                         threads=args.threads)
        session = onnxruntime_session(model, threads=args.threads)
        exe.run(feeds)
        session.run(None, feeds)
        # in blocks: within a model an op follows another with the pool's threads awake, and
        # the first call after another engine's turn wakes them (a sleeping core is slow)
        ours, theirs = interleaved([lambda: exe.run(feeds), lambda: session.run(None, feeds)],
                                   args.repeat, 5.0, stat, clock, block=5)
        rows.append({"op": key[0], "x": key[1], "w": key[2], "attrs": dict(key[4]),
                     "count": count, "kind": kind_of[key], "native_ms": ours * 1e3,
                     "ort_ms": theirs * 1e3, "ratio": ours / theirs})
    print(f"\n{'kind':<14}{'shapes':>7}{'ops':>6}{'median':>9}{'weighted':>10}")
    kinds = sorted({r["kind"] for r in rows})
    for kind in kinds:
        sel = [r for r in rows if r["kind"] == kind]
        weighted = sum(r["native_ms"] * r["count"] for r in sel) / \
            sum(r["ort_ms"] * r["count"] for r in sel)
        print(f"{kind:<14}{len(sel):>7}{sum(r['count'] for r in sel):>6}"
              f"{statistics.median(r['ratio'] for r in sel):>8.2f}x{weighted:>9.2f}x")
    allw = sum(r["native_ms"] * r["count"] for r in rows) / sum(r["ort_ms"] * r["count"] for r in rows)
    print(f"{'all':<14}{len(rows):>7}{sum(r['count'] for r in rows):>6}"
          f"{statistics.median(r['ratio'] for r in rows):>8.2f}x{allw:>9.2f}x")
    print(f"\nslowest relative to onnxruntime ({args.top}):")
    for r in sorted(rows, key=lambda r: -r["ratio"])[:args.top]:
        print(f"  {r['kind']:<12}{str(r['x']):<20}{str(r['w']):<18}x{r['count']:<3}"
              f"{r['native_ms']:>9.3f} ms{r['ort_ms']:>9.3f} ms{r['ratio']:>7.2f}x")
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"load_average": os.getloadavg()[0], "clock": args.clock, "stat": args.stat,
                       "threads": args.threads, "rows": rows}, f, indent=1)
        os.replace(tmp, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
