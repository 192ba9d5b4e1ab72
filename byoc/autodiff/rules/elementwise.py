"""Gradients of elementwise ops: activations and math functions, broadcasting arithmetic, Where,
Cast.

Unary ``y = f(x)``: ``dx = g * f'(x)``, written with y where that is cheaper or lets x be freed.
Broadcasting ``y = f(a, b)``: each partial is summed back to its input's shape (unbroadcast).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ...ir import Expr, TupleType
from ...op.onnx_bridge import elem_type
from ..algebra import Sym, sym, where
from ..rule import Backward, GradientRule, const_ints, dtype_of
from ..shapes import unbroadcast

FLOATS = {"float16", "bfloat16", "float32", "float64"}
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_TANH_C = 0.044715

# (b, g, x, y) -> dL/dx, as Syms: the whole of a unary rule.
Unary = Callable[[Backward, Sym, Sym, Sym], Sym]


def unary(fn: Unary) -> GradientRule:
    """The rule of ``y = f(x)`` from ``dx = fn(g, x, y)``."""

    def rule(b: Backward) -> list[Expr | None]:
        x = b.x(0)
        assert x is not None
        return [fn(b, sym(b, b.g), sym(b, x), sym(b, b.y())).e]

    rule.__doc__ = fn.__doc__
    return rule


def _gelu(b: Backward, g: Sym, x: Sym, y: Sym) -> Sym:
    """exact: dx = g * (Phi(x) + x phi(x)); tanh: t = tanh(c (x + k x^3)),
    dx = g * (0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3k x^2))."""
    if b.attr("approximate", "none") == "tanh":
        t = (SQRT_2_OVER_PI * (x + GELU_TANH_C * x * x * x)).apply("Tanh")
        slope = SQRT_2_OVER_PI * (1 + 3 * GELU_TANH_C * x * x)
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * slope)
    cdf = 0.5 * (1 + (x * (1 / math.sqrt(2.0))).apply("Erf"))
    pdf = (-0.5 * x * x).apply("Exp") * (1 / math.sqrt(2 * math.pi))
    return g * (cdf + x * pdf)


def _selu(b: Backward, g: Sym, x: Sym, y: Sym) -> Sym:
    """x > 0: dx = gamma g; else y = gamma alpha (e^x - 1) so dx = g (y + gamma alpha)."""
    alpha = b.attr("alpha", 1.67326319217681884765625)
    gamma = b.attr("gamma", 1.05070102214813232421875)
    return where(x > 0, g * gamma, g * (y + gamma * alpha))


def _hard_sigmoid(b: Backward, g: Sym, x: Sym, y: Sym) -> Sym:
    """y = clip(alpha x + beta, 0, 1): dx = alpha g inside (0, 1), else 0."""
    alpha, beta = b.attr("alpha", 0.2), b.attr("beta", 0.5)
    z = alpha * x + beta
    return where((z > 0).apply("And", (z < 1).e), g * alpha, 0)


def _hard_swish(b: Backward, g: Sym, x: Sym, y: Sym) -> Sym:
    """y = x clip(x/6 + 1/2, 0, 1): dx = g (x/3 + 1/2) on (-3, 3), g above, 0 below."""
    inner = where(x < 3, g * (x * (1 / 3) + 0.5), g)
    return where(x > -3, inner, 0)


def _mish(b: Backward, g: Sym, x: Sym, y: Sym) -> Sym:
    """y = x tanh(softplus x): dx = g (t + x (1 - t^2) sigmoid(x)), t = tanh(softplus x)."""
    t = x.apply("Softplus").apply("Tanh")
    return g * (t + x * (1 - t * t) * x.apply("Sigmoid"))


def _shrink(b: Backward, g: Sym, x: Sym, y: Sym) -> Sym:
    """y = x -+ bias outside [-lambd, lambd], else 0: dx = g outside, 0 inside."""
    lambd = b.attr("lambd", 0.5)
    return where((x > lambd).apply("Or", (x < -lambd).e), g, 0)


UNARY: dict[str, Unary] = {
    "Identity": lambda b, g, x, y: g,
    "Neg": lambda b, g, x, y: -g,
    "Abs": lambda b, g, x, y: g * x.apply("Sign"),
    "Exp": lambda b, g, x, y: g * y,
    "Log": lambda b, g, x, y: g / x,
    "Sqrt": lambda b, g, x, y: g / (y * 2),
    "Reciprocal": lambda b, g, x, y: -(g * y * y),
    "Relu": lambda b, g, x, y: where(y > 0, g, 0),  # y > 0 iff x > 0; y outlives x anyway
    "ThresholdedRelu": lambda b, g, x, y: where(x > b.attr("alpha", 1.0), g, 0),
    "LeakyRelu": lambda b, g, x, y: where(x > 0, g, g * b.attr("alpha", 0.01)),
    "Elu": lambda b, g, x, y: where(x > 0, g, g * (y + b.attr("alpha", 1.0))),
    "Celu": lambda b, g, x, y: where(x > 0, g, g * (y / b.attr("alpha", 1.0) + 1)),
    "Selu": _selu,
    "Sigmoid": lambda b, g, x, y: g * y * (1 - y),
    "HardSigmoid": _hard_sigmoid,
    "HardSwish": _hard_swish,
    "Tanh": lambda b, g, x, y: g * (1 - y * y),
    "Softplus": lambda b, g, x, y: g * x.apply("Sigmoid"),
    "Softsign": lambda b, g, x, y: g / ((1 + x.apply("Abs")) * (1 + x.apply("Abs"))),
    "Mish": _mish,
    "Shrink": _shrink,
    "Erf": lambda b, g, x, y: g * (2 / math.sqrt(math.pi)) * (-(x * x)).apply("Exp"),
    "Gelu": _gelu,
    "Sin": lambda b, g, x, y: g * x.apply("Cos"),
    "Cos": lambda b, g, x, y: -(g * x.apply("Sin")),
    "Tan": lambda b, g, x, y: g * (1 + y * y),
    "Atan": lambda b, g, x, y: g / (1 + x * x),
    "Sinh": lambda b, g, x, y: g * x.apply("Cosh"),
    "Cosh": lambda b, g, x, y: g * x.apply("Sinh"),
    "Asin": lambda b, g, x, y: g / (1 - x * x).apply("Sqrt"),
    "Acos": lambda b, g, x, y: -(g / (1 - x * x).apply("Sqrt")),
    "Asinh": lambda b, g, x, y: g / (x * x + 1).apply("Sqrt"),
    "Acosh": lambda b, g, x, y: g / (x * x - 1).apply("Sqrt"),
    "Atanh": lambda b, g, x, y: g / (1 - x * x),
}


def zero(b: Backward) -> list[Expr | None]:
    """Piecewise-constant ops (Floor, Sign, ...): dx = 0 almost everywhere."""
    return []


def cast(b: Backward) -> list[Expr | None]:
    """y = cast(x): dx = cast(g) back to x's dtype (no gradient into an integer x)."""
    x = b.x(0)
    assert x is not None
    if dtype_of(x) not in FLOATS:
        return [None]
    return [b.op("Cast", b.g, to=elem_type(dtype_of(x)))]


