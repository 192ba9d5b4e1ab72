"""FuseOps: split a function's calls into groups that one kernel each can compute.

The NNVM seed's algorithm in TVM's post-dominator form. Every call gets its op's fuse pattern
from the registry; a group is grown from a node to its immediate post-dominator when every
path between them keeps to the patterns the pair allows:

- OUT_EWISE_FUSABLE (Conv, MatMul, Gemm) takes an elementwise epilogue: fused into its
  post-dominator when that edge is elementwise and the ops on the way are at most BROADCAST;
- ELEMWISE / BROADCAST ops fuse forward into injective, reduction and elementwise sinks, and
  into a sink already holding a conv (the seed's conv2d + op + sigmoid -> add case);
- INJECTIVE ops fuse into injective post-dominators (a second phase, so convs finish first);
- COMM_REDUCE takes its injective prologue (the prologue fuses into it), OPAQUE takes nothing.

A node whose users all meet again at an elementwise post-dominator is fused with everything in
between (the ResNet diamond), because the post-dominator of a node with several users is their
least common ancestor in the post-dominator tree.

    %c = Conv(%x, %w)                       group 0: master Conv, root Add
    %a = Relu(%c); %b = Sigmoid(%c)               {Conv, Relu, Sigmoid, Add}
    %y = Add(%a, %b)

``fuse_ops(func)`` returns the groups in topological order, each with its nodes (topological
order), its master (the op code generation centres on) and its root (the group's last node,
whose value leaves the group). Iterative; linear in the graph apart from the path checks, which
``MAX_FUSE_DEPTH`` bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Call, Expr, Function, TensorType, Tuple, TupleGetItem, post_order
from ..op import FusePattern, lookup

P = FusePattern
MAX_FUSE_DEPTH = 256  # nodes in one group: bounds the path checks and the kernels' size


@dataclass(eq=False)
class Group:
    """A fused group: its calls in topological order, master, root and combined pattern."""

    nodes: list[Call]
    master: Call
    root: Call
    pattern: FusePattern

    def spans(self) -> list[str]:
        """The group's nodes by ONNX name (or op, for nodes without a span)."""
        return [n.span.name if n.span is not None else n.op_name for n in self.nodes]


def op_pattern(call: Call) -> FusePattern:
    """The fuse pattern of one call (non-ONNX callees are opaque)."""
    if not isinstance(call.op, str):
        return P.OPAQUE
    entry = lookup(call.op)
    return entry.fuse_pattern if entry is not None else P.OPAQUE


@dataclass(eq=False)
class _Node:
    index: int
    expr: Expr
    pattern: FusePattern
    outputs: list[tuple[int, FusePattern]] = field(default_factory=list)  # (user, edge pattern)
    extern: bool = False  # read outside the function (returned, or by a non-call)


class _Graph:
    """The calls of a function indexed in topological order, with their users."""

    def __init__(self, func: Function):
        full = post_order(func.body)
        order = [e for e in full if isinstance(e, (Call, TupleGetItem))]
        self.nodes = [_Node(k, e, op_pattern(e) if isinstance(e, Call) else P.OPAQUE)
                      for k, e in enumerate(order)]
        index = {n.expr: n.index for n in self.nodes}
        for n in self.nodes:
            e = n.expr
            args = [e.tuple_value] if isinstance(e, TupleGetItem) else \
                [a for a in e.args if a is not None]
            for a in args:
                if a in index:
                    self.nodes[index[a]].outputs.append((n.index, _edge(n, a)))
        for e in full:  # values a Tuple groups leave the graph
            if isinstance(e, Tuple):
                for f in e.fields:
                    if f in index:
                        self.nodes[index[f]].extern = True
        if func.body in index:
            self.nodes[index[func.body]].extern = True


def _edge(user: _Node, arg: Expr) -> FusePattern:
    """An edge into a broadcast op is elementwise when the input has the output's shape."""
    if user.pattern == P.BROADCAST and isinstance(user.expr, Call):
        t, out = getattr(arg, "type", None), user.expr.type
        if isinstance(t, TensorType) and isinstance(out, TensorType) and t.shape == out.shape \
                and t.shape is not None:
            return P.ELEMWISE
    return user.pattern


def _post_dominators(g: _Graph) -> tuple[list[int | None], list[FusePattern], list[int]]:
    """Each node's immediate post-dominator, the strongest edge pattern on the way, depth."""
    n = len(g.nodes)
    parent: list[int | None] = [None] * n
    pattern = [P.OPAQUE] * n
    depth = [1] * n
    for node in reversed(g.nodes):
        if node.extern or not node.outputs:
            continue
        edge = P.ELEMWISE
        lca: int | None = node.outputs[0][0]
        edge = max(edge, node.outputs[0][1])
        for user, user_edge in node.outputs[1:]:
            lca, edge = _lca(lca, user, edge, parent, pattern, depth)
            edge = max(edge, user_edge)
        if lca is None:
            continue
        parent[node.index], pattern[node.index] = lca, edge
        depth[node.index] = depth[lca] + 1
    return parent, pattern, depth


