"""Regenerate the committed models in files/ (dev-only: needs torch 2.13 and transformers 5).

    python -m tests.models.make_models

Every model is built from torch.manual_seed(0), traced on example inputs of one shape, exported with
the TorchScript exporter (dynamo=False: no onnxscript needed, and it keeps the graphs plain ONNX),
then checked against torch on the zoo's own inputs, whose shapes differ, so the dynamic axes are
exercised. The tests never import torch: they only read the files.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
import torch
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
from transformers import ViTConfig, ViTModel

from tests.models import zoo

OPSET = 17  # LayerNormalization exists from 17; Gelu (20) does not, so BERT/ViT's gelu stays Erf-based


class BertEncoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        config = BertConfig(
            vocab_size=zoo.VOCAB,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=256,
            max_position_embeddings=128,
            attn_implementation="eager",  # explicit MatMul/Softmax/Where rather than a fused SDPA
        )
        self.model = BertModel(config)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return out.last_hidden_state, out.pooler_output


class CausalLM(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


def gpt2() -> CausalLM:
    config = GPT2Config(
        vocab_size=zoo.VOCAB,
        n_positions=128,
        n_embd=64,
        n_layer=2,
        n_head=4,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="eager",
    )
    return CausalLM(GPT2LMHeadModel(config))


def llama() -> CausalLM:
    config = LlamaConfig(
        vocab_size=zoo.VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention: K/V heads are repeated with Expand
        max_position_embeddings=128,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="eager",
    )
    return CausalLM(LlamaForCausalLM(config))


class VitEncoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        config = ViTConfig(
            image_size=zoo.VIT_IMAGE,
            patch_size=8,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            attn_implementation="eager",
        )
        self.model = ViTModel(config)

    def forward(self, pixel_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.model(pixel_values=pixel_values)
        return out.last_hidden_state, out.pooler_output


class LstmTagger(torch.nn.Module):
    """Conv front end, stacked bidirectional LSTM with given initial state, per-frame log-probs."""

    def __init__(self) -> None:
        super().__init__()
        self.frontend = torch.nn.Conv1d(zoo.LSTM_FEATURES, zoo.LSTM_FEATURES, kernel_size=3, padding=1)
        self.lstm = torch.nn.LSTM(
            zoo.LSTM_FEATURES, zoo.LSTM_HIDDEN, num_layers=zoo.LSTM_LAYERS, batch_first=True, bidirectional=True
        )
        self.head = torch.nn.Linear(2 * zoo.LSTM_HIDDEN, 30)

    def forward(
        self, features: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = torch.relu(self.frontend(features.transpose(1, 2))).transpose(1, 2)
        y, (hn, cn) = self.lstm(x, (h0, c0))
        return torch.log_softmax(self.head(y), dim=-1), hn, cn


class GruStep(torch.nn.Module):
    """A streaming GRU: initial state in, final state out, tanh-projected outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = torch.nn.GRU(zoo.GRU_FEATURES, zoo.GRU_HIDDEN, batch_first=True)
        self.proj = torch.nn.Linear(zoo.GRU_HIDDEN, 8)

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y, hn = self.gru(x, h0)
        return torch.tanh(self.proj(y)), hn


@dataclass(frozen=True)
class Export:
    filename: str
    build: Callable[[], torch.nn.Module]
    example_shapes: dict[str, tuple[int, ...]]  # per input, for tracing only
    # Per input and output (in order): the name of each dynamic dim, None for a fixed one.
    input_axes: dict[str, tuple[str | None, ...]]
    output_axes: dict[str, tuple[str | None, ...]]
    make_inputs: Callable[[np.random.Generator], zoo.Inputs]  # the zoo's: what the tests will feed


_BS = ("batch", "sequence")
_TEXT = {"input_ids": _BS, "attention_mask": _BS}
_STATE = (None, "batch", None)  # RNN h/c: [layers * directions, batch, hidden]
_SEQ_FEATURES = ("batch", "time", None)