def clip(b: Backward) -> list[Expr | None]:
    """y = clip(x, lo, hi): dx = g where lo <= x <= hi; d lo = sum(g where x < lo), d hi
    likewise above."""
    x, lo, hi = (sym(b, e) if e is not None else None for e in (b.x(0), b.x(1), b.x(2)))
    assert x is not None
    g = sym(b, b.g)
    inside: Sym | None = None
    for bound, keep in ((lo, lambda: x >= lo), (hi, lambda: x <= hi)):
        if bound is not None:
            k = keep()
            inside = k if inside is None else inside.apply("And", k.e)
    dx = g if inside is None else where(inside, g, 0)
    out: list[Expr | None] = [dx.e, None, None]
    if lo is not None and b.need(1):
        out[1] = unbroadcast(b, where(x < lo, g, 0).e, lo.e)
    if hi is not None and b.need(2):
        out[2] = unbroadcast(b, where(x > hi, g, 0).e, hi.e)
    return out


def dropout(b: Backward) -> list[Expr | None]:
    """Inference: identity. Training: y = x * mask / (1 - ratio), so dx = g * mask / (1 - ratio)
    with the forward's own mask (its second output); a run-time training flag picks."""
    training = b.x(2)
    if training is None or const_ints(training) == [0]:
        return [b.g]
    if not isinstance(b.call.type, TupleType):
        raise b.fail("training-mode Dropout needs its mask output to be differentiated")
    g = sym(b, b.g)
    ratio = b.x(1)
    keep = 1 - (sym(b, ratio) if ratio is not None else sym(b, b.const(0.5, b.g)))
    scale = (1 / keep).apply("Cast", to=elem_type(dtype_of(b.g)))
    if const_ints(training) is None:  # decided at run time: scale only when training
        scale = where(sym(b, training), scale, 1)
    return [where(sym(b, b.y(1)), g * scale, 0).e]


# -- broadcasting binaries ----------------------------------------------------------------------


def _partials(b: Backward, *partials: Callable[[], Sym] | None) -> list[Expr | None]:
    """Each wanted partial (None: the input takes none), built lazily and summed back to its
    input's shape."""
    out: list[Expr | None] = []
    for j, make in enumerate(partials):
        x = b.x(j)
        wanted = make is not None and x is not None and b.need(j)
        out.append(unbroadcast(b, make().e, x) if wanted else None)  # type: ignore[misc]
    return out


