"""The zoo's real models through `byoc run MODEL --backend ccompiler --compare onnxruntime`,
with the zoo's inputs, and most of each model offloaded."""

from __future__ import annotations

import json

import numpy as np
import pytest

import byoc
from byoc.cli import main
from byoc.ir import Call, post_order
from tests.models import zoo

# Models whose compute sits in ops ccompiler does not take (LSTM, GRU, If): the share of nodes
# they offload is what is left around those.
LOW_SHARE = {"lstm_bidir": 0.6, "gru": 0.6, "silero_vad_16k": 0.2, "silero_vad_8k": 0.2,
             "silero_vad_op18_ifless": 0.6}


def _node_share(part: byoc.IRModule) -> float:
    inside = sum(1 for name, f in part.functions.items() if name != "main"
                 for e in post_order(f.body) if isinstance(e, Call))
    host = sum(1 for e in post_order(part.main.body)
               if isinstance(e, Call) and isinstance(e.op, str))
    return inside / max(1, inside + host)


@pytest.mark.slow
@pytest.mark.parametrize("model", [pytest.param(m, id=m.name)
                                   for m in (*zoo.MODELS, *zoo.light_models())])
def test_cli_run_matches_onnxruntime_offloaded(model, tmp_path, capsys):
    try:
        path = model.locate()
    except zoo.ModelUnavailable as err:
        pytest.skip(str(err))
    feeds = model.make_inputs(np.random.default_rng(0))
    args = ["run", str(path), "--backend", "ccompiler", "--compare", "onnxruntime", "--json"]
    for name, value in feeds.items():
        file = tmp_path / f"input{len(args)}.npy"
        np.save(file, value)
        args += ["--input", f"{name}={file}"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["ok"], result["outputs"]
    part = byoc.partition(byoc.load_onnx(model.load()), backends=["ccompiler"])
    assert _node_share(part) >= LOW_SHARE.get(model.name, 0.85)
