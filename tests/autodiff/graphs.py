"""Whole models for the autodiff tests and the example: an MLP, a small CNN and a transformer
block as ONNX graphs (float64 for checks, float32 for training), plus tiny_resnet in float64.

Each builder returns (model, inputs, parameter names); the model's first output is a scalar
loss and its parameters are initializers, as an exported model's are.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.conftest import make_model

import byoc

DOUBLE = TensorProto.DOUBLE
INT64 = TensorProto.INT64


def _init(rng, name, shape, scale=None):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    scale = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
    return numpy_helper.from_array(rng.normal(size=shape) * scale, name)


def _ints(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def cnn(seed: int = 0):
    """Conv+BN(training)+Relu -> MaxPool -> grouped strided Conv + LeakyRelu -> AveragePool ->
    Conv(pads) + skip Add -> GlobalAveragePool -> Flatten -> Gemm -> SoftmaxCrossEntropyLoss."""
    rng = np.random.default_rng(seed)
    inits = [_init(rng, "w1", (4, 2, 3, 3)), _init(rng, "b1", (4,)),
             numpy_helper.from_array(np.ones(4) + 0.1 * rng.normal(size=4), "gamma"),
             numpy_helper.from_array(0.1 * rng.normal(size=4), "beta"),
             numpy_helper.from_array(np.zeros(4), "rmean"),
             numpy_helper.from_array(np.ones(4), "rvar"),
             _init(rng, "w2", (6, 2, 3, 3)), _init(rng, "w3", (6, 6, 3, 3)),
             _init(rng, "fc_w", (3, 6)), _init(rng, "fc_b", (3,))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "gamma", "beta", "rmean", "rvar"],
                         ["n1", "rm", "rv"], name="bn1", training_mode=1, epsilon=1e-3),
        helper.make_node("Relu", ["n1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2", group=2, strides=[2, 1],
                         pads=[1, 1, 1, 1], dilations=[1, 2]),
        helper.make_node("LeakyRelu", ["c2"], ["r2"], name="lrelu2", alpha=0.1),
        helper.make_node("AveragePool", ["r2"], ["p2"], name="avg2", kernel_shape=[2, 2],
                         strides=[1, 1], pads=[0, 1, 0, 1]),
        helper.make_node("Conv", ["p2", "w3"], ["c3"], name="conv3", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c3", "p2"], ["s3"], name="skip3"),
        helper.make_node("GlobalAveragePool", ["s3"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
        helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"], name="xent"),
    ]
    model = make_model(nodes, [("x", DOUBLE, ["N", 2, 8, 8]), ("labels", INT64, ["N"])],
                       [("loss", DOUBLE, [])], inits)
    inputs = {"x": rng.normal(size=(3, 2, 8, 8)), "labels": np.array([0, 2, 1])}
    params = [t.name for t in inits if t.name not in ("rmean", "rvar")]
    return model, inputs, params


def transformer(seed: int = 0, d: int = 8, heads: int = 2, vocab: int = 11, t: int = 5):
    """Embedding Gather + positions -> LayerNorm -> attention (MatMul, Reshape/Transpose into
    heads, scaled scores, causal Where mask, Softmax) -> output projection + residual ->
    LayerNorm -> MLP with exported-style erf Gelu -> Split/Concat/Slice -> mean squared loss."""
    rng = np.random.default_rng(seed)
    hd = d // heads
    causal = np.tril(np.ones((t, t), dtype=bool))
    inits = [_init(rng, "emb", (vocab, d), 0.5), _init(rng, "pos", (t, d), 0.5),
             numpy_helper.from_array(1 + 0.1 * rng.normal(size=d), "ln1_g"),
             numpy_helper.from_array(0.1 * rng.normal(size=d), "ln1_b"),
             _init(rng, "wqkv", (d, 3 * d)), _init(rng, "wo", (d, d)),
             numpy_helper.from_array(1 + 0.1 * rng.normal(size=d), "ln2_g"),
             _init(rng, "w_up", (d, 2 * d)), _init(rng, "b_up", (2 * d,)),
             _init(rng, "w_down", (2 * d, d)),
             numpy_helper.from_array(causal, "causal"),
             numpy_helper.from_array(np.array(-1e9), "neg"),
             numpy_helper.from_array(np.array(np.sqrt(hd)), "scale"),
             numpy_helper.from_array(np.array(np.sqrt(2.0)), "sqrt2"),
             numpy_helper.from_array(np.array(1.0), "one"),
             numpy_helper.from_array(np.array(0.5), "half"),
             _ints("heads_shape", [0, 0, heads, hd]), _ints("merge_shape", [0, 0, d]),
             _ints("split3", [d, d, d]), _ints("s0", [1]), _ints("e0", [t]), _ints("ax1", [1]),
             _ints("axes_all", [0, 1, 2])]
    n = helper.make_node
    nodes = [
        n("Gather", ["emb", "tokens"], ["e"], name="embed"),
        n("Add", ["e", "pos"], ["h0"], name="add_pos"),
        n("LayerNormalization", ["h0", "ln1_g", "ln1_b"], ["h1"], name="ln1", axis=-1,
          epsilon=1e-5, stash_type=11),
        n("MatMul", ["h1", "wqkv"], ["qkv"], name="qkv"),
        n("Split", ["qkv", "split3"], ["q", "k", "v"], name="split_qkv", axis=-1),
        *[n("Reshape", [a, "heads_shape"], [a + "h"], name="heads_" + a) for a in "qkv"],
        n("Transpose", ["qh"], ["qt"], name="q_t", perm=[0, 2, 1, 3]),
        n("Transpose", ["kh"], ["kt"], name="k_t", perm=[0, 2, 3, 1]),
        n("Transpose", ["vh"], ["vt"], name="v_t", perm=[0, 2, 1, 3]),
        n("MatMul", ["qt", "kt"], ["scores"], name="qk"),
        n("Div", ["scores", "scale"], ["scaled"], name="scale_scores"),
        n("Where", ["causal", "scaled", "neg"], ["masked"], name="mask"),
        n("Softmax", ["masked"], ["attn"], name="softmax", axis=-1),
        n("MatMul", ["attn", "vt"], ["ctx"], name="attn_v"),
        n("Transpose", ["ctx"], ["ctx_t"], name="ctx_t", perm=[0, 2, 1, 3]),
        n("Reshape", ["ctx_t", "merge_shape"], ["merged"], name="merge_heads"),
        n("MatMul", ["merged", "wo"], ["proj"], name="out_proj"),
        n("Add", ["proj", "h0"], ["h2"], name="residual1"),
        n("LayerNormalization", ["h2", "ln2_g"], ["h3"], name="ln2", axis=-1, epsilon=1e-5,
          stash_type=11),
        n("MatMul", ["h3", "w_up"], ["u0"], name="up"),
        n("Add", ["u0", "b_up"], ["u"], name="up_bias"),
        n("Div", ["u", "sqrt2"], ["u_s"], name="gelu_div"),
        n("Erf", ["u_s"], ["u_e"], name="gelu_erf"),
        n("Add", ["u_e", "one"], ["u_p"], name="gelu_add"),
        n("Mul", ["u", "u_p"], ["u_m"], name="gelu_mul"),
        n("Mul", ["u_m", "half"], ["act"], name="gelu_half"),
        n("MatMul", ["act", "w_down"], ["down"], name="down"),
        n("Concat", ["down", "h2"], ["both"], name="concat", axis=-1),
        n("Slice", ["both", "s0", "e0", "ax1"], ["tail"], name="drop_first"),
        n("Sub", ["tail", "target"], ["err"], name="err"),
        n("Mul", ["err", "err"], ["sq"], name="square"),
        n("ReduceMean", ["sq", "axes_all"], ["loss"], name="mse", keepdims=0),
    ]
    model = make_model(nodes, [("tokens", INT64, ["B", t]),
                               ("target", DOUBLE, ["B", t - 1, 2 * d])],
                       [("loss", DOUBLE, [])], inits)
    inputs = {"tokens": rng.integers(0, vocab, size=(2, t)),
              "target": rng.normal(size=(2, t - 1, 2 * d))}
    params = ["emb", "pos", "ln1_g", "ln1_b", "wqkv", "wo", "ln2_g", "w_up", "b_up", "w_down"]
    return model, inputs, params


def to_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy computing in float64: float initializers, constants, graph inputs and outputs,
    Cast targets; LayerNormalization's statistics too (stash_type, float32 by default), and
    value_info dropped for shape inference to redo."""
    m = onnx.ModelProto()
    m.CopyFrom(model)

    def widen(t: onnx.TensorProto) -> None:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64),
                                               t.name))

    graphs = [m.graph]
    while graphs:
        g = graphs.pop()
        for t in g.initializer:
            widen(t)
        for vi in [*g.input, *g.output]:
            if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
                vi.type.tensor_type.elem_type = DOUBLE
        del g.value_info[:]
        for node in g.node:
            if node.op_type == "LayerNormalization" and not any(
                    a.name == "stash_type" for a in node.attribute):
                node.attribute.append(helper.make_attribute("stash_type", DOUBLE))
            for a in node.attribute:
                if a.name in ("to", "stash_type") and a.i == TensorProto.FLOAT:
                    a.i = DOUBLE
                elif a.type == onnx.AttributeProto.TENSOR:
                    widen(a.t)
                elif a.type == onnx.AttributeProto.GRAPH:
                    graphs.append(a.g)
    return m