def add(b: Backward) -> list[Expr | None]:
    """y = a + b: da = g, db = g."""
    g = sym(b, b.g)
    return _partials(b, lambda: g, lambda: g)


def sub(b: Backward) -> list[Expr | None]:
    """y = a - b: da = g, db = -g."""
    g = sym(b, b.g)
    return _partials(b, lambda: g, lambda: -g)


def mul(b: Backward) -> list[Expr | None]:
    """y = a b: da = g b, db = g a."""
    g, x0, x1 = sym(b, b.g), sym(b, b.x(0)), sym(b, b.x(1))
    return _partials(b, lambda: g * x1, lambda: g * x0)


def div(b: Backward) -> list[Expr | None]:
    """y = a / b: da = g / b, db = -g a / b^2 = -(g / b) y."""
    g, x1, y = sym(b, b.g), sym(b, b.x(1)), sym(b, b.y())
    q = g / x1
    return _partials(b, lambda: q, lambda: -(q * y))


def pow_(b: Backward) -> list[Expr | None]:
    """y = a^e: da = g e a^(e - 1), de = g y log(a)."""
    g, a, e, y = sym(b, b.g), sym(b, b.x(0)), sym(b, b.x(1)), sym(b, b.y())
    if dtype_of(e.e) != dtype_of(a.e):  # an integer exponent: match a's dtype for the math
        e = e.apply("Cast", to=elem_type(dtype_of(a.e)))
    return _partials(b, lambda: g * e * (a ** (e - 1)), lambda: g * y * a.apply("Log"))


def mod(b: Backward) -> list[Expr | None]:
    """y = fmod(a, c) = a - c trunc(a / c): da = g, dc = -g trunc(a / c) (integer Mod has no
    gradient: its values carry none)."""
    if not int(b.attr("fmod", 0)):
        raise b.fail("Mod with fmod=0 is integer-only and has no gradient")
    g, a, c = sym(b, b.g), sym(b, b.x(0)), sym(b, b.x(1))
    q = a / c
    trunc = q.apply("Sign") * q.apply("Abs").apply("Floor")
    return _partials(b, lambda: g, lambda: -(g * trunc))


def prelu(b: Backward) -> list[Expr | None]:
    """y = x > 0 ? x : s x: dx = x > 0 ? g : g s, ds = x > 0 ? 0 : g x."""
    g, x, s = sym(b, b.g), sym(b, b.x(0)), sym(b, b.x(1))
    pos = x > 0
    return _partials(b, lambda: where(pos, g, g * s), lambda: where(pos, 0, g * x))


def where_(b: Backward) -> list[Expr | None]:
    """y = c ? a : b: da = c ? g : 0, db = c ? 0 : g (no gradient into the condition)."""
    g, c = sym(b, b.g), sym(b, b.x(0))
    return _partials(b, None, lambda: where(c, g, 0), lambda: where(c, 0, g))


def sum_(b: Backward) -> list[Expr | None]:
    """y = sum_i x_i: dx_i = g."""
    g = sym(b, b.g)
    return _partials(b, *[lambda: g] * len(b.call.args))


def mean(b: Backward) -> list[Expr | None]:
    """y = (1/n) sum_i x_i: dx_i = g / n."""
    g = sym(b, b.g) * (1.0 / len(b.call.args))
    return _partials(b, *[lambda: g] * len(b.call.args))


def extremum(b: Backward) -> list[Expr | None]:
    """y = max_i x_i (or min): dx_i = g where x_i is the first input equal to y, else 0, so a
    tie sends the gradient to one input only."""
    g, y = sym(b, b.g), sym(b, b.y())
    taken: Sym | None = None
    masks: list[Sym] = []
    for x in b.call.args:
        hit = sym(b, x).apply("Equal", y.e)
        if taken is not None:
            hit = hit.apply("And", taken.apply("Not").e)
        masks.append(hit)
        taken = hit if taken is None else taken.apply("Or", hit.e)
    return _partials(b, *[lambda m=m: where(m, g, 0) for m in masks])


RULES: dict[str, GradientRule] = {
    **{op: unary(fn) for op, fn in UNARY.items()},
    **{op: zero for op in ("Floor", "Ceil", "Round", "Sign")},
    "Cast": cast, "CastLike": cast, "Clip": clip, "Dropout": dropout,
    "Add": add, "Sub": sub, "Mul": mul, "Div": div, "Pow": pow_, "Mod": mod, "PRelu": prelu,
    "Where": where_, "Sum": sum_, "Mean": mean, "Max": extremum, "Min": extremum,
}
