"""Gradient of Conv (any rank, groups, strides, pads, dilations), and the transposed-convolution
helper the pooling rules share.

    y[n, m, o] = sum_{c, k} x_pad[n, (m / Mg) Cg + c, o s + k d] w[m, c, k] + bias[m]

    dx    = ConvTranspose(g, w): the adjoint of the same window, cut back to x's size
    dw    = Conv over x and g with batch and channels swapped, strides and dilations swapped
    dbias = sum of g over every axis but the channels
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...ir import Expr
from ...op.kernels._window import window
from ..rule import Backward, GradientRule, rank_of, static_shape
from ..shapes import dims_of


@dataclass(frozen=True)
class Geometry:
    """A sliding window with explicit pads (auto_pad resolved)."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begin: tuple[int, ...]
    end: tuple[int, ...]

    @property
    def pads(self) -> list[int]:
        return [*self.begin, *self.end]

    def extent(self, axis: int) -> int:
        return (self.kernel[axis] - 1) * self.dilations[axis] + 1


def spatial(x: Expr) -> tuple[int, ...] | None:
    """x's dims after batch and channels, when they are all known ints."""
    dims = dims_of(x)
    if dims is None or not all(isinstance(d, int) for d in dims[2:]):
        return None
    return tuple(int(d) for d in dims[2:])  # type: ignore[arg-type]


def geometry(b: Backward, x: Expr, kernel: Sequence[int]) -> Geometry:
    """The forward call's window over x, with SAME_* padding turned into explicit pads."""
    nd = rank_of(x) - 2
    attrs = b.call.attrs
    strides = tuple(attrs.get("strides") or [1] * nd)
    dilations = tuple(attrs.get("dilations") or [1] * nd)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        size = spatial(x)
        if size is None:
            raise b.fail(f"auto_pad={auto_pad} needs static spatial dims to be differentiated")
        w = window(attrs, size, kernel)
        begin, end = w.pads_begin, w.pads_end
    elif auto_pad == "VALID":
        begin = end = (0,) * nd
    else:
        pads = list(attrs.get("pads") or [0] * (2 * nd))
        begin, end = tuple(pads[:nd]), tuple(pads[nd:])
    return Geometry(tuple(kernel), strides, dilations, begin, end)


def transpose_conv_to(b: Backward, g: Expr, w: Expr, x: Expr, geo: Geometry,
                      group: int) -> Expr:
    """The adjoint of ``Conv(x, w)`` applied to g: a ConvTranspose of the same window whose
    output has x's spatial size.

    ConvTranspose makes ``s (o - 1) + extent - pads + output_padding`` elements, and the conv's
    floor division lost ``(x + pads - extent) mod s`` of them: that is the output_padding. With
    symbolic dims it is unknown, so pad by the most (s - 1) and slice back to Shape(x).
    """
    nd = len(geo.kernel)
    attrs = dict(strides=list(geo.strides), dilations=list(geo.dilations), pads=geo.pads,
                 group=group)
    size = spatial(x)
    if size is not None:
        extra = [(size[i] + geo.begin[i] + geo.end[i] - geo.extent(i)) % geo.strides[i]
                 for i in range(nd)]
        if any(extra):
            attrs["output_padding"] = extra
        return b.op("ConvTranspose", g, w, **attrs)
    if any(s > 1 for s in geo.strides):
        attrs["output_padding"] = [s - 1 for s in geo.strides]
    full = b.op("ConvTranspose", g, w, **attrs)
    ends = b.op("Slice", b.op("Shape", x), b.ints([2]), b.ints([2 + nd]))
    return b.op("Slice", full, b.ints([0] * nd), ends, b.ints(range(2, 2 + nd)))


def _weight_grad(b: Backward, x: Expr, g: Expr, wshape: tuple[int, ...], geo: Geometry,
                 group: int) -> Expr:
    """dw[m, c, k] = sum_{n, o} g[n, m, o] x_pad[n, c', o s + k d]: a Conv whose batch is x's
    channels and whose channels are x's batch, with g (batch and channels swapped) as the
    kernel, stride d and dilation s. Groups ride along by moving them into the channel axis."""
    nd = len(geo.kernel)
    m, cg = wshape[0], wshape[1]
    swap = [1, 0, *range(2, 2 + nd)]
    if group == 1:
        xt, gt = b.op("Transpose", x, perm=swap), b.op("Transpose", g, perm=swap)
    else:
        xs, gs = spatial(x), spatial(g)
        if xs is None or gs is None:
            raise b.fail("the weight gradient of a grouped Conv needs static spatial dims")
        rest = list(range(3, 3 + nd))
        # x: (N, G*Cg, X) -> (N, G, Cg, X) -> (Cg, G, N, X) -> (Cg, G*N, X)
        xt = b.op("Reshape", x, b.ints([0, group, cg, *xs]))
        xt = b.op("Reshape", b.op("Transpose", xt, perm=[2, 1, 0, *rest]), b.ints([cg, -1, *xs]))
        # g: (N, G*Mg, O) -> (N, G, Mg, O) -> (G, Mg, N, O) -> (G*Mg, N, O)
        gt = b.op("Reshape", g, b.ints([0, group, m // group, *gs]))
        gt = b.op("Reshape", b.op("Transpose", gt, perm=[1, 2, 0, *rest]), b.ints([m, -1, *gs]))
    dwt = b.op("Conv", xt, gt, strides=list(geo.dilations), dilations=list(geo.strides),
               pads=geo.pads, group=group)
    dw = b.op("Transpose", dwt, perm=swap)
    # Rows of x past the last full window make the result longer than the kernel: cut them.
    got = static_shape(dw)
    if got is not None and tuple(got[2:]) == tuple(geo.kernel):
        return dw
    return b.op("Slice", dw, b.ints([0] * nd), b.ints(geo.kernel), b.ints(range(2, 2 + nd)))


def conv(b: Backward) -> list[Expr | None]:
    """dx = ConvTranspose(g, w), dw = Conv(x^T, g^T)^T, dbias = sum of g (module docstring)."""
    x, w, bias = b.x(0), b.x(1), b.x(2)
    assert x is not None and w is not None
    wshape = static_shape(w)
    if wshape is None:
        raise b.fail("Conv needs a weight of static shape to be differentiated")
    group = int(b.attr("group", 1))
    geo = geometry(b, x, wshape[2:])
    out: list[Expr | None] = [None, None, None]
    if b.need(0):
        out[0] = transpose_conv_to(b, b.g, w, x, geo, group)
    if b.need(1):
        out[1] = _weight_grad(b, x, b.g, wshape, geo, group)
    if bias is not None and b.need(2):
        axes = [0, *range(2, rank_of(x))]
        out[2] = b.op("ReduceSum", b.g, b.ints(axes), keepdims=0)
    return out


RULES: dict[str, GradientRule] = {"Conv": conv}
