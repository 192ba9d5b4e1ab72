"""Conv and ConvTranspose over 1 or 2 spatial dims, on the C helpers of ``runtime_c``.

Conv is a GEMM per image and group whose B operand is packed from a zero-padded copy of the
input (im2col without its buffer), a plain GEMM for 1x1 convs, a GEMM reading its taps from
the input in place for convs of few input channels (``direct``) or of small maps and few
output channels (``flat``), one product over the batch for 1x1 maps (``maps_1x1``), Winograd
for 3x3 ones of many, direct loops for depthwise convs (``depthwise.py``), and, for strided
convs and small maps, a kernel with output channels across the vector's lanes that
broadcasts each tap's input in place (``lanes``).
ConvTranspose is a GEMM into columns followed by a scatter-add (col2im).
"""

from __future__ import annotations

from byoc.ir import Call

from .. import runtime_c
from ..emitter import Emit, Tensor
from .depthwise import MAX_TAPS, emit_depthwise
from .window import Window, transpose_window, window

WINOGRAD_MIN_CHANNELS = 16
# Below 32 channels (in or out) the transforms weigh more against the 16 GEMMs: only on maps of
# 14x14 or more, where they still win (AVX-512, 1 thread: 16 -> 64 channels on 55x55 243 us
# against im2col's 334; on 14x14 a tie, on 7x7 im2col 1.3x faster).
WINOGRAD_FEW_CHANNELS_MIN_MAP = 196
# byoc_conv_flat (``flat``): maps up to 32x32 (a KC block of taps, a few dozen channels' planes,
# stays in L1 or L2), of at most 10x10 where Winograd would take them, extra work times
# output channels at most 32.
FLAT_MAX_MAP = 1024
FLAT_WINOGRAD_MAX_MAP = 100
FLAT_MAX_WASTE = 32
# byoc_conv_lanes (``lanes``): taps at least, and where it takes Winograd's convs.
LANES_MIN_TAPS = 64
LANES_WINOGRAD_MAX_M = 32
LANES_WINOGRAD_MAX_MAP = 256


def _dims(x: Tensor, out: Tensor, kernel: tuple[int, ...], win: Window) -> list[int]:
    """N, C, H, W, M, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW with 1-D seen as H = 1."""
    w2 = win.as_2d()
    spatial = x.shape[2:] if x.rank == 4 else (1, *x.shape[2:])
    out_spatial = out.shape[2:] if out.rank == 4 else (1, *out.shape[2:])
    return [x.shape[0], x.shape[1], *spatial, out.shape[1], *out_spatial, *w2.kernel,
            *w2.strides, *w2.begin, *w2.dilations]


def winograd(x: Tensor, w: Tensor, dims: list[int], groups: int) -> bool:
    """Whether a conv goes through Winograd F(2x2, 3x3): 3x3, stride 1, no dilation, one group,
    constant weights, 2-D, and channels enough for the GEMMs to outweigh the transforms.
    Its error against the direct sum stays within a few float32 roundings of the inputs'
    magnitudes (the transforms add and subtract at most four terms; G has halves): tested
    against onnxruntime at 1e-5 of the output's largest magnitude."""
    _, c, _, _, m, oh, ow, kh, kw, sh, sw, _, _, dh, dw = dims
    few = min(c, m) < 2 * WINOGRAD_MIN_CHANNELS
    return (x.rank == 4 and w.value is not None and groups == 1 and (kh, kw, sh, sw, dh, dw) ==
            (3, 3, 1, 1, 1, 1) and c >= WINOGRAD_MIN_CHANNELS and m >= WINOGRAD_MIN_CHANNELS
            and oh * ow >= (WINOGRAD_FEW_CHANNELS_MIN_MAP if few else 16))


