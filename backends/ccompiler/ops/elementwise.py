"""Elementwise ops with numpy broadcasting: one loop nest, one C expression per element.

Each op is an expression over its operands' values (``x0``, ``x1``...); a one-element constant
operand is a literal in the expression, so ``Mul(x, 0.5)`` compiles to ``x0 * 0.5f``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from byoc.codegen import c_type, float_literal
from byoc.ir import Call

from ..emitter import Emit, Tensor, Unsupported
from ..loops import broadcast_strides, loop_nest

Expr = Callable[[Call, list[str], str], str]  # (call, operand expressions, dtype) -> C


def _f(call: Call, name: str, default: float) -> str:
    return float_literal(call.attrs.get(name, default))


def _is_float(dtype: str) -> bool:
    return dtype in ("float32", "float64")


def _zero(dtype: str) -> str:
    return "0.0f" if _is_float(dtype) else "0"


def _int_div(a: str, b: str, dtype: str) -> str:
    # C traps on x / 0 and INT_MIN / -1. Every backend gives one answer there (decisions.md):
    # x / 0 is 0, and x / -1 is -x wrapped, so INT_MIN / -1 is INT_MIN (negated as unsigned).
    unsigned = "uint64_t" if dtype == "int64" else "uint32_t"
    return (f"(({b}) == 0 ? 0 : ({b}) == -1 ? ({c_type(dtype)})(0 - ({unsigned})({a})) "
            f": ({a}) / ({b}))")


def _clamp01(e: str) -> str:
    return f"({e} < 0.0f ? 0.0f : {e} > 1.0f ? 1.0f : {e})"


def _pow(call: Call, x: list[str], dtype: str) -> str:
    return f"powf({x[0]}, {x[1]})"


def _gelu(call: Call, x: list[str], dtype: str) -> str:
    if call.attrs.get("approximate", "none") == "tanh":
        inner = f"0.7978845608f * ({x[0]} + 0.044715f * {x[0]} * {x[0]} * {x[0]})"
        return f"0.5f * {x[0]} * (1.0f + byoc_tanhf({inner}))"
    return f"0.5f * {x[0]} * (1.0f + byoc_erff({x[0]} * 0.70710678118654752f))"


def _clip(call: Call, x: list[str], dtype: str) -> str:
    out = x[0]
    if len(x) > 1 and x[1]:
        out = f"({out} < {x[1]} ? {x[1]} : {out})"
    if len(x) > 2 and x[2]:
        out = f"({out} > {x[2]} ? {x[2]} : {out})"
    return out


def _softplus(x: str) -> str:
    return f"({x} > 20.0f ? {x} : log1pf(byoc_expf({x})))"


def _sign(call: Call, x: list[str], dtype: str) -> str:
    sign = f"(({x[0]} > {_zero(dtype)}) - ({x[0]} < {_zero(dtype)}))"
    return f"({x[0]} != {x[0]} ? {x[0]} : {sign})" if _is_float(dtype) else sign  # NaN stays


def _fold(op: str) -> Expr:
    def fold(call: Call, x: list[str], dtype: str) -> str:
        out = x[0]
        for y in x[1:]:
            out = f"({out} {op} {y})"
        return out

    return fold


def _extreme(cmp: str) -> Expr:
    """Max (``>``) or Min (``<``): a NaN operand makes the result NaN, as in onnxruntime."""

    def fold(call: Call, x: list[str], dtype: str) -> str:
        nan = " || a_ != a_" if _is_float(dtype) else ""
        out = x[0]
        for k, y in enumerate(x[1:]):
            if k == 0:  # operands are names or literals: the plain form
                out = f"({out} {cmp} {y}{nan.replace('a_', out)} ? {out} : {y})"
            else:  # the fold so far is read three times: bind it once (the C stays linear)
                out = (f"({{ const {c_type(dtype)} a_ = {out}, b_ = {y}; "
                       f"a_ {cmp} b_{nan} ? a_ : b_; }})")
        return out

    return fold


def _mean(call: Call, x: list[str], dtype: str) -> str:
    return f"({' + '.join(x)}) / {float_literal(len(x))}"


def _div(call: Call, x: list[str], dtype: str) -> str:
    return f"{x[0]} / {x[1]}" if _is_float(dtype) else _int_div(x[0], x[1], dtype)


def _cast(call: Call, x: list[str], dtype: str) -> str:
    return f"({x[0]} != 0)" if dtype == "bool" else x[0]


def _is_inf(call: Call, x: list[str], dtype: str) -> str:
    pos, neg = call.attrs.get("detect_positive", 1), call.attrs.get("detect_negative", 1)
    tests = ([f"{x[0]} == INFINITY"] if pos else []) + ([f"{x[0]} == -INFINITY"] if neg else [])
    return "(" + (" || ".join(tests) or "0") + ")"


_QRANGE = {"int8": (-128, 127), "uint8": (0, 255)}


def _quantize(call: Call, x: list[str], dtype: str) -> str:
    # Saturate in float before the cast (a float out of range cast to int is undefined in C);
    # a NaN fails both tests and lands on the low end rather than on undefined behaviour.
    lo, hi = _QRANGE[call.type.dtype]  # type: ignore[union-attr]
    zp = x[2] if len(x) > 2 and x[2] else "0"
    v = f"(nearbyintf({x[0]} / {x[1]}) + (float)({zp}))"
    return f"({v} >= {lo}.0f ? ({v} <= {hi}.0f ? {v} : {hi}.0f) : {lo}.0f)"


def _dequantize(call: Call, x: list[str], dtype: str) -> str:
    # Subtract in int64: int32 biases minus their zero point must not overflow.
    zp = x[2] if len(x) > 2 and x[2] else "0"
    diff = x[0] if zp == "0" else f"((int64_t)({x[0]}) - (int64_t)({zp}))"
    return f"((float)({diff}) * {x[1]})"


def _u(template: str) -> Expr:
    """An expression from a template over ``{x}`` (the operand) and ``{z}`` (a zero)."""
    return lambda call, x, dtype: template.format(x=x[0], z=_zero(dtype))


def _b(template: str) -> Expr:
    return lambda call, x, dtype: template.format(a=x[0], b=x[1])


EXPRESSIONS: dict[str, Expr] = {
    "Abs": lambda c, x, d: f"fabsf({x[0]})" if _is_float(d) else f"({x[0]} < 0 ? -{x[0]} : {x[0]})",
    "Neg": _u("-{x}"),
    "Relu": _u("({x} < {z} ? {z} : {x})"),  # a NaN is not < 0: it passes, as in onnxruntime
    "Sign": _sign,
    "Exp": _u("byoc_expf({x})"),
    "Log": _u("logf({x})"),
    "Sqrt": _u("sqrtf({x})"),
    "Reciprocal": _u("1.0f / {x}"),
    "Floor": _u("floorf({x})"),
    "Ceil": _u("ceilf({x})"),
    "Round": _u("rintf({x})"),  # half to even, as ONNX rounds
    "Sin": _u("sinf({x})"),
    "Cos": _u("cosf({x})"),
    "Tan": _u("tanf({x})"),
    "Tanh": _u("byoc_tanhf({x})"),
    "Sigmoid": _u("byoc_sigmoidf({x})"),
    "Erf": _u("byoc_erff({x})"),
    "Softsign": _u("{x} / (1.0f + fabsf({x}))"),
    "Softplus": lambda c, x, d: _softplus(x[0]),
    "Mish": lambda c, x, d: f"{x[0]} * byoc_tanhf({_softplus(x[0])})",
    # x * HardSigmoid(x) with alpha = 1/6, as onnxruntime rounds it (a multiply, not x / 6)
    "HardSwish": _u(f"{{x}} * {_clamp01('0.166666672f * {x} + 0.5f')}"),
    "LeakyRelu": lambda c, x, d: f"({x[0]} >= 0.0f ? {x[0]} : {_f(c, 'alpha', 0.01)} * {x[0]})",
    "ThresholdedRelu": lambda c, x, d: f"({x[0]} > {_f(c, 'alpha', 1.0)} ? {x[0]} : 0.0f)",
    "Elu": lambda c, x, d: f"({x[0]} >= 0.0f ? {x[0]} : "
                           f"{_f(c, 'alpha', 1.0)} * (byoc_expf({x[0]}) - 1.0f))",
    "Selu": lambda c, x, d: f"{_f(c, 'gamma', 1.05070102214813232421875)} * ({x[0]} > 0.0f ? "
                            f"{x[0]} : {_f(c, 'alpha', 1.67326319217681884765625)} * "
                            f"(byoc_expf({x[0]}) - 1.0f))",
    "Celu": lambda c, x, d: f"(({x[0]} > 0.0f ? {x[0]} : 0.0f) + ({x[0]} > 0.0f ? 0.0f : "
                            f"{_f(c, 'alpha', 1.0)} * (byoc_expf({x[0]} / "
                            f"{_f(c, 'alpha', 1.0)}) - 1.0f)))",
    "HardSigmoid": lambda c, x, d: _clamp01(f"{_f(c, 'alpha', 0.2)} * {x[0]} + "
                                            f"{_f(c, 'beta', 0.5)}"),
    "Gelu": _gelu,
    "Clip": _clip,
    "IsNaN": _u("({x} != {x})"),
    "IsInf": _is_inf,
    "Not": _u("!{x}"),
    "Add": _b("{a} + {b}"),
    "Sub": _b("{a} - {b}"),
    "Mul": _b("{a} * {b}"),
    "Div": _div,
    "Pow": _pow,
    "PRelu": _b("({a} < 0.0f ? {a} * {b} : {a})"),
    "Max": _extreme(">"),
    "Min": _extreme("<"),
    "Sum": _fold("+"),
    "Mean": _mean,
    "Equal": _b("({a} == {b})"),
    "Less": _b("({a} < {b})"),
    "Greater": _b("({a} > {b})"),
    "LessOrEqual": _b("({a} <= {b})"),
    "GreaterOrEqual": _b("({a} >= {b})"),
    "And": _b("({a} && {b})"),
    "Or": _b("({a} || {b})"),
    "Xor": _b("(!{a} != !{b})"),
    "Where": lambda c, x, d: f"({x[0]} ? {x[1]} : {x[2]})",
    "Cast": _cast,
    "QuantizeLinear": _quantize,
    "DequantizeLinear": _dequantize,
}

_NEEDS_MATH = {"Exp", "Tanh", "Sigmoid", "Erf", "Softplus", "Mish", "Elu", "Selu", "Celu", "Gelu"}
_POW_SHORTCUTS = {1.0: "{x}", 2.0: "{x} * {x}", 3.0: "{x} * {x} * {x}", 0.5: "sqrtf({x})",
                  -1.0: "1.0f / {x}", -0.5: "1.0f / sqrtf({x})"}


def emit_elementwise(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    """One loop nest over the broadcast output shape."""
    out = outs[0]
    src = ctx.src
    if call.op in _NEEDS_MATH:
        ctx.need("math")
    ins = per_axis_views(call, ins, out)
    operands = [(k, t) for k, t in enumerate(ins) if t is not None]
    loaded = [t for _, t in operands if t.scalar() is None]
    views = [(0, out.strides)] + [(0, broadcast_strides(t.shape, out.shape)) for t in loaded]
    expr_of = expression(call, ins, out)
    with loop_nest(src, out.shape, views, par=ctx, cost=cost(call)) as index:
        names: dict[int, str] = {}
        n = 0
        for k, t in operands:
            literal = t.scalar()
            if literal is not None:
                names[k] = literal
                continue
            n += 1
            names[k] = f"x{k}"
            src.line(f"const {t.ctype} x{k} = {t.ptr}[{index[n]}];")
        xs = [names.get(k, "") for k in range(len(ins))]
        src.line(f"{out.ptr}[{index[0]}] = {expr_of(xs)};")


def cost(call: Call) -> int:
    """About how many multiply-adds one element of ``call`` costs (for ``Emit.parallel``)."""
    return 16 if call.op in _NEEDS_MATH or call.op in ("Pow", "Log", "Sin", "Cos", "Tan") else 1


def per_axis_views(call: Call, ins: list[Tensor | None], out: Tensor) -> list[Tensor | None]:
    """A per-axis scale and zero point (1-D, along ``axis``) seen with trailing 1-dims, so that
    numpy broadcasting lines them up with ``axis`` of the data."""
    if call.op not in ("QuantizeLinear", "DequantizeLinear") or ins[1] is None \
            or ins[1].size == 1:
        return ins
    rank = len(out.shape)
    axis = call.attrs.get("axis", 1) % rank
    shape = (ins[1].size,) + (1,) * (rank - 1 - axis)
    return [ins[0], *(None if t is None else dataclasses.replace(
        t, shape=shape, value=None if t.value is None else t.value.reshape(shape))
        for t in ins[1:])]


def expression(call: Call, ins: list[Tensor | None], out: Tensor) -> Callable[[list[str]], str]:
    """The C of ``call`` over its operands' expressions (for one element of ``out``)."""
    op = call.op
    # The dtype an expression computes in: its first operand's, but the output's for Where
    # (whose first operand is the bool condition) and Cast (which converts to it).
    dtype = out.dtype if op in ("Where", "Cast") or ins[0] is None else ins[0].dtype
    if op not in EXPRESSIONS:
        raise Unsupported(f"no elementwise expression for {op}")
    if op == "Pow" and ins[1] is not None and ins[1].scalar() is not None:
        exponent = float(ins[1].value.reshape(()))  # type: ignore[union-attr]
        shortcut = _POW_SHORTCUTS.get(exponent)
        if shortcut is not None:
            return lambda xs: shortcut.format(x=xs[0])
    fn = EXPRESSIONS[op]
    return lambda xs: fn(call, xs, dtype)


def emit_copy_like(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor]) -> None:
    """A view op: a copy unless its output shares the input's buffer; a Dropout mask is ones."""
    src, out = ins[0], outs[0]
    assert src is not None
    if out.nbytes and out.ptr != src.ptr:
        ctx.src.line(f"memcpy({out.ptr}, {src.ptr}, {out.nbytes});")
    for mask in outs[1:]:
        ctx.src.line(f"memset({mask.ptr}, 1, {mask.nbytes});")


EMITTERS = {op: emit_elementwise for op in EXPRESSIONS}
