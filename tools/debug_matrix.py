"""How many models extract, repro and bisect on each backend: the zoo (tests/models/) and the
corpus of models the tests build (dynamic dims, quantized, control flow).

    python tools/debug_matrix.py [--backend B,...] [--model NAME,...] [--json out.json]

For each model and backend: ``extract`` region 0 (with seeded inputs, the model's dynamic dims
as the zoo sizes them), ``repro`` that case on the same backend, ``bisect`` the whole model.
A cell is ok when the step ran and, for repro and bisect, found nothing wrong; otherwise the
first line of what went wrong. Slow (minutes per model on the C backends): run it by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BACKENDS = ("reference", "ccompiler", "native", "onnxruntime")


def corpus() -> dict[str, tuple[onnx.ModelProto, dict]]:
    """Models the tests build, each with inputs."""
    from tests.debugging.test_any_shapes import X, dynamic_cnn
    from tests.test_quantized_bit_exact import cnn_lstm

    out = {"dynamic_cnn": (dynamic_cnn(), X)}
    from onnxruntime.quantization import quantize_dynamic

    folder = Path(tempfile.mkdtemp(prefix="byoc-matrix-"))
    for opset in (17, 10):
        src, dst = folder / f"f{opset}.onnx", folder / f"q{opset}.onnx"
        onnx.save(cnn_lstm(opset), src)
        quantize_dynamic(str(src), str(dst))
        x = np.random.default_rng(0).standard_normal((2, 1, 16, 32)).astype(np.float32)
        out[f"quantized_cnn_lstm_opset{opset}"] = (onnx.load(dst), {"x": x})
    files = Path(__file__).resolve().parents[1] / "tests" / "models" / "files"
    for name in ("loop_running_sum", "scan_rnn"):
        model = onnx.load(files / f"{name}.onnx")
        out[name] = (model, None)
    return out


def zoo() -> dict[str, tuple[onnx.ModelProto, dict]]:
    from tests.models.zoo import MODELS, ModelUnavailable, light_models

    out = {}
    for entry in (*MODELS, *light_models()):
        try:
            out[entry.name] = (entry.load(), entry.make_inputs(np.random.default_rng(0)))
        except (ModelUnavailable, FileNotFoundError):
            continue
    return out


def one(model: onnx.ModelProto, inputs, backend: str, folder: Path) -> dict[str, str]:
    import byoc
    from byoc.extract import bisect, extract, repro
    from byoc.inputs import random_inputs

    mod = byoc.load_onnx(model)
    if inputs is None:
        inputs = random_inputs(mod.main, {}, seed=0)
    cells: dict[str, str] = {}

    def attempt(step, fn):
        start = time.perf_counter()
        try:
            verdict = fn()
        except Exception as exc:  # noqa: BLE001  (the figure is what fails, and why)
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            verdict = f"{type(exc).__name__}: {text}"[:160]
        cells[step] = verdict
        cells[f"{step}_s"] = f"{time.perf_counter() - start:.1f}"

    def do_extract():
        from byoc.extract import regions
        from byoc.partition import partition

        if not regions(partition(mod, backends=[backend])):
            return "no region"
        extract(mod, backend, str(folder / "case"), inputs, region=0)
        return "ok"

    def do_repro():
        if cells.get("extract") == "no region":
            return "no region"
        if cells.get("extract") != "ok":
            return "-"
        checks = repro(str(folder / "case"), backend)
        return "ok" if all(c.ok for c in checks) else "differs: " + "; ".join(
            c.summary() for c in checks if not c.ok)

    def do_bisect():
        result = bisect(mod, backend, inputs, out_dir=str(folder / "bisect"))
        if result.region is None:
            return "ok"
        return f"region {result.index} node {result.node}: {result.error or 'differs'}"

    attempt("extract", do_extract)
    attempt("repro", do_repro)
    attempt("bisect", do_bisect)
    return cells


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default=",".join(BACKENDS))
    p.add_argument("--model", default="")
    p.add_argument("--json")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    backends = [b for b in args.backend.split(",") if b]
    wanted = {m for m in args.model.split(",") if m}
    models = {**{f"corpus/{k}": v for k, v in corpus().items()},
              **{f"zoo/{k}": v for k, v in zoo().items()}}
    results = {}
    for name, (model, inputs) in models.items():
        if wanted and name.split("/", 1)[1] not in wanted:
            continue
        for backend in backends:
            with tempfile.TemporaryDirectory() as tmp:
                cells = one(model, inputs, backend, Path(tmp))
            results[f"{name} {backend}"] = cells
            print(f"{name:42s} {backend:12s} " + "  ".join(
                f"{s}={cells[s] if cells[s] in ('ok', '-', 'no region') else 'FAIL'}"
                f"({cells[s + '_s']}s)" for s in ("extract", "repro", "bisect")), flush=True)
            for s in ("extract", "repro", "bisect"):
                if cells[s] not in ("ok", "-", "no region"):
                    print(f"    {s}: {cells[s]}", flush=True)
    print()
    for backend in backends:
        for group in ("corpus", "zoo"):
            rows = [v for k, v in results.items() if k.startswith(group) and k.endswith(backend)]
            if rows:
                counts = {s: sum(r[s] in ("ok", "no region") for r in rows)
                          for s in ("extract", "repro", "bisect")}
                print(f"{backend:12s} {group:7s} of {len(rows)}: " + ", ".join(
                    f"{s} {n}" for s, n in counts.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