EXPORTS = (
    Export(
        "bert_tiny.onnx",
        BertEncoder,
        {"input_ids": (1, 9), "attention_mask": (1, 9), "token_type_ids": (1, 9)},
        {**_TEXT, "token_type_ids": _BS},
        {"last_hidden_state": (*_BS, None), "pooler_output": ("batch", None)},
        zoo.bert_inputs,
    ),
    Export(
        "gpt2_tiny.onnx",
        gpt2,
        {"input_ids": (1, 9), "attention_mask": (1, 9)},
        _TEXT,
        {"logits": (*_BS, None)},
        zoo.causal_lm_inputs,
    ),
    Export(
        "llama_tiny.onnx",
        llama,
        {"input_ids": (1, 9), "attention_mask": (1, 9)},
        _TEXT,
        {"logits": (*_BS, None)},
        zoo.causal_lm_inputs,
    ),
    Export(
        "vit_tiny.onnx",
        VitEncoder,
        {"pixel_values": (1, 3, zoo.VIT_IMAGE, zoo.VIT_IMAGE)},
        {"pixel_values": ("batch", None, None, None)},
        {"last_hidden_state": ("batch", None, None), "pooler_output": ("batch", None)},
        zoo.vit_inputs,
    ),
    Export(
        "lstm_bidir.onnx",
        LstmTagger,
        {
            "features": (1, 11, zoo.LSTM_FEATURES),
            "h0": (2 * zoo.LSTM_LAYERS, 1, zoo.LSTM_HIDDEN),
            "c0": (2 * zoo.LSTM_LAYERS, 1, zoo.LSTM_HIDDEN),
        },
        {"features": _SEQ_FEATURES, "h0": _STATE, "c0": _STATE},
        {"log_probs": _SEQ_FEATURES, "hn": _STATE, "cn": _STATE},
        zoo.lstm_inputs,
    ),
    Export(
        "gru.onnx",
        GruStep,
        {"x": (1, 7, zoo.GRU_FEATURES), "h0": (1, 1, zoo.GRU_HIDDEN)},
        {"x": _SEQ_FEATURES, "h0": _STATE},
        {"y": _SEQ_FEATURES, "hn": _STATE},
        zoo.gru_inputs,
    ),
)


def _example(shape: tuple[int, ...], name: str, generator: torch.Generator) -> torch.Tensor:
    if name == "input_ids":
        return torch.randint(0, zoo.VOCAB, shape, generator=generator)
    if name in ("attention_mask", "token_type_ids"):
        return torch.ones(shape, dtype=torch.int64)
    return torch.randn(shape, generator=generator)


def export(spec: Export) -> bytes:
    torch.manual_seed(0)
    model = spec.build().eval()  # no dropout; export restores this mode, which the torch check needs
    generator = torch.Generator().manual_seed(1)
    args = tuple(_example(shape, name, generator) for name, shape in spec.example_shapes.items())
    axes = {**spec.input_axes, **spec.output_axes}
    buffer = io.BytesIO()
    torch.onnx.export(
        model,
        args,
        buffer,
        input_names=list(spec.example_shapes),
        output_names=list(spec.output_axes),
        dynamic_axes={k: {i: d for i, d in enumerate(v) if d} for k, v in axes.items()},
        opset_version=OPSET,
        dynamo=False,
    )
    data = buffer.getvalue()
    _check_against_torch(model, data, spec.make_inputs(np.random.default_rng(0)))
    return data


def _check_against_torch(model: torch.nn.Module, data: bytes, feeds: zoo.Inputs) -> None:
    session = zoo.ort_session(data)
    got = zoo.run_ort(session, feeds)
    with torch.no_grad():
        want = model(**{k: torch.from_numpy(v) for k, v in feeds.items()})
    for (name, out), ref in zip(got.items(), want if isinstance(want, tuple) else (want,), strict=True):
        err = zoo.output_error(ref.numpy(), out)
        assert err < 1e-5, f"{name}: onnxruntime differs from torch by {err:.1e} of max|torch|"


def main() -> None:
    zoo.FILES.mkdir(exist_ok=True)
    for spec in EXPORTS:
        data = export(spec)
        onnx.checker.check_model(onnx.load_from_string(data), full_check=True)
        (zoo.FILES / spec.filename).write_bytes(data)
        print(f"{spec.filename}: {len(data) / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