def tiny_resnet_float64(seed: int = 0):
    """byoc's embedded tiny ResNet in float64 with an NLL loss on its probabilities."""
    path = os.path.join(os.path.dirname(byoc.__file__), "data", "tiny_resnet.onnx")
    model = to_float64(onnx.load(path))
    g = model.graph
    out = g.output[0].name
    g.node.extend([helper.make_node("Log", [out], ["logp"], name="log"),
                   helper.make_node("NegativeLogLikelihoodLoss", ["logp", "labels"], ["loss"],
                                    name="nll")])
    g.input.append(helper.make_tensor_value_info("labels", INT64, ["batch"]))
    g.output.insert(0, helper.make_tensor_value_info("loss", DOUBLE, []))
    rng = np.random.default_rng(seed)
    inputs = {"image": rng.normal(size=(2, 3, 32, 32)), "labels": np.array([1, 7])}
    params = [t.name for t in g.initializer if t.data_type == DOUBLE]
    return model, inputs, params


def zoo_float64(name: str, seed: int = 0):
    """A real exported model of tests/models/zoo.py in float64, with the loss <output 0, r>
    for a fixed random r; attention masks all ones, because a row masked out entirely by
    adding float32's min is flat in floating point (a step of 1e-7 on -3.4e38 is lost) though
    not in exact arithmetic, which the gradient follows."""
    from tests.models.zoo import MODELS

    (entry,) = [z for z in MODELS if z.name == name]
    model = to_float64(entry.load())
    inputs = {k: (np.ones_like(v) if "mask" in k else
                  v.astype(np.float64) if v.dtype == np.float32 else v)
              for k, v in entry.make_inputs(np.random.default_rng(seed)).items()}
    g = model.graph
    shape = byoc.build(byoc.load_onnx(model)).run(inputs)[g.output[0].name].shape
    r = np.random.default_rng(seed + 1).normal(size=shape)
    g.initializer.append(numpy_helper.from_array(r, "loss_r"))
    g.node.extend([helper.make_node("Mul", [g.output[0].name, "loss_r"], ["loss_terms"],
                                    name="loss_mul"),
                   helper.make_node("ReduceSum", ["loss_terms"], ["loss"], name="loss_sum",
                                    keepdims=0)])
    g.output.insert(0, helper.make_tensor_value_info("loss", DOUBLE, []))
    params = [t.name for t in g.initializer
              if t.data_type == DOUBLE and t.name != "loss_r" and len(t.dims) > 0]
    return model, inputs, params
