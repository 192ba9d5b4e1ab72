"""LSTM, GRU and RNN: the input projection for every time step in one matmul, then a loop.

The loop over time is inherent (each step needs the last hidden state); everything inside a
step is a batched matmul and vectorized gates. Gate orders are ONNX's: LSTM i,o,f,c; GRU z,r,h.
Configurations not written here (input_forget, unusual activations) raise NotImplementedError,
which sends the call to onnx.reference.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._registry import arg, hold_blas, kernel


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # exp(-x) overflows to inf for very negative x, and 1 / (1 + inf) is the right 0: the
    # executor runs kernels with floating-point warnings off, so this is exact and cheap.
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sigmoid": _sigmoid,
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0),
}


def _activations(attrs: dict, defaults: list[str], directions: int) -> list[list[Callable]]:
    names = attrs.get("activations") or defaults * directions
    if attrs.get("activation_alpha") or attrs.get("activation_beta"):
        raise NotImplementedError("RNN activations with alpha/beta")
    per = len(defaults)
    if len(names) == per and directions == 2:
        names = names * 2
    fns = []
    for name in names:
        fn = _ACTIVATIONS.get(name.lower())
        if fn is None:
            raise NotImplementedError(f"RNN activation {name}")
        fns.append(fn)
    return [fns[d * per:(d + 1) * per] for d in range(directions)]


def _projection(attrs: dict, x: np.ndarray, w: np.ndarray, bias: np.ndarray, hidden: int
                ) -> np.ndarray:
    """x @ w.T + bias for every step at once; numpy's BLAS is then held for the steps'
    products ([batch, hidden] @ [hidden, gates * hidden]), usually small enough for one thread."""
    seq, batch = x.shape[0], x.shape[1]
    hold_blas(attrs, seq * batch * w.shape[0] * w.shape[1])
    # one 2-D product (a 3-D x @ w.T had gone through numpy's slower stacked path)
    xw = (x.reshape(seq * batch, x.shape[2]) @ w.T).reshape(seq, batch, w.shape[0]) + bias
    hold_blas(attrs, batch * hidden * w.shape[0])
    return xw


def _setup(attrs: dict, x: np.ndarray, n_gates: int, inputs) -> tuple:
    """Common inputs of the three ops, in seq-major layout."""
    layout = int(attrs.get("layout", 0))
    w, r = inputs[0], inputs[1]
    _check_shapes(x, w, r, layout)
    if layout:
        x = np.swapaxes(x, 0, 1)
    direction = attrs.get("direction", "forward")
    directions = 2 if direction == "bidirectional" else 1
    hidden = int(attrs.get("hidden_size", r.shape[-1]))
    b = arg(inputs, 2)
    seq_lens = arg(inputs, 3)
    h0 = arg(inputs, 4)
    seq, batch = x.shape[0], x.shape[1]
    if b is None:
        b = np.zeros((directions, 2 * n_gates * hidden), x.dtype)
    if h0 is not None and layout:
        h0 = np.swapaxes(h0, 0, 1)
    if seq_lens is not None and np.all(seq_lens == seq):
        seq_lens = None
    return x, layout, direction, directions, w, r, b, hidden, seq_lens, h0, seq, batch


def _check_shapes(x: np.ndarray, w: np.ndarray, r: np.ndarray, layout: int) -> None:
    """The run's X, W and R fit together (a model fed the wrong input shape otherwise fails deep
    in a matmul with numpy's words, not the op's)."""
    axes = "[batch, seq, input]" if layout else "[seq, batch, input]"
    if x.ndim != 3:
        raise ValueError(f"X must be 3-D {axes}, got shape {list(x.shape)}")
    if w.ndim != 3 or r.ndim != 3:
        raise ValueError(f"W and R must be 3-D, got shapes {list(w.shape)} and {list(r.shape)}")
    if w.shape[2] != x.shape[2]:
        raise ValueError(f"X has input size {x.shape[2]} (shape {list(x.shape)}) but W expects "
                         f"{w.shape[2]} (shape {list(w.shape)})")


def _clipper(attrs: dict) -> Callable[[np.ndarray], np.ndarray]:
    """The cell clip: gate pre-activations held to [-clip, clip] when the attr is set."""
    limit = attrs.get("clip")
    if limit is None:
        return lambda v: v
    return lambda v: np.clip(v, -limit, limit)


def _step_order(direction: str, d: int, seq: int) -> range:
    reverse = direction == "reverse" or (direction == "bidirectional" and d == 1)
    return range(seq - 1, -1, -1) if reverse else range(seq)


def _finish(attrs: dict, layout: int, ys: list[np.ndarray], hs: list[np.ndarray],
            cs: list[np.ndarray] | None):
    y = np.stack(ys, axis=1)  # [seq, dirs, batch, hidden]
    y_h = np.stack(hs)  # [dirs, batch, hidden]
    y_c = np.stack(cs) if cs is not None else None
    if layout:
        y = np.transpose(y, (2, 0, 1, 3))
        y_h = np.swapaxes(y_h, 0, 1)
        y_c = np.swapaxes(y_c, 0, 1) if y_c is not None else None
    return (y, y_h) if y_c is None else (y, y_h, y_c)


def _advance(y: np.ndarray, t: int, h: np.ndarray, h_new: np.ndarray,
             m: np.ndarray | None) -> np.ndarray:
    """Step t's hidden state into Y; past a sequence's length the state holds and Y is 0."""
    if m is None:
        y[t] = h_new
        return h_new
    y[t] = m * h_new
    return m * h_new + (1 - m) * h


def _mask(seq_lens, t: int, dtype) -> np.ndarray | None:
    return None if seq_lens is None else (t < seq_lens).astype(dtype)[:, None]


@kernel("LSTM")
def lstm(attrs: dict, x: np.ndarray, *inputs):
    if int(attrs.get("input_forget", 0)):
        raise NotImplementedError("LSTM input_forget=1")
    x, layout, direction, dirs, w, r, b, hidden, seq_lens, h0, seq, batch = _setup(attrs, x, 4, inputs)
    c0 = arg(inputs, 5)
    if c0 is not None and layout:
        c0 = np.swapaxes(c0, 0, 1)
    peep = arg(inputs, 6)
    clip = _clipper(attrs)
    acts = _activations(attrs, ["Sigmoid", "Tanh", "Tanh"], dirs)
    ys, hs, cs = [], [], []
    for d in range(dirs):
        f, g, h_act = acts[d]
        xw = _projection(attrs, x, w[d], b[d, :4 * hidden] + b[d, 4 * hidden:], hidden)  # [seq, batch, 4h]
        rt = r[d].T  # BLAS reads it transposed: no copy (a 256 KB one had cost 100 us a call)
        h = h0[d] if h0 is not None else np.zeros((batch, hidden), x.dtype)
        c = c0[d] if c0 is not None else np.zeros((batch, hidden), x.dtype)
        p_i, p_o, p_f = (np.split(peep[d], 3) if peep is not None else (None, None, None))
        y = np.zeros((seq, batch, hidden), x.dtype)
        plain = peep is None and seq_lens is None and (f, g, h_act) == (_sigmoid, np.tanh, np.tanh)
        for t in _step_order(direction, d, seq):
            gates = clip(xw[t] + h @ rt)
            if plain:  # the usual LSTM: one sigmoid over i, o, f together, no masks
                sig = _sigmoid(gates[:, :3 * hidden])
                c = sig[:, 2 * hidden:] * c + sig[:, :hidden] * np.tanh(gates[:, 3 * hidden:])
                h = sig[:, hidden:2 * hidden] * np.tanh(c)
                y[t] = h
                continue
            gi, go, gf, gc = np.split(gates, 4, axis=1)
            if p_i is not None:
                gi = gi + p_i * c
                gf = gf + p_f * c
            i, fg, cc = f(gi), f(gf), g(gc)
            c_new = fg * c + i * cc
            if p_o is not None:
                go = go + p_o * c_new
            h_new = f(go) * h_act(c_new)
            m = _mask(seq_lens, t, x.dtype)
            if m is None:
                h, c = h_new, c_new
                y[t] = h
            else:
                h = m * h_new + (1 - m) * h
                c = m * c_new + (1 - m) * c
                y[t] = m * h_new
        ys.append(y)
        hs.append(h)
        cs.append(c)
    return _finish(attrs, layout, ys, hs, cs)


@kernel("GRU")
def gru(attrs: dict, x: np.ndarray, *inputs):
    x, layout, direction, dirs, w, r, b, hidden, seq_lens, h0, seq, batch = _setup(attrs, x, 3, inputs)
    linear_before_reset = int(attrs.get("linear_before_reset", 0))
    clip = _clipper(attrs)
    acts = _activations(attrs, ["Sigmoid", "Tanh"], dirs)
    ys, hs = [], []
    for d in range(dirs):
        f, g = acts[d]
        wb, rb = b[d, :3 * hidden], b[d, 3 * hidden:]
        xw = _projection(attrs, x, w[d], wb, hidden)  # [seq, batch, 3h]
        r_zr = r[d, :2 * hidden].T  # read transposed by BLAS, not copied
        r_h = r[d, 2 * hidden:].T
        rb_zr, rb_h = rb[:2 * hidden], rb[2 * hidden:]
        h = h0[d] if h0 is not None else np.zeros((batch, hidden), x.dtype)
        y = np.zeros((seq, batch, hidden), x.dtype)
        for t in _step_order(direction, d, seq):
            zr = f(clip(xw[t, :, :2 * hidden] + h @ r_zr + rb_zr))
            z, rg = zr[:, :hidden], zr[:, hidden:]
            if linear_before_reset:
                hh = g(clip(xw[t, :, 2 * hidden:] + rg * (h @ r_h + rb_h)))
            else:
                hh = g(clip(xw[t, :, 2 * hidden:] + (rg * h) @ r_h + rb_h))
            h = _advance(y, t, h, (1 - z) * hh + z * h, _mask(seq_lens, t, x.dtype))
        ys.append(y)
        hs.append(h)
    return _finish(attrs, layout, ys, hs, None)


@kernel("RNN")
def rnn(attrs: dict, x: np.ndarray, *inputs):
    x, layout, direction, dirs, w, r, b, hidden, seq_lens, h0, seq, batch = _setup(attrs, x, 1, inputs)
    clip = _clipper(attrs)
    acts = _activations(attrs, ["Tanh"], dirs)
    ys, hs = [], []
    for d in range(dirs):
        (f,) = acts[d]
        xw = _projection(attrs, x, w[d], b[d, :hidden] + b[d, hidden:], hidden)
        rt = r[d].T  # read transposed by BLAS, not copied
        h = h0[d] if h0 is not None else np.zeros((batch, hidden), x.dtype)
        y = np.zeros((seq, batch, hidden), x.dtype)
        for t in _step_order(direction, d, seq):
            h = _advance(y, t, h, f(clip(xw[t] + h @ rt)), _mask(seq_lens, t, x.dtype))
        ys.append(y)
        hs.append(h)
    return _finish(attrs, layout, ys, hs, None)
