"""Every op the ccompiler backend takes, against onnxruntime, on at least three configurations.

Each test builds one ONNX model holding many independent cases (one node each), imports it,
compiles its main as a single region (so a family of ops costs one C compile) and compares every
output with onnxruntime's. Every node must be taken by the backend, and none may fall back to
the host (a fallback warns, which fails the test).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import byoc
from byoc.backends.ccompiler import compile_region, supports
from byoc.compare import compare_outputs, run_onnxruntime
from byoc.ir import Call, post_order

RNG = np.random.default_rng(7)


@dataclass
class Init:
    """An input given as an initializer (a constant in byoc's IR)."""

    value: np.ndarray


@dataclass
class Case:
    op: str
    inputs: list
    attrs: dict = field(default_factory=dict)
    outputs: int = 1


def case(op: str, *inputs, outputs: int = 1, **attrs) -> Case:
    return Case(op, list(inputs), attrs, outputs)


def f32(*shape, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def i64(*shape, lo: int = -5, hi: int = 6) -> np.ndarray:
    return RNG.integers(lo, hi, shape).astype(np.int64)


def const_i64(*values) -> Init:
    return Init(np.array(values, dtype=np.int64))


def model_of(cases: list[Case], opset: int = 28) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    nodes, inputs, inits, outputs, feeds = [], [], [], [], {}
    for k, c in enumerate(cases):
        names = []
        for j, x in enumerate(c.inputs):
            name = f"c{k}_{c.op}_in{j}"
            if x is None:
                names.append("")
            elif isinstance(x, Init):
                inits.append(numpy_helper.from_array(x.value, name))
                names.append(name)
            else:
                x = np.asarray(x)
                elem = helper.np_dtype_to_tensor_dtype(x.dtype)
                inputs.append(helper.make_tensor_value_info(name, elem, x.shape))
                feeds[name] = x
                names.append(name)
        outs = [f"c{k}_{c.op}_out{m}" for m in range(c.outputs)]
        nodes.append(helper.make_node(c.op, names, outs, name=f"case{k}_{c.op}", **c.attrs))
        outputs += [onnx.ValueInfoProto(name=o) for o in outs]
    graph = helper.make_graph(nodes, "cases", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=10), feeds


def check(*cases: Case, rtol: float | None = None, opset: int = 28) -> dict[str, np.ndarray]:
    """Compile all ``cases`` as one region and compare each output with onnxruntime."""
    model, feeds = model_of(list(cases), opset)
    func = byoc.load_onnx(model).main
    refused = {c.span.name: supports(c) for c in post_order(func.body)
               if isinstance(c, Call) and supports(c) is not True}
    assert not refused, refused
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a host fallback would warn
        run = compile_region(func)
        got = run(*[feeds[p.name] for p in func.params])
    named = dict(zip(func.attrs["output_names"], got))
    want = run_onnxruntime(model, feeds)
    bad = [c for c in compare_outputs(named, want, rtol) if not c.ok]
    assert not bad, bad
    return named


# -- elementwise ---------------------------------------------------------------------------------

UNARY = ["Abs", "Neg", "Relu", "Sign", "Exp", "Floor", "Ceil", "Round", "Sin", "Cos", "Tanh",
         "Sigmoid", "Erf", "Softsign", "Softplus", "Mish", "HardSwish", "LeakyRelu",
         "ThresholdedRelu", "Elu", "Selu", "Celu", "HardSigmoid", "Gelu", "Reciprocal", "Tan"]
SHAPES = [(7,), (2, 3, 5), (1, 4, 33)]


def test_unary_float_ops():
    check(*(case(op, f32(*s, lo=-4, hi=4)) for op in UNARY for s in SHAPES))


def test_unary_ops_with_positive_domain():
    check(*(case(op, f32(*s, lo=0.1, hi=5)) for op in ("Log", "Sqrt") for s in SHAPES))


def test_unary_attributes():
    x = f32(3, 17, lo=-5, hi=5)
    check(case("LeakyRelu", x, alpha=0.2), case("LeakyRelu", x, alpha=1.5),
          case("HardSigmoid", x, alpha=0.1, beta=0.3), case("HardSigmoid", x, alpha=0.5),
          case("Elu", x, alpha=0.5), case("Celu", x, alpha=2.0),
          case("Selu", x, alpha=1.2, gamma=0.9), case("ThresholdedRelu", x, alpha=0.5),
          case("Gelu", x, approximate="tanh"), case("Gelu", x, approximate="none"),
          case("Gelu", f32(2, 64)))


def test_exp_tanh_sigmoid_extremes():
    x = np.array([-100, -88, -30, -1e-6, 0, 1e-6, 1e-3, 0.06, 30, 88, 100], np.float32)
    check(case("Exp", x[:-2]), case("Tanh", x), case("Sigmoid", x), case("Erf", x), rtol=1e-5)


def test_clip():
    x = f32(4, 9, lo=-3, hi=3)
    check(case("Clip", x, Init(np.float32(-1)), Init(np.float32(1.5))),
          case("Clip", x, Init(np.float32(0))),
          case("Clip", x, None, Init(np.float32(0.5))),
          case("Clip", x, np.float32(-0.5), np.float32(2.0)),
          case("Clip", x),
          case("Clip", i64(5, 3), Init(np.int64(-2)), Init(np.int64(3))))


BINARY_SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((5, 1), (1, 6)),
                 ((1, 3, 1, 5), (2, 1, 4, 1))]


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_binary_broadcasting(dtype):
    def make(shape):
        if dtype == "float32":
            return f32(*shape)
        return i64(*shape)

    ops = ["Add", "Sub", "Mul", "Max", "Min"]
    cases = [case(op, make(a), make(b)) for op in ops for a, b in BINARY_SHAPES]
    divisor = (f32(3, 4, lo=0.5, hi=2) if dtype == "float32" else i64(3, 4, lo=1, hi=4))
    cases += [case("Div", make((3, 4)), divisor), case("Div", make((2, 3, 4)), divisor[0]),
              case("Div", make((1, 4)), divisor)]
    check(*cases)


def test_int_division_truncates_and_survives_zero():
    a = np.array([7, -7, 9, -9, 5], np.int64)
    b = np.array([2, 2, -4, -4, 3], np.int64)
    check(case("Div", a, b), case("Div", a, Init(np.int64(2))), case("Div", a[:2], b[:2]))


def test_binary_with_constant_scalars_and_pow():
    x = f32(3, 5, lo=0.2, hi=3)
    check(case("Add", x, Init(np.float32(0.5))), case("Mul", Init(np.float32(-2)), x),
          case("Sub", Init(np.array([1, 2, 3, 4, 5], np.float32)), x),
          case("Pow", x, Init(np.float32(2))), case("Pow", x, Init(np.float32(0.5))),
          case("Pow", x, Init(np.float32(1.7))), case("Pow", x, f32(1, 5, lo=-1, hi=2)),
          case("Pow", x, Init(np.float32(-0.5))), case("Pow", x, Init(np.float32(3))))


def test_variadic_and_prelu():
    a, b, c = f32(2, 3, 4), f32(3, 4), f32(4)
    check(case("Sum", a, b, c), case("Mean", a, b, c), case("Max", a, b, c), case("Min", a, b),
          case("Sum", a), case("PRelu", a, Init(f32(4))), case("PRelu", a, f32(3, 1)),
          case("PRelu", f32(2, 3, 5, 5), Init(f32(3, 1, 1))))


def test_compare_and_logic():
    a, b = f32(2, 3, 4), f32(3, 4)
    ia, ib = i64(2, 5), i64(5)
    a[0, 0, :2] = b[0, :2]  # some ties for Equal and the *OrEqual ops
    cases = [case(op, x, y) for op in ("Equal", "Less", "Greater", "LessOrEqual",
                                       "GreaterOrEqual") for x, y in ((a, b), (ia, ib), (b, a))]
    p, q = RNG.random((3, 4)) < 0.5, RNG.random((4,)) < 0.5
    cases += [case(op, p, q) for op in ("And", "Or", "Xor")] + [case("Not", p)]
    cases += [case("And", q, p), case("Xor", p[:1], q), case("Not", q), case("Equal", p, q)]
    check(*cases)


def test_where_cast_isnan_isinf():
    cond = RNG.random((2, 3, 4)) < 0.5
    x = f32(2, 3, 4) * 3
    special = np.array([1.0, np.nan, np.inf, -np.inf, -2.5, 0.0], np.float32)
    check(case("Where", cond, x, f32(4)), case("Where", cond[0], i64(3, 4), i64(1)),
          case("Where", cond[:, :1], Init(np.float32(-1e9)), x),
          case("Cast", x, to=onnx.TensorProto.INT64),
          case("Cast", i64(7), to=onnx.TensorProto.FLOAT),
          case("Cast", x, to=onnx.TensorProto.BOOL), case("Cast", cond, to=onnx.TensorProto.FLOAT),
          case("Cast", i64(4).astype(np.int32), to=onnx.TensorProto.INT64),
          case("IsNaN", special), case("IsInf", special),
          case("IsInf", special, detect_negative=0), case("IsInf", special, detect_positive=0))


# -- matrix products and convolutions ------------------------------------------------------------


def test_matmul():
    check(case("MatMul", f32(33, 17), f32(17, 29)),
          case("MatMul", f32(2, 3, 8, 16), f32(2, 3, 16, 5)),
          case("MatMul", f32(4, 7, 12), Init(f32(12, 9))),
          case("MatMul", f32(7), f32(7, 5)), case("MatMul", f32(4, 7), f32(7)),
          case("MatMul", f32(3, 1, 4, 6), f32(2, 6, 5)),
          case("MatMul", f32(1, 300), f32(300, 70)), case("MatMul", f32(2, 40), f32(40, 3)),
          case("MatMul", f32(130, 270), f32(270, 1030)), rtol=1e-5)


def test_gemm():
    a, b = f32(6, 10), f32(10, 7)
    check(case("Gemm", a, b), case("Gemm", a.T.copy(), b, transA=1),
          case("Gemm", a, Init(b.T.copy()), Init(f32(7)), transB=1),
          case("Gemm", a.T.copy(), b.T.copy(), f32(6, 7), transA=1, transB=1, alpha=0.5,
               beta=2.0),
          case("Gemm", a, b, f32(1, 7), beta=0.0), case("Gemm", a, b, Init(np.float32(3))),
          case("Gemm", a, b, f32(6, 1), alpha=-1.0),
          case("Gemm", f32(1, 300), Init(f32(20, 300)), Init(f32(20)), transB=1),
          case("Gemm", f32(2, 50), Init(f32(50, 9))), rtol=1e-5)


def test_conv():
    check(case("Conv", f32(1, 3, 9, 9), Init(f32(4, 3, 3, 3)), Init(f32(4)), pads=[1, 1, 1, 1]),
          case("Conv", f32(2, 4, 11, 10), Init(f32(6, 4, 3, 2)), strides=[2, 1],
               dilations=[2, 1], pads=[2, 0, 1, 1]),
          case("Conv", f32(1, 4, 8, 8), Init(f32(6, 2, 3, 3)), group=2, pads=[1, 1, 1, 1]),
          case("Conv", f32(1, 6, 9, 9), Init(f32(6, 1, 3, 3)), Init(f32(6)), group=6,
               strides=[2, 2], pads=[1, 1, 1, 1]),
          case("Conv", f32(1, 4, 9, 9), Init(f32(8, 1, 5, 5)), group=4, pads=[2, 2, 2, 2],
               dilations=[1, 1]),
          case("Conv", f32(2, 5, 7, 7), Init(f32(3, 5, 1, 1)), Init(f32(3))),
          case("Conv", f32(1, 3, 20), Init(f32(4, 3, 5)), pads=[2, 2], strides=[2]),
          case("Conv", f32(1, 3, 10, 10), Init(f32(5, 3, 3, 3)), auto_pad="SAME_UPPER",
               strides=[2, 2]),
          case("Conv", f32(1, 3, 10, 10), Init(f32(5, 3, 4, 4)), auto_pad="SAME_LOWER"),
          case("Conv", f32(1, 3, 8, 8), f32(2, 3, 3, 3)),  # weights as a run-time input
          case("Conv", f32(1, 20, 19, 21), Init(f32(17, 20, 3, 3)), pads=[1, 1, 1, 1]),
          case("Conv", f32(1, 3, 12, 12), Init(f32(3, 1, 9, 9)), group=3, pads=[4, 4, 4, 4]),
          case("Conv", f32(2, 4, 9, 11), f32(4, 1, 3, 3), group=4, dilations=[2, 1],
               strides=[1, 2], pads=[2, 1, 0, 1]),
          case("Conv", f32(1, 6, 17), Init(f32(6, 1, 5)), group=6, pads=[2, 2]),
          # the packer's strided copies: stride 3 and a dilation along W, uneven pads
          case("Conv", f32(1, 3, 13, 29), Init(f32(7, 3, 3, 3)), strides=[1, 3],
               dilations=[1, 2], pads=[1, 2, 0, 1]),
          case("Conv", f32(1, 3, 6, 40), Init(f32(4, 3, 2, 3)), strides=[2, 2], pads=[0, 1, 1, 0]),
          rtol=1e-5)


def test_conv_transpose():
    check(case("ConvTranspose", f32(1, 4, 5, 5), Init(f32(4, 3, 3, 3)), Init(f32(3)),
               strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
          case("ConvTranspose", f32(2, 4, 4, 6), Init(f32(4, 2, 2, 3)), group=2),
          case("ConvTranspose", f32(1, 3, 7), Init(f32(3, 2, 4)), strides=[3], pads=[1, 2]),
          case("ConvTranspose", f32(1, 2, 4, 4), Init(f32(2, 3, 3, 3)), strides=[2, 2],
               output_shape=[9, 9]),
          case("ConvTranspose", f32(1, 2, 5, 5), Init(f32(2, 2, 3, 3)), dilations=[2, 2]),
          case("ConvTranspose", f32(1, 2, 4, 4), Init(f32(2, 2, 2, 2)), strides=[2, 2],
               auto_pad="SAME_UPPER"),
          rtol=1e-5)


# -- pooling and normalization -------------------------------------------------------------------


def test_max_pool():
    x = f32(2, 3, 11, 10)
    check(case("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
          case("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
          case("MaxPool", x, kernel_shape=[2, 2], dilations=[2, 2]),
          case("MaxPool", f32(1, 4, 15), kernel_shape=[4], strides=[3], pads=[1, 2]),
          case("MaxPool", x, kernel_shape=[3, 2], auto_pad="SAME_UPPER", strides=[2, 2]),
          case("MaxPool", x, kernel_shape=[9, 8], pads=[1, 0, 2, 1]))  # > 64 taps: the C helper


def test_average_pool():
    x = f32(2, 3, 11, 10)
    check(case("AveragePool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
          case("AveragePool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
               count_include_pad=1),
          case("AveragePool", x, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
          case("AveragePool", x, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1,
               pads=[1, 1, 1, 1], count_include_pad=1),
          case("AveragePool", f32(1, 4, 15), kernel_shape=[4], strides=[3], pads=[1, 2]),
          case("AveragePool", x, kernel_shape=[2, 2], auto_pad="SAME_LOWER"))


def test_global_pools():
    check(*(case(op, f32(*s)) for op in ("GlobalAveragePool", "GlobalMaxPool")
            for s in ((2, 3, 7, 6), (1, 5, 9), (1, 2, 3, 4, 5))))


def test_batch_norm():
    def bn(shape):
        c = shape[1]
        return case("BatchNormalization", f32(*shape), Init(f32(c)), Init(f32(c)), Init(f32(c)),
                    Init(f32(c, lo=0.1, hi=2)), epsilon=1e-3)

    check(bn((2, 3, 5, 4)), bn((4, 6)), bn((1, 2, 9)))


def test_layer_norm():
    x = f32(2, 5, 16)
    check(case("LayerNormalization", x, Init(f32(16)), Init(f32(16))),
          case("LayerNormalization", x, Init(f32(5, 16)), axis=1, epsilon=1e-3),
          case("LayerNormalization", x, Init(f32(16))),
          case("LayerNormalization", f32(3, 100), Init(f32(100)), Init(f32(100))),
          case("LayerNormalization", x, Init(f32(1, 16)), Init(f32(5, 1)), axis=1))


def test_softmax():
    x = f32(2, 3, 5) * 4
    check(*(case(op, x, axis=a) for op in ("Softmax", "LogSoftmax") for a in (-1, 1, 0)),
          case("Softmax", f32(3, 1000) * 10), rtol=1e-5)


def test_lrn():
    x = f32(2, 7, 4, 3, lo=0, hi=3)
    check(case("LRN", x, size=3), case("LRN", x, size=5, alpha=1e-3, beta=0.5, bias=2.0),
          case("LRN", f32(1, 9, 2, 6), size=7))


def test_reductions():
    x, i = f32(2, 3, 4, 5), i64(3, 4, 5)
    ax = const_i64
    cases = []
    for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
               "ReduceSumSquare", "ReduceL1", "ReduceL2"):
        cases += [case(op, x, ax(1)), case(op, x, ax(0, 2), keepdims=0),
                  case(op, x, ax(-1)), case(op, x, keepdims=0), case(op, x, ax(1, 3))]
    cases += [case(op, i, ax(1)) for op in ("ReduceSum", "ReduceMax", "ReduceMin")]
    cases += [case("ReduceSum", x, Init(np.zeros(0, np.int64)), noop_with_empty_axes=1),
              case("ReduceMean", f32(4, 1000), ax(1))]
    for op in ("ReduceMean", "ReduceSum", "ReduceProd", "ReduceL2", "ReduceMax"):
        cases += [case(op, f32(1), keepdims=0), case(op, f32(1, 1), ax(1))]  # one element
    check(*cases, rtol=2e-5)


# -- data movement -------------------------------------------------------------------------------


def test_views_and_copies():
    x = f32(2, 3, 4)
    check(case("Reshape", x, const_i64(4, 6)), case("Reshape", x, const_i64(0, -1)),
          case("Reshape", i64(6), const_i64(2, 1, 3)),
          case("Flatten", x), case("Flatten", x, axis=0), case("Flatten", x, axis=2),
          case("Squeeze", f32(1, 3, 1, 2), const_i64(0, 2)), case("Squeeze", f32(1, 3, 1)),
          case("Unsqueeze", x, const_i64(0, 3)), case("Unsqueeze", i64(4), const_i64(-1)),
          case("Unsqueeze", Init(np.array(2.5, np.float32)), const_i64(0)),
          case("Identity", x), case("Identity", i64(3)), case("Identity", RNG.random(4) < 0.5),
          case("Dropout", x), case("Dropout", x, outputs=2),
          case("Dropout", f32(5), Init(np.float32(0.3)), outputs=2),
          case("Squeeze", f32(3, 1), const_i64(-1)))


def test_transpose_concat_split():
    x = f32(2, 3, 4)
    check(case("Transpose", x), case("Transpose", x, perm=[0, 2, 1]),
          case("Transpose", f32(2, 3, 4, 5), perm=[0, 2, 3, 1]),
          case("Transpose", i64(3, 5), perm=[1, 0]),
          case("Concat", x, f32(2, 1, 4), f32(2, 2, 4), axis=1),
          case("Concat", x, x, axis=0), case("Concat", i64(2, 3), i64(2, 1), axis=-1),
          case("Split", x, const_i64(1, 2), axis=1, outputs=2),
          case("Split", f32(6, 2), num_outputs=3, outputs=3),
          case("Split", x, axis=2, num_outputs=3, outputs=3),
          case("Split", i64(4, 5), const_i64(2, 3), axis=-1, outputs=2))


def test_slice():
    x = f32(5, 6, 7)
    check(case("Slice", x, const_i64(1), const_i64(4)),
          case("Slice", x, const_i64(0, 5), const_i64(3, -1), const_i64(1, 2)),
          case("Slice", x, const_i64(-1, 6), const_i64(-10**12, 0), const_i64(0, 1),
               const_i64(-2, -1)),
          case("Slice", x, const_i64(2), const_i64(10**12), const_i64(-1), const_i64(3)),
          case("Slice", i64(8), const_i64(1), const_i64(7), const_i64(0), const_i64(2)),
          case("Slice", x, const_i64(3), const_i64(3), const_i64(0)))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad(mode):
    """Every mode: pads on some axes, negative pads (cropped first, then padded, as
    onnxruntime does), named axes, a constant value, pads past a dim, integer and bool data;
    bits equal to onnxruntime's."""
    x = f32(2, 3, 5, 7)
    cases = [case("Pad", x, const_i64(0, 0, 1, 2, 0, 0, 3, 1), mode=mode),
             case("Pad", f32(3, 64), const_i64(0, 16, 0, 16), mode=mode),
             case("Pad", f32(4, 6, 9), const_i64(0, -1, 2, 0, 1, -2), mode=mode),
             case("Pad", f32(2, 5, 6), const_i64(1, 2, 3, 1), None, const_i64(1, -1), mode=mode),
             case("Pad", i64(7), const_i64(3, 2), mode=mode),
             # past a dim (onnxruntime refuses that for reflect: up to the dim's last element)
             case("Pad", f32(3, 4), const_i64(2, 3, 2, 3) if mode == "reflect" else
                  const_i64(3, 5, 2, 7), mode=mode)]
    if mode == "constant":
        cases += [case("Pad", x, const_i64(0, 0, 1, 1, 0, 0, 1, 1), Init(np.float32(1.5))),
                  case("Pad", RNG.random((3, 4)) > 0.5, const_i64(1, 1, 1, 1),
                       Init(np.array(True))),
                  case("Pad", i64(2, 3), const_i64(0, 1, 0, 1), Init(np.int64(-9)))]
    check(*cases)


def test_gather_expand_shape_fill():
    data = f32(5, 4, 3)
    check(case("Gather", data, const_i64(0, 4, -1, 2)),
          case("Gather", data, np.array([[1, 0], [3, -4]], np.int64), axis=1),
          case("Gather", data, np.array([2, 0], np.int32), axis=2),
          case("Gather", data, Init(np.array(3, np.int64))),
          case("Gather", i64(6), Init(np.array([5, 0, 1], np.int64))),
          case("Gather", f32(1000, 16), RNG.integers(0, 1000, (2, 7)).astype(np.int64)),
          case("Expand", f32(3, 1), const_i64(2, 3, 4)), case("Expand", i64(4), const_i64(3, 1)),
          case("Expand", f32(1, 5), const_i64(5, 1)),
          case("Shape", data), case("Shape", data, start=1), case("Shape", data, start=-2, end=-1),
          case("ConstantOfShape", const_i64(2, 3)),
          case("ConstantOfShape", const_i64(4),
               value=numpy_helper.from_array(np.array([7], np.int64))),
          case("ConstantOfShape", const_i64(3, 1),
               value=numpy_helper.from_array(np.array([0.25], np.float32))))


@pytest.mark.parametrize("backend", ["ccompiler", "native"])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_on_a_middle_axis_carries_nan_and_inf(op: str, backend: str):
    """The non-last-axis path keeps a running max per position: a NaN must not be skipped."""
    x = np.arange(24, dtype=np.float32).reshape(1, 3, 2, 4) / 7
    x[0, 1, 0, 0] = np.nan
    x[0, 2, 1, 1] = np.inf
    x[0, 0, 1, 2] = -np.inf
    node = helper.make_node(op, ["x"], ["y"], name="sm", axis=1)
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                             [1, 3, 2, 4])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    mod = byoc.load_onnx(model)
    got = byoc.build(byoc.partition(mod, backends=[backend])).run({"x": x})["y"]
    assert np.isnan(got[0, :, 0, 0]).all()  # the NaN's whole softmax slice
    bad = [c for c in compare_outputs({"y": got}, run_onnxruntime(model, {"x": x})) if not c.ok]
    assert not bad, (got, bad)


# -- quantization --------------------------------------------------------------------------------

QOPSET = 21  # onnxruntime has no QuantizeLinear kernels for newer opsets (byoc imports at 28)

def _halves(*shape, scale: float = 0.5) -> np.ndarray:
    """Values whose x / scale is exactly k + 0.5 (ties to even), and ones far out of range."""
    x = (RNG.integers(-300, 300, shape) + 0.5).astype(np.float32) * np.float32(scale)
    x.flat[:4] = [1e6, -1e6, 0.0, -0.0][:x.size]
    return x


def _s(value) -> Init:
    return Init(np.array(value, np.float32))


def _q(dtype, *values) -> Init:
    return Init(np.array(values[0] if len(values) == 1 else values, dtype))


@pytest.mark.parametrize("backend", ["ccompiler", "native"])
def test_quantize_linear_rounds_half_to_even_and_saturates(backend):
    cases = [case("QuantizeLinear", _halves(2, 3, 5), _s(0.5), _q(np.int8, -3)),
             case("QuantizeLinear", _halves(40), _s(0.5), _q(np.uint8, 128)),
             case("QuantizeLinear", _halves(7), _s(0.5)),  # no zero point: uint8, 0
             case("QuantizeLinear", f32(3, 5, lo=-50, hi=50), np.float32(0.37),
                  np.int8(5)),  # scale and zero point given at run time
             # per-axis, along a middle, the last and the first axis
             case("QuantizeLinear", _halves(2, 3, 4), _s([0.5, 0.25, 2.0]),
                  _q(np.int8, -1, 0, 7), axis=1),
             case("QuantizeLinear", _halves(2, 3, 4), _s([0.5, 1.0, 0.25, 4.0]),
                  _q(np.uint8, 0, 10, 128, 255), axis=-1),
             case("QuantizeLinear", _halves(3, 4), _s([0.5, 0.125, 1.0]),
                  _q(np.uint8, 3, 4, 5), axis=0)]
    if backend == "ccompiler":
        check(*cases, opset=QOPSET)
    else:
        _check_native(cases)


@pytest.mark.parametrize("backend", ["ccompiler", "native"])
def test_dequantize_linear(backend):
    i8 = RNG.integers(-128, 128, (2, 3, 5)).astype(np.int8)
    u8 = RNG.integers(0, 256, (4, 6)).astype(np.uint8)
    i32 = RNG.integers(-(2**31), 2**31 - 1, (10,)).astype(np.int32)
    cases = [case("DequantizeLinear", i8, _s(0.02), _q(np.int8, -128)),
             case("DequantizeLinear", u8, _s(0.1), _q(np.uint8, 255)),
             case("DequantizeLinear", u8, _s(0.1)),
             case("DequantizeLinear", i32, _s([0.001]), _q(np.int32, 0)),  # a bias, as QDQ has
             case("DequantizeLinear", i32, _s(0.5), _q(np.int32, -7)),
             case("DequantizeLinear", Init(i8), _s(0.3), _q(np.int8, 1)),
             case("DequantizeLinear", i8, _s([0.5, 0.25, 2.0]), _q(np.int8, -1, 0, 7), axis=1),
             case("DequantizeLinear", u8, _s([0.5, 1.0, 0.25, 4.0, 3.0, 0.1]),
                  _q(np.uint8, 0, 10, 128, 255, 1, 2), axis=1),
             case("DequantizeLinear", u8, _s([0.5, 1.0, 0.25, 4.0]),
                  _q(np.uint8, 0, 10, 128, 255), axis=0)]
    if backend == "ccompiler":
        check(*cases, opset=QOPSET)
    else:
        _check_native(cases)


def _check_native(cases: list[Case]) -> None:
    model, feeds = model_of(cases, QOPSET)
    part = byoc.partition(byoc.load_onnx(model), backends=["native"])
    assert not byoc.explain(part), byoc.explain(part)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = byoc.build(part).run(feeds)
    bad = [c for c in compare_outputs(got, run_onnxruntime(model, feeds)) if not c.ok]
    assert not bad, bad


def test_quantize_dequantize_round_trip_in_one_region():
    x = _halves(2, 3, 5)
    node_q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q")
    node_d = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq")
    graph = helper.make_graph(
        [node_q, node_d], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(0.5, np.float32), "s"),
         numpy_helper.from_array(np.array(3, np.int8), "z")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", QOPSET)],
                              ir_version=10)
    for backend in ("ccompiler", "native"):
        part = byoc.partition(byoc.load_onnx(model), backends=[backend])
        assert not byoc.explain(part)
        got = byoc.build(part).run({"x": x})["y"]
        np.testing.assert_array_equal(got, run_onnxruntime(model, {"x": x})["y"])


def test_unsupported_quantization_is_refused_with_a_reason():
    x = f32(4, 6)
    cases = [case("QuantizeLinear", x, _s(np.full((4, 3), 0.5)), _q(np.int8, np.zeros((4, 3))),
                  axis=1, block_size=2),
             case("DequantizeLinear", _q(np.int8, np.zeros((4, 6))),
                  _s(np.full((4, 3), 0.5)), _q(np.int8, np.zeros((4, 3))), axis=1, block_size=2),
             case("QuantizeLinear", x, _s(0.5), Init(np.array(0, np.int16))),
             case("QuantizeLinear", x, _s(0.5), output_dtype=onnx.TensorProto.INT4),
             case("DequantizeLinear", Init(np.zeros(3, np.int16)), _s(0.5))]
    model, _ = model_of(cases)
    func = byoc.load_onnx(model).main
    verdicts = {c.span.name: supports(c) for c in post_order(func.body) if isinstance(c, Call)}
    assert len(verdicts) == len(cases)
    for name, verdict in verdicts.items():
        assert isinstance(verdict, str) and verdict.startswith("ccompiler: "), (name, verdict)
    assert "block_size" in verdicts["case0_QuantizeLinear"]
