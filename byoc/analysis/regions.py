"""Regions of a function: read from its compiler_begin/compiler_end annotations, or written as them.

    %0 = annotation.compiler_begin(%x, compiler="ref")
    %1 = annotation.compiler_begin(%w, compiler="ref")
    %2 = Conv(%0, %1)                          # region 0: every argument is inside it
    %3 = Relu(%2)                              # region 0
    %4 = annotation.compiler_end(%3, compiler="ref")
    %5 = Abs(%4)                               # host: no argument is inside a region

Rules (TVM's AnnotatedRegionSet, with errors that say what to fix):

1. A compiler_begin opens a region; a node whose arguments are all inside regions joins them
   (regions it joins become one); a node with no argument inside a region runs on the host.
2. A node with some arguments inside a region and some not is an error naming the argument
   that lacks its compiler_begin (TVM's "Arg regions are inconsistent").
3. A value leaves a region only through compiler_end; a function output that is still inside
   a region is an error, and so is a compiler_end of a value outside every region.
4. Parts of one region that no data edge joins (two branches merged side by side) carry the same
   ``region=<int>`` attr on their annotations; written only where needed.
5. A region marked for ``"default"`` (TVM's name for the host) is read like any other, and
   partition_graph leaves its nodes on the host (``host_marked``), as TVM's PartitionGraph does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ModelError
from ..ir import Call, Constant, Expr, Function, Tuple, Var, children, post_order, with_children
from .annotation import BEGIN, END, compiler_begin, compiler_end
from .names import describe, node_key


@dataclass
class Regions:
    """Which nodes of a function run in which region.

    ``func`` is the function without annotations and ``order`` its nodes, producers first
    (leaves included), ending with ``func.body``. ``region[i]`` is the region of ``order[i]``:
    an index into ``targets`` (each region's backend) for the calls and TupleGetItems inside a
    region, -1 for host nodes and leaves. Regions are numbered by their first node.
    """

    func: Function
    order: list[Expr]
    region: list[int]
    targets: list[str]
    graph: IndexGraph | None = field(default=None, repr=False)  # of ``order``, built once

    def index_graph(self) -> IndexGraph:
        if self.graph is None:
            self.graph = IndexGraph.of(self.order)
        return self.graph

    def with_regions(self, region: list[int], targets: list[str]) -> Regions:
        """Other regions over the same nodes (sharing the index graph)."""
        return Regions(self.func, self.order, region, targets, self.graph)

    def members(self) -> list[list[int]]:
        """Each region's nodes as positions in ``order``, producers first."""
        out: list[list[int]] = [[] for _ in self.targets]
        for i, r in enumerate(self.region):
            if r >= 0:
                out[r].append(i)
        return out


@dataclass
class IndexGraph:
    """Nodes as positions in a producers-first order: the passes that sweep the whole graph
    several times work on these integers rather than walking expressions again."""

    kids: list[tuple[int, ...]]  # positions of what each node reads, in argument order
    leaf: list[bool]  # Var or Constant: no region ever holds it

    @staticmethod
    def of(order: list[Expr]) -> IndexGraph:
        position = {e: i for i, e in enumerate(order)}.__getitem__  # identity-keyed
        return IndexGraph([tuple(map(position, children(e))) for e in order],
                          [isinstance(e, (Var, Constant)) for e in order])


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict = {}

    def find(self, x):
        parent = self.parent
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def numbered(keys: list) -> tuple[list[int], list]:
    """Region indices numbered by first appearance, from any region key per node (None: host)."""
    index: dict[object, int] = {}
    region: list[int] = []
    firsts: list = []
    for key in keys:
        if key is None:
            region.append(-1)
            continue
        r = index.get(key)
        if r is None:
            r = index[key] = len(firsts)
            firsts.append(key)
        region.append(r)
    return region, firsts


def _strip_end(arg: Expr) -> Expr:
    """The value a compiler_end marks, for messages about it."""
    return arg.args[0] if isinstance(arg, Call) and arg.op == END else arg  # type: ignore


def find_regions(func: Function) -> Regions:
    """Read the regions a function's annotations mark; errors name the node and argument."""
    body = func.body
    plain: dict[Expr, Expr] = {}  # annotated node -> the node without annotations
    token: dict[Expr, int] = {}  # annotated node -> region token, for values inside regions
    target_of: list[str] = []
    sets = _UnionFind()
    labelled: dict[tuple[str, object], int] = {}
    order: list[Expr] = []
    tokens: list[int | None] = []  # the region token of each node of ``order``
    for e in post_order(body):
        if isinstance(e, Call) and (e.op == BEGIN or e.op == END):
            arg = e.args[0]
            compiler = e.attrs.get("compiler")
            plain[e] = plain[arg]  # type: ignore[arg-type]
            inner = token.get(arg)
            if e.op == BEGIN:
                if inner is not None:
                    raise ModelError(f"compiler_begin(..., {compiler!r}) reads {describe(arg)}, "
                                     f"which is still inside a region of "
                                     f"{target_of[sets.find(inner)]!r}: end it with compiler_end "
                                     "first", _key(arg), _op(arg))
                t = token[e] = len(target_of)
                target_of.append(compiler)  # type: ignore[arg-type]
                label = e.attrs.get("region")
                if label is not None:
                    sets.union(labelled.setdefault((compiler, label), t), t)  # type: ignore
            elif inner is None:
                raise ModelError(f"compiler_end(..., {compiler!r}) of {describe(_strip_end(arg))}"
                                 " closes no region: that value is not computed inside one",
                                 _key(arg), _op(arg))
            elif target_of[sets.find(inner)] != compiler:
                raise ModelError(f"compiler_end(..., {compiler!r}) closes a region of "
                                 f"{target_of[sets.find(inner)]!r}", _key(arg), _op(arg))
            continue
        kids = children(e)
        new = with_children(e, [plain[k] for k in kids]) if kids else e
        plain[e] = new
        order.append(new)
        tokens.append(None)
        if e is body and isinstance(e, Tuple):
            continue  # the outputs: checked below, with their names
        inside = [token.get(k) for k in kids]
        if not kids or all(t is None for t in inside):
            continue
        if any(t is None for t in inside):
            _raise_mixed(e, token, target_of, sets)
        first = inside[0]
        for k, t in zip(kids, inside):
            if target_of[sets.find(t)] != target_of[sets.find(first)]:  # type: ignore[arg-type]
                raise ModelError(f"reads {describe(_strip_end(k))} from a region of "
                                 f"{target_of[sets.find(t)]!r} and other arguments from a region "
                                 f"of {target_of[sets.find(first)]!r}: end one region with "
                                 "compiler_end and begin the other with compiler_begin",
                                 _key(e), _op(e))
            sets.union(first, t)
        token[e] = tokens[-1] = first  # type: ignore[assignment]
    _check_outputs(func, token, target_of, sets)
    region, roots = numbered([None if t is None else sets.find(t) for t in tokens])
    return Regions(Function(func.params, plain[body], func.attrs), order, region,
                   [target_of[r] for r in roots])


#: TVM's target name for the host: regions annotated for it are not lifted.
HOST_TARGET = "default"
MARKED_HOST = "annotated for the host (compiler 'default')"


def host_marked(regions: Regions) -> tuple[Regions, list[int]]:
    """``regions`` without those marked for the host (their nodes back on the host, the other
    regions renumbered in order), and the positions of the nodes they held."""
    if HOST_TARGET not in regions.targets:
        return regions, []
    keep = [t != HOST_TARGET for t in regions.targets]
    renumber = [-1] * len(keep)
    targets: list[str] = []
    for r, kept in enumerate(keep):
        if kept:
            renumber[r] = len(targets)
            targets.append(regions.targets[r])
    region = [renumber[r] if r >= 0 else -1 for r in regions.region]
    marked = [i for i, r in enumerate(regions.region) if r >= 0 and not keep[r]]
    return regions.with_regions(region, targets), marked


def _raise_mixed(e: Expr, token: dict[Expr, int], target_of: list[str], sets: _UnionFind) -> None:
    args = e.args if isinstance(e, Call) else children(e)
    t = next(token[a] for a in args if a is not None and a in token)
    target = target_of[sets.find(t)]
    for pos, a in enumerate(args):
        if a is not None and a not in token:
            what = describe(_strip_end(a))
            fix = f"wrap it as compiler_begin(<{what}>, {target!r})"
            if isinstance(a, Call) and a.op == END:
                fix = f"begin it again with compiler_begin(..., {target!r})"
            raise ModelError(f"is in a region of {target!r}, but its argument {pos} ({what}) "
                             f"enters the region without compiler_begin: {fix}", _key(e), _op(e))


def _check_outputs(func: Function, token: dict[Expr, int], target_of: list[str],
                   sets: _UnionFind) -> None:
    body = func.body
    outs = body.fields if isinstance(body, Tuple) else (body,)
    names = list(func.attrs.get("output_names") or [])
    for k, o in enumerate(outs):
        if o in token:
            name = names[k] if k < len(names) else f"output {k}"
            raise ModelError(f"function output {name!r} ({describe(o)}) is still inside a region "
                             f"of {target_of[sets.find(token[o])]!r}: wrap it in "
                             "compiler_end")


def _key(e: Expr) -> str | None:
    e = _strip_end(e)
    return node_key(e) if isinstance(e, Call) else None


def _op(e: Expr) -> str | None:
    e = _strip_end(e)
    return e.op_name if isinstance(e, Call) else None


def annotate(regions: Regions) -> Function:
    """The function with compiler_begin on every value entering a region and compiler_end on
    every value leaving one (constants and graph inputs included), each written once."""
    region, targets, order = regions.region, regions.targets, regions.order
    kids = regions.index_graph().kids
    label = _labels(regions)
    new = list(order)
    ends: dict[int, Expr] = {}
    begins: dict[tuple[int, int], Expr] = {}

    def read(k: int, r: int) -> Expr:
        """Node ``k`` as region ``r`` (-1: the host) reads it."""
        rk = region[k]
        value = new[k]
        if rk == r:
            return value
        if rk >= 0:
            end = ends.get(k)
            if end is None:
                end = ends[k] = compiler_end(value, targets[rk], label[rk])
            value = end
        if r >= 0:
            begin = begins.get((k, r))
            if begin is None:
                begin = begins[(k, r)] = compiler_begin(value, targets[r], label[r])
            value = begin
        return value

    for i, e in enumerate(order):
        if kids[i]:
            new[i] = with_children(e, [read(k, region[i]) for k in kids[i]])
    func = regions.func
    return Function(func.params, read(len(order) - 1, -1), func.attrs)


def _labels(regions: Regions) -> list[int | None]:
    """``region=r`` for each region whose parts no data edge joins, None for the others."""
    region, kids = regions.region, regions.index_graph().kids
    sets = _UnionFind()
    for i, r in enumerate(region):
        if r < 0:
            continue
        sets.find(i)
        for k in kids[i]:
            # Consumers in one region of the same outside value share its compiler_begin.
            sets.union(i, k if region[k] == r else (k, r))
    parts: list[set] = [set() for _ in regions.targets]
    for i, r in enumerate(region):
        if r >= 0:
            parts[r].add(sets.find(i))
    return [r if len(p) > 1 else None for r, p in enumerate(parts)]