def _lca(a: int | None, b: int | None, edge: FusePattern, parent: list[int | None],
         pattern: list[FusePattern], depth: list[int]) -> tuple[int | None, FusePattern]:
    while a != b:
        if a is None or b is None:
            return None, edge
        if depth[a] < depth[b]:
            edge, b = max(edge, pattern[b]), parent[b]
        elif depth[b] < depth[a]:
            edge, a = max(edge, pattern[a]), parent[a]
        else:
            edge = max(edge, pattern[a], pattern[b])
            a, b = parent[a], parent[b]
    return a, edge


class _Partitioner:
    """Union-find over the nodes: each set a group, its root the set's representative."""

    def __init__(self, g: _Graph):
        self.g = g
        n = len(g.nodes)
        self.up = list(range(n))
        self.pattern = [node.pattern for node in g.nodes]
        self.anchor: list[int | None] = [k if g.nodes[k].pattern == P.OUT_EWISE_FUSABLE
                                         else None for k in range(n)]
        self.size = [1] * n

    def find(self, k: int) -> int:
        root = k
        while self.up[root] != root:
            root = self.up[root]
        while self.up[k] != root:
            self.up[k], k = root, self.up[k]
        return root

    def _merge(self, child: int, target: int) -> None:
        child, target = self.find(child), self.find(target)
        if child == target:
            return
        self.size[target] += self.size[child]
        self.up[child] = target
        if self.anchor[child] is not None:
            self.anchor[target] = self.anchor[child]
        self.pattern[target] = max(self.pattern[target], self.pattern[child])

    def check_path(self, src: int, sink: int, ok) -> bool:
        """Every node on every path from ``src`` (excluded) to ``sink`` passes ``ok``."""
        seen: set[int] = set()
        stack = [u for u, _ in self.g.nodes[src].outputs]
        while stack:
            k = stack.pop()
            if k in seen:
                continue
            seen.add(k)
            if not ok(self.pattern[self.find(k)], k == sink):
                return False
            if k != sink:
                if self.g.nodes[k].extern or not self.g.nodes[k].outputs or k > sink:
                    return False  # a path that escapes the sink (cannot happen under a post-dom)
                stack.extend(u for u, _ in self.g.nodes[k].outputs)
        return True

    def commit(self, src: int, sink: int) -> None:
        """Merge every node on the paths from ``src`` to ``sink`` into the sink's group."""
        target = self.find(sink)
        seen: set[int] = set()
        stack = [src]
        while stack:
            k = stack.pop()
            if k == sink or k in seen:
                continue
            seen.add(k)
            self._merge(k, target)
            stack.extend(u for u, _ in self.g.nodes[k].outputs)

    def run(self, parent: list[int | None], edge: list[FusePattern], phase: int) -> None:
        for k, node in enumerate(self.g.nodes):
            dom = parent[k]
            pat = self.pattern[self.find(k)]
            if pat == P.OPAQUE or dom is None or not isinstance(node.expr, Call):
                continue
            if self.find(k) == self.find(dom):
                continue
            if self.size[self.find(k)] + self.size[self.find(dom)] > MAX_FUSE_DEPTH:
                continue
            if pat == P.OUT_EWISE_FUSABLE:
                if phase == 0 and edge[k] == P.ELEMWISE and \
                        self.check_path(k, dom, lambda p, sink: p <= P.BROADCAST):
                    self.commit(k, dom)
            elif pat <= P.BROADCAST:
                if edge[k] <= P.INJECTIVE or edge[k] == P.COMM_REDUCE:
                    if self.check_path(k, dom, _into_sink):
                        self.commit(k, dom)
            elif pat == P.INJECTIVE:
                # the sink may be a reduction: it takes its injective prologue
                if phase == 1 and self.check_path(
                        k, dom, lambda p, sink: p <= P.INJECTIVE or sink and p == P.COMM_REDUCE):
                    self.commit(k, dom)


def _into_sink(p: FusePattern, is_sink: bool) -> bool:
    # branches on the way may be injective; the sink may already hold a conv or a reduction
    if not is_sink:
        return p <= P.INJECTIVE
    return p <= P.COMM_REDUCE or p == P.OUT_EWISE_FUSABLE


def fuse_ops(func: Function) -> list[Group]:
    """The fused groups of ``func``'s calls, in topological order (see the module docstring)."""
    g = _Graph(func)
    parent, edge, _ = _post_dominators(g)
    part = _Partitioner(g)
    for phase in (0, 1):
        part.run(parent, edge, phase)
    members: dict[int, list[int]] = {}
    for k, node in enumerate(g.nodes):
        if isinstance(node.expr, Call):
            members.setdefault(part.find(k), []).append(k)
    groups = []
    for rep in sorted(members, key=lambda r: members[r][-1]):
        ks = members[rep]
        nodes = [g.nodes[k].expr for k in ks]
        anchor = part.anchor[rep]
        master = g.nodes[anchor].expr if anchor is not None else \
            max(nodes, key=lambda c: op_pattern(c))  # type: ignore[arg-type]
        groups.append(Group(nodes, master, nodes[-1], part.pattern[rep]))  # type: ignore[arg-type]
    return groups