def direct(w: Tensor, dims: list[int], groups: int) -> bool:
    """Whether a conv reads its taps from its input in place (``byoc_conv_direct``) rather than
    from packed im2col panels: one group, constant weights, all taps in one KC block (few input
    channels, as a stem's 3), output rows of at least three NR-wide vectors that leave little of
    their last one unused (a row's vectors do not reach into the next row, as im2col's do) and
    not a stride-1 1x1 conv (a plain GEMM already). Measured at one thread in models of conv +
    Relu + MaxPool, against im2col: 7x7 stride-2 stem 0.88-0.92x, 3x3 stride-2 on 3 channels
    0.81-0.91x; rows of 55 outputs (64 computed) 0.98-1.12x and of 28 1.10x, hence the fill."""
    _, c, h, wd, _, oh, ow, kh, kw, sh, sw, ph, pw = dims[:13]
    pointwise = (kh, kw, sh, sw, ph, pw) == (1, 1, 1, 1, 0, 0) and (oh, ow) == (h, wd)
    nr = runtime_c.machine_nr()
    tail = ow % nr  # the micro-kernel computes a last panel of up to nr / 2 as one vector
    filled = ow / (ow - tail + (0 if not tail else nr // 2 if tail <= nr // 2 else nr))
    return (groups == 1 and w.value is not None and c * kh * kw <= runtime_c.KC
            and ow >= 3 * nr and filled >= 0.9 and not pointwise)


def _computed_columns(n: int, few: bool) -> int:
    """Columns the micro-kernel computes for a row of n: whole NR panels, a last one of up to
    NR / 2 as one vector; with ``few`` (byoc_gemm), up to BYOC_FEW_COLS past a whole vector as
    single columns down A's (about one column's cost each)."""
    gw = runtime_c.machine_nr() // 2
    rest = n % gw
    if few and rest <= runtime_c.FEW_COLS:
        return n
    return -(-n // gw) * gw


def flat(x: Tensor, w: Tensor, dims: list[int], groups: int) -> bool:
    """Whether a conv reads its taps in place along its map's flattened padded rows
    (``byoc_conv_flat``) rather than from packed im2col panels or through Winograd: one group,
    constant weights, stride 1, a map of at most FLAT_MAX_MAP, and few output channels to
    share each packed panel against the columns flat computes and drops (M times the extra
    fraction at most FLAT_MAX_WASTE); where Winograd would take it, only on maps of at most
    FLAT_WINOGRAD_MAX_MAP. Measured at one thread, one-node Conv + Relu models, flat against
    the other path: densenet's 128 -> 32 3x3 on 7x7 0.70x (on 14x14 even, on 28x28 1.34x), a
    96 -> 24 3x3 on 8x10 0.67x, 5x5s on 27x27 and 13x13 of 32-64 channels 0.78-0.97x (128 on
    13x13 1.03x), a 480 -> 60 1x3 on a 1x40 row 0.63x; 3x3s of 128 channels or more 1.1-1.8x."""
    _, c, _, _, m, oh, ow, kh, kw, sh, sw, _, _, dh, dw = dims
    if not (x.rank == 4 and groups == 1 and w.value is not None and (sh, sw) == (1, 1)
            and (kh, kw) != (1, 1) and oh * ow <= FLAT_MAX_MAP):
        return False
    if winograd(x, w, dims, groups) and oh * ow > FLAT_WINOGRAD_MAX_MAP:
        return False
    flat_cols = _computed_columns((oh - 1) * (ow + (kw - 1) * dw) + ow, few=False)
    extra = flat_cols / _computed_columns(oh * ow, few=True) - 1
    return m * extra <= FLAT_MAX_WASTE


def lanes(x: Tensor, w: Tensor, dims: list[int], groups: int) -> bool:
    """Whether a conv runs with its output channels across the vector's lanes
    (``byoc_conv_lanes``), which packs no im2col panel: 1-D or 2-D, constant weights, not 1x1,
    taps enough to outweigh a tile's turning back (a stem's 27 ran 1.1-1.75x), channels filling
    the NR-wide panels to seven eighths or more (96 -> 24 on 8x10 and 16x20, one third empty,
    1.1-1.4x); not where a stem's few channels read in place (``direct``). Taken where it
    measured faster at one thread against the path it replaces: strided convs (3x3s 0.84-0.95x
    of im2col, to 0.99-1.12x onnxruntime; 11x11 stride 4 0.91-0.95x), stride-1 ones on maps
    up to FLAT_MAX_MAP that Winograd does not take (5x5s of 16-48 channels on 6x6 to 27x27
    0.70-0.91x of flat or im2col), and those of it with at most LANES_WINOGRAD_MAX_M output
    channels on maps up to LANES_WINOGRAD_MAX_MAP, where its transforms weigh most (128 -> 32
    on 14x14 0.85x, on 7x7 0.78x of flat); on larger maps at stride 1 a tile's rows of taps
    overflow L1 (64 -> 64 on 56x56 1.9x Winograd, 1.4x onnxruntime)."""
    _, c, _, _, m, oh, ow, kh, kw, sh, sw, _, _, _, _ = dims
    mg, nr = m // groups, runtime_c.machine_nr()
    if not (x.rank in (3, 4) and w.value is not None and (kh, kw) != (1, 1)
            and c // groups * kh * kw >= LANES_MIN_TAPS and -(-mg // nr) * nr * 8 <= mg * 9):
        return False
    if direct(w, dims, groups):
        return False
    if (sh, sw) != (1, 1):
        return True
    if winograd(x, w, dims, groups):
        return m <= LANES_WINOGRAD_MAX_M and oh * ow <= LANES_WINOGRAD_MAX_MAP
    return oh * ow <= FLAT_MAX_MAP


def maps_1x1(w: Tensor, dims: list[int], groups: int) -> bool:
    """Whether a conv runs as one product over its batch (``byoc_conv_1x1_maps``): pointwise on
    1x1 maps (SE blocks), one group, constant weights. Measured, the C alone, against
    byoc_conv2d's product through byoc_gemm_mat: 120 -> 480 on 2 images 0.41x at 1 and 2 threads, 96 -> 384 on one 0.79x,
    384 -> 96 0.74x; 1024 -> 1000 on 4 images 0.07x (1.55 ms -> 0.10: a strided pack of W
    per call gone)."""
    _, _, h, wd, _, oh, ow, kh, kw, sh, sw, ph, pw = dims[:13]
    return (groups == 1 and w.value is not None and (kh, kw, sh, sw, ph, pw) ==
            (1, 1, 1, 1, 0, 0) and (h, wd, oh, ow) == (1, 1, 1, 1))


def emit_conv(ctx: Emit, call: Call, ins: list[Tensor | None], outs: list[Tensor],
              epilogue: str = "0") -> bool:
    """Applies ``epilogue`` (a ``const byoc_epi *`` as MatMul takes, ``linalg.py``) to each
    finished tile or channel; returns False where it could not (the caller applies it after)."""
    x, w, out = ins[0], ins[1], outs[0]
    bias = ins[2] if len(ins) > 2 else None
    assert x is not None and w is not None
    kernel = tuple(w.shape[2:])
    win = window(call, x.shape[2:], kernel, out.shape[2:])
    dims = _dims(x, out, kernel, win)
    groups = int(call.attrs.get("group", 1))
    cg = x.shape[1] // groups
    taps = dims[7] * dims[8]
    if cg == 1 and taps <= MAX_TAPS:
        return emit_depthwise(ctx, x, w, bias, out, dims, epilogue)
    ctx.need("conv")
    if lanes(x, w, dims, groups):
        _emit_in_place(ctx, "byoc_conv_lanes", x, w, bias, out, [*dims, groups],
                       runtime_c.lanes_conv_scratch(dims, groups), epilogue,
                       lambda w2: runtime_c.pack_lanes(w2, groups))
        return True
    if flat(x, w, dims, groups):  # (stride 1: no strides among its dims)
        _emit_in_place(ctx, "byoc_conv_flat", x, w, bias, out,
                       [d for i, d in enumerate(dims) if i not in (9, 10)],
                       runtime_c.flat_conv_scratch(dims), epilogue)
        return True
    if winograd(x, w, dims, groups):
        n, c, h, wd, m, oh, ow = dims[:7]
        u = ctx.constant(runtime_c.winograd_weights(w.value))
        b = bias.ptr if bias is not None else "0"
        ctx.src.line(f"byoc_conv3x3_winograd({x.ptr}, {u}, {b}, {out.ptr}, {n}, {c}, {h}, {wd}, "
                     f"{m}, {oh}, {ow}, {dims[11]}, {dims[12]}, {epilogue});")
        return True
    if direct(w, dims, groups):
        _emit_in_place(ctx, "byoc_conv_direct", x, w, bias, out, dims,
                       runtime_c.direct_conv_scratch(dims), epilogue)
        return True
    if maps_1x1(w, dims, groups):
        assert w.value is not None
        n, c, m = dims[0], dims[1], dims[4]
        bt = ctx.constant(runtime_c.pack_b(w.value.reshape(m, c).T))
        ws = ctx.scratch(4 * runtime_c.gemm_scratch(n, m, c))
        b = bias.ptr if bias is not None else "0"
        ctx.src.line(f"byoc_conv_1x1_maps({x.ptr}, {bt}, {b}, {out.ptr}, {n}, {c}, {m}, {ws}, "
                     f"{epilogue});")
        return True
    ws = ctx.scratch(4 * runtime_c.conv_scratch(dims, groups))
    packed = "0"
    if w.value is not None:  # constant weights: packed once here, not on every call
        packed = ctx.constant(runtime_c.pack_a(w.value.reshape(w.shape[0], -1), groups))
    args = ", ".join(str(d) for d in dims)
    b = bias.ptr if bias is not None else "0"
    ctx.src.line(f"byoc_conv2d({x.ptr}, {w.ptr}, {packed}, {b}, {out.ptr}, {args}, {groups}, "
                 f"{ws}, {epilogue});")
    return True


def _emit_in_place(ctx: Emit, fn: str, x: Tensor, w: Tensor, bias: Tensor | None, out: Tensor,
                   dims: list[int], scratch_floats: int, epilogue: str,
                   pack=runtime_c.pack_a) -> None:
    """A call of a conv that reads its taps in place (``byoc_conv_direct``, ``byoc_conv_flat``,
    ``byoc_conv_lanes``): the weights packed once here (as the GEMM's A, or ``pack``), its
    dims, its scratch."""
    assert w.value is not None
    u = ctx.constant(pack(w.value.reshape(w.shape[0], -1)))
    ws = ctx.scratch(4 * scratch_floats)
    b = bias.ptr if bias is not None else "0"
    args = ", ".join(str(d) for d in dims)
    ctx.src.line(f"{fn}({x.ptr}, {u}, {b}, {out.ptr}, {args}, {ws}, {epilogue});")


def emit_conv_transpose(ctx: Emit, call: Call, ins: list[Tensor | None],
                        outs: list[Tensor]) -> None:
    x, w, out = ins[0], ins[1], outs[0]
    bias = ins[2] if len(ins) > 2 else None
    assert x is not None and w is not None
    ctx.need("conv")
    kernel = tuple(w.shape[2:])
    win = transpose_window(call, x.shape[2:], kernel, out.shape[2:])
    dims = _dims(x, out, kernel, win)
    groups = int(call.attrs.get("group", 1))
    cg, mg = x.shape[1] // groups, out.shape[1] // groups
    rows, hw = mg * dims[7] * dims[8], dims[2] * dims[3]
    cols = (rows * hw + 15) // 16 * 16
    ws = ctx.scratch(4 * (cols + runtime_c.gemm_scratch(rows, hw, cg)))
    args = ", ".join(str(d) for d in dims)
    b = bias.ptr if bias is not None else "0"
    ctx.src.line(f"byoc_conv_transpose2d({x.ptr}, {w.ptr}, {b}, {out.ptr}, {args}, {groups}, "
                 f"{ws});")


EMITTERS = {"Conv": emit_conv, "ConvTranspose": emit_conv_transpose}
