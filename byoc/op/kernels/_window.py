"""Sliding-window geometry shared by Conv and the pooling kernels (NC + spatial layout)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Window:
    """Per spatial axis: kernel, stride, dilation, begin/end pads and output length."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    pads_end: tuple[int, ...]
    out: tuple[int, ...]

    @property
    def extent(self) -> tuple[int, ...]:
        """Span of one dilated kernel window."""
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations))


def window(
    attrs: dict, in_shape: Sequence[int], kernel: Sequence[int], ceil_mode: bool = False
) -> Window:
    """Resolve auto_pad/pads/strides/dilations into a Window (Conv and pool rules of ONNX)."""
    nd = len(in_shape)
    strides = tuple(attrs.get("strides") or (1,) * nd)
    dil = tuple(attrs.get("dilations") or (1,) * nd)
    ext = [(k - 1) * d + 1 for k, d in zip(kernel, dil)]
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-n // s) for n, s in zip(in_shape, strides)]
        total = [max(0, (o - 1) * s + e - n) for o, s, e, n in zip(out, strides, ext, in_shape)]
        small = [t // 2 for t in total]
        # The odd pixel goes at the end for SAME_UPPER, at the beginning for SAME_LOWER.
        begin = small if auto_pad == "SAME_UPPER" else [t - h for t, h in zip(total, small)]
        end = [t - b for t, b in zip(total, begin)]
        return Window(tuple(kernel), strides, dil, tuple(begin), tuple(end), tuple(out))
    if auto_pad == "VALID":
        pads = [0] * (2 * nd)
    else:
        pads = list(attrs.get("pads") or [0] * (2 * nd))
    begin, end = pads[:nd], pads[nd:]
    out = []
    for n, s, e, b, f in zip(in_shape, strides, ext, begin, end):
        span = n + b + f - e
        if ceil_mode:
            o = -(-span // s) + 1
            # A window that would start inside the end padding is dropped.
            if (o - 1) * s >= n + b:
                o -= 1
        else:
            o = span // s + 1
        out.append(max(o, 0))
    return Window(tuple(kernel), strides, dil, tuple(begin), tuple(end), tuple(out))


def pad_spatial(x: np.ndarray, begin: Sequence[int], end: Sequence[int], value) -> np.ndarray:
    """Pad the spatial axes (all but the first two); returns ``x`` itself when nothing to pad."""
    if not any(begin) and not any(end):
        return x
    if min(begin) < 0 or min(end) < 0:  # np.pad refuses these, with its own message
        return np.pad(x, [(0, 0), (0, 0), *zip(begin, end)], mode="constant",
                      constant_values=value)
    # A filled array and one copy: np.pad costs 30-40 us of Python per call, as much as the
    # whole product of a small conv.
    out = np.full(x.shape[:2] + tuple(n + b + e for n, b, e in zip(x.shape[2:], begin, end)),
                  value, x.dtype)
    out[interior(x.shape, begin)] = x
    return out


def interior(shape: Sequence[int], begin: Sequence[int]) -> tuple[slice, ...]:
    """Where an array of ``shape`` sits in its spatially padded copy."""
    return (slice(None), slice(None)) + tuple(slice(b, b + n) for b, n in zip(begin, shape[2:]))


def end_extra(w: Window, in_shape: Sequence[int]) -> list[int]:
    """Extra end padding needed so every output window fits (ceil_mode can overrun pads)."""
    return [
        max(0, (o - 1) * s + e - (n + b + f))
        for o, s, e, n, b, f in zip(w.out, w.strides, w.extent, in_shape, w.pads_begin, w.pads_end)
    ]


def tap_slices(w: Window, offset: Sequence[int]) -> tuple[slice, ...]:
    """Slices of the padded input read by kernel tap ``offset`` for every output position."""
    return tuple(
        slice(k * d, k * d + (o - 1) * s + 1 if o > 0 else k * d, s)
        for k, d, o, s in zip(offset, w.dilations, w.out, w.strides)
    )


def taps(w: Window) -> list[tuple[int, ...]]:
    """All kernel tap offsets in row-major order."""
    return [tuple(int(i) for i in t) for t in np.ndindex(*w.kernel)]
