"""The report's contents, without a browser: the graph it draws, its numbers, its safety."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest

import byoc
from byoc.cli import main as cli_main
from byoc.inputs import random_inputs
from byoc.profile import profile
from byoc.report import partition_report
from byoc.report.graph import graph_view, short_attr, type_text
from byoc.report.html import json_for_script
from byoc.report.page import html_report, report_data
from tests.report.models import (
    BERT,
    HTML_HOSTILE,
    LOOP,
    hostile_attribute_model,
    hostile_model,
    wide_model,
)


class Page(HTMLParser):
    """The elements a browser would see: scripts (with attributes and text), and any tag."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.scripts: list[tuple[dict, str]] = []
        self.tags: list[str] = []
        self.meta: list[dict] = []
        self._in_script: dict | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "script":
            self._in_script = dict(attrs)
            self.scripts.append((self._in_script, ""))
        if tag == "meta":
            self.meta.append(dict(attrs))

    def handle_data(self, data):
        if self._in_script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = None


def data_of(page: str) -> dict:
    scripts = Page(page).scripts
    (payload,) = [text for attrs, text in scripts if attrs.get("type") == "application/json"]
    return json.loads(payload)


@pytest.fixture(scope="module")
def bert():
    mod = byoc.load_onnx(str(BERT))
    return mod, byoc.partition(mod, backends=["ccompiler"])


@pytest.fixture(scope="module")
def loop():
    mod = byoc.load_onnx(str(LOOP))
    return mod, byoc.partition(mod, backends=["ccompiler"])


# --- the graph ---------------------------------------------------------------------------------


def test_every_onnx_node_is_drawn_once_where_the_partition_put_it(bert):
    _, part = bert
    view = graph_view(part, byoc.explain(part))
    table = partition_report(part)
    ops = [n for n in view["nodes"] if n["kind"] == "op"]
    assert sorted(n["name"] for n in ops) == sorted(
        [x for r in table["regions"] for x in r["nodes"]] + table["host_nodes"])
    where = {n["name"]: n["where"] for n in ops}
    for r in table["regions"]:
        assert {where[x] for x in r["nodes"]} == {"ccompiler"}
    assert {where[x] for x in table["host_nodes"]} == {"host"}
    regions = {b["name"]: b for b in view["boxes"] if b["kind"] == "region"}
    assert sorted(regions) == sorted(r["name"] for r in table["regions"])
    for r in table["regions"]:  # each region's box holds exactly its nodes
        inside = [n["name"] for n in ops if n["box"] == regions[r["name"]]["id"]]
        assert sorted(inside) == sorted(r["nodes"])
        assert regions[r["name"]]["size"] == len(r["nodes"])


def test_host_nodes_carry_the_reason_explain_gives(bert):
    _, part = bert
    reasons = byoc.explain(part)
    view = graph_view(part, reasons)
    host = [n for n in view["nodes"] if n["kind"] == "op" and n["where"] == "host"]
    assert host and all(n["reason"] == reasons[n["name"]] for n in host)
    assert not any("reason" in n for n in view["nodes"] if n["where"] != "host")
    assert any("Range is not supported" in n["reason"] for n in host)


def test_edges_follow_the_data_through_regions(bert):
    mod, part = bert
    view = graph_view(part, byoc.explain(part))
    ids = {n["name"]: n["id"] for n in view["nodes"] if n["kind"] == "op"}
    edges = {tuple(e) for e in view["edges"]}
    # The model's own producer -> consumer pairs between nodes, from the ONNX file itself.
    import onnx

    model = onnx.load(str(BERT))
    producer = {o: n.name for n in model.graph.node for o in n.output}
    want = {(producer[i], n.name) for n in model.graph.node for i in n.input if i in producer}
    want = {(a, b) for a, b in want if a in ids and b in ids}
    got = {(a, b) for a, b in want if (ids[a], ids[b]) in edges}
    assert got == want
    inputs = {n["name"]: n["id"] for n in view["nodes"] if n["kind"] == "input"}
    assert set(inputs) == {p.name for p in mod.main.params}
    outputs = [n for n in view["nodes"] if n["kind"] == "output"]
    assert [n["name"] for n in outputs] == [o.name for o in model.graph.output]
    assert all(any(e[1] == n["id"] for e in view["edges"]) for n in outputs)


def test_node_details_name_values_types_and_attributes(bert):
    _, part = bert
    view = graph_view(part, byoc.explain(part), dims={"batch": 4})
    by_name = {n["name"]: n for n in view["nodes"]}
    softmax = next(n for n in view["nodes"] if n["op"] == "Softmax")
    assert softmax["attrs"] == [["axis", "-1"]]
    assert softmax["inputs"][0][0].endswith("output_0")  # the ONNX value name, not a param's
    assert softmax["outputs"][0][1].startswith("float32[")
    ids = by_name["input_ids"]["outputs"][0]
    assert ids[0] == "input_ids" and ids[1].startswith("int64[4,")
    matmul = next(n for n in view["nodes"] if n["op"] == "MatMul" and
                  any(constant for _, _, constant in n["inputs"]))
    assert any(constant for _, _, constant in matmul["inputs"])


def test_control_flow_nodes_are_boxes_with_their_bodies(loop):
    _, part = loop
    view = graph_view(part, byoc.explain(part))
    boxes = view["boxes"]
    nodes = view["nodes"]
    controls = {nodes[b["node"]]["name"]: b for b in boxes if b["kind"] == "control"}
    assert sorted(controls) == ["loop", "loop_if"]
    bodies = {(b["parent"], b["name"]) for b in boxes if b["kind"] == "body"}
    assert bodies == {(controls["loop"]["id"], "body"), (controls["loop_if"]["id"], "then_branch"),
                      (controls["loop_if"]["id"], "else_branch")}
    for b in controls.values():
        assert nodes[b["end"]]["kind"] == "end" and nodes[b["end"]]["box"] == b["id"]
    # Nothing enters a body but through its control-flow node.
    box_of = {n["id"]: n["box"] for n in nodes}

    def inside(node_box, box_id):
        while node_box is not None:
            if node_box == box_id:
                return True
            node_box = boxes[node_box]["parent"]
        return False

    for b in controls.values():
        for src, dst in view["edges"]:
            if inside(box_of[dst], b["id"]) and dst != b["node"]:
                assert inside(box_of[src], b["id"]), (src, dst)
    # Regions inside bodies are boxes inside the body boxes.
    neg = next(n for n in nodes if n["name"] == "loop_odd_neg")
    assert boxes[neg["box"]]["kind"] == "region"
    assert boxes[boxes[neg["box"]]["parent"]]["name"] == "else_branch"
    assert controls["loop"]["size"] == 12  # every ONNX node of its bodies, nested ones too


def test_a_module_never_partitioned_is_all_on_the_host():
    mod = byoc.load_onnx(str(BERT))
    data = report_data(mod, model="bert")
    ops = [n for n in data["view"]["nodes"] if n["kind"] == "op"]
    assert ops and {n["where"] for n in ops} == {"host"}
    assert all("--backend" in n["reason"] for n in ops)
    assert data["summary"]["regions"] == []


def test_short_forms():
    import numpy as np

    from byoc.ir import TensorType, TupleType

    assert type_text(TensorType(("batch", 3, None), "float32"), {"batch": 2}) == "float32[2,3,?]"
    assert type_text(TensorType(None, None)) == "?[?]"
    assert type_text(TupleType((TensorType((1,), "int64"),) * 2)) == "(int64[1], int64[1])"
    assert short_attr([1, 2]) == "[1,2]"
    assert short_attr(0.1) == "0.1"
    assert short_attr("x" * 100).endswith("...") and len(short_attr("x" * 100)) == 60
    assert short_attr(np.zeros((64, 3), np.float32)) == "float32[64,3]"
    assert short_attr(np.array([1, 2], np.int64)) == "int64[2] [1,2]"
    assert short_attr(list(range(40))).endswith(",... (40)]")


# --- times and the summary ---------------------------------------------------------------------


def test_profiled_times_land_on_nodes_regions_and_the_summary(loop):
    mod, part = loop
    exe = byoc.build(part)
    prof = profile(exe, random_inputs(mod.main, {}), repeat=2)
    data = report_data(part, profile=prof, backends=["ccompiler"])
    view, summary = data["view"], data["summary"]
    timed = {e["node"]: e["time_s"] for e in prof["nodes"]}
    for n in view["nodes"]:
        if n["kind"] == "op" and n["name"] in timed:
            assert n["time_s"] == timed[n["name"]]
    regions = [b for b in view["boxes"] if b["kind"] == "region"]
    assert all(b["time_s"] == timed[b["name"]] for b in regions)
    assert summary["total_s"] == prof["total_s"] and summary["repeat"] == 2
    check_hot_spots(view, summary)
    where = {w["where"]: w for w in summary["where"]}
    assert where["ccompiler"]["nodes"] == 13 and where["host"]["nodes"] == 3
    for place in ("host", "ccompiler"):  # the profile's split, regions in bodies on ccompiler
        assert where[place]["time_s"] == prof["where"][place]["time_s"] > 0
    loop = next(n for n in view["nodes"] if n["name"] == "loop")
    assert loop["with_bodies_s"] > loop["time_s"]  # its own time, its bodies' nodes apart
    body_regions = [b for b in regions if b["parent"] is not None]
    assert body_regions and all(b["calls"] >= 2 for b in body_regions)  # once a trip
    rows = {r["name"]: r for r in summary["regions"]}
    assert rows["ccompiler_relu_94d38a82"]["bytes_out"] == 32


def check_hot_spots(view: dict, summary: dict) -> None:
    """Each hot spot names what it points at in the graph, and nothing is counted twice: a
    region split into kernels is never also a hot spot whole."""
    hot = summary["hot_spots"]
    assert 0 < len(hot) <= 10
    assert sum(h["time_s"] for h in hot) <= summary["total_s"] * (1 + 1e-9)
    split = {k["region"] for k in summary["kernels"]}
    for h in hot:
        if h["kind"] == "box":
            box = view["boxes"][h["target"]]
            assert box["name"] == h["name"] and box["kind"] == "region"
            assert box["name"] not in split or h["op"] == "(outside its kernels)"
        elif h["kernel"]:
            held = {view["nodes"][i]["name"] for i in h["targets"]}
            assert h["name"] in held and len(held) == h["nodes"]
        else:
            assert view["nodes"][h["target"]]["name"] == h["name"]
    kernels = [(h["name"], h["kernel"]) for h in hot if h["kernel"]]
    assert len(kernels) == len(set(kernels))


def test_kernel_times_reach_the_nodes_they_hold():
    import numpy as np

    from byoc.cli import default_model_path

    mod = byoc.load_onnx(default_model_path())
    part = byoc.partition(mod, backends=["native"])
    x = {"image": np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    prof = profile(byoc.build(part), x, repeat=2)
    text = html_report(part, profile=prof, backends=["native"], model="tiny_resnet")
    data = data_of(text)  # as the page holds it
    view, summary = data["graph"], data["summary"]
    nodes = {n["name"]: n for n in view["nodes"] if n["kind"] == "op"}
    kernels = summary["kernels"]
    assert len(kernels) == len(prof["kernels"]) == 14
    for k, (page, timed) in enumerate(zip(kernels, prof["kernels"])):
        assert page["time_s"] == timed["time_s"] and page["kernel"] == timed["kernel"]
        assert sorted(view["nodes"][i]["name"] for i in page["nodes"]) == sorted(timed["nodes"])
        assert page["held"] == len(timed["nodes"])
        for name in timed["nodes"]:  # each node it holds shows the kernel's time
            assert k in nodes[name]["kernels"]
    fused = [k for k in kernels if k["held"] > 1]
    assert fused and any("Relu" in k["kernel"] for k in fused)
    held = {name for k in prof["kernels"] for name in k["nodes"]}
    assert all("kernels" not in n for name, n in nodes.items() if name not in held)
    (box,) = [b for b in view["boxes"] if b["kind"] == "region"]
    assert sum(k["time_s"] for k in kernels) <= box["time_s"]
    check_hot_spots(view, summary)
    assert any(h["kernel"] for h in summary["hot_spots"])
    assert not any(h["kind"] == "box" and h["op"] != "(outside its kernels)"
                   for h in summary["hot_spots"])  # the region is split, never whole
    assert "shared by the kernel's" in text  # what the page says on a fused kernel's node


def test_without_a_profile_there_are_no_times(bert):
    _, part = bert
    data = report_data(part)
    assert data["summary"]["total_s"] is None and data["summary"]["hot_spots"] == []
    assert not any("time_s" in n for n in data["view"]["nodes"])


# --- the page ----------------------------------------------------------------------------------


def test_the_page_is_one_file_that_needs_no_network(bert):
    _, part = bert
    text = html_report(part, model="bert_tiny.onnx", backends=["ccompiler"])
    page = Page(text)
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text)  # no address but SVG's
    assert "link" not in page.tags and "img" not in page.tags and "iframe" not in page.tags
    assert all("src" not in attrs for attrs, _ in page.scripts)
    (csp,) = [m["content"] for m in page.meta if m.get("http-equiv") == "Content-Security-Policy"]
    assert "default-src 'none'" in csp and "connect-src 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    code = [text for attrs, text in page.scripts if not attrs]
    assert len(code) == 2  # dagre, then the page's own code, each allowed by its hash
    for body in code:
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    assert code[0].startswith("/*! @dagrejs/dagre 3.1.3")
    assert "Permission is hereby granted" in code[0]  # the licence travels with the code
    assert data_of(text)["meta"]["model"] == "bert_tiny.onnx"


@pytest.mark.parametrize("make", [hostile_model, hostile_attribute_model])
def test_hostile_names_stay_data(make):
    mod = byoc.load_onnx(make())
    part = byoc.partition(mod, backends=["ccompiler"])
    data = report_data(part, model=HTML_HOSTILE[0])
    text = html_report(part, model=HTML_HOSTILE[0])
    page = Page(text)
    # Exactly the page's own three scripts, whatever the names: none added, none cut short.
    assert [attrs for attrs, _ in page.scripts] == [
        {"type": "application/json", "id": "byoc-data"}, {}, {}]
    assert page.tags.count("img") == 0 and page.tags.count("svg") == 1
    # The model's strings are in the JSON and, escaped, in the title; nowhere else.
    payload = page.scripts[0][1]
    rest = text.replace(payload, "").replace(re.search(r"<title>.*</title>", text).group(0), "")
    assert "__pwned" not in rest and "__pwned" in payload
    parsed = data_of(text)
    assert parsed["graph"] == json.loads(json.dumps(data["view"]))  # every name arrives intact
    names = {n["name"] for n in parsed["graph"]["nodes"]} | {
        v[0] for n in parsed["graph"]["nodes"] for v in n["inputs"] + n["outputs"]}
    assert names & set(HTML_HOSTILE)
    title = re.search(r"<title>(.*)</title>", text).group(1)
    assert "<" not in title and "&lt;/script&gt;" in title
    # The page's code puts model strings on screen as text only.
    app = (page.scripts[2][1])
    assert "innerHTML" not in app and "insertAdjacentHTML" not in app and "eval(" not in app
    assert "document.write" not in app


def test_json_for_script_is_inert():
    text = json_for_script({"a": "</script><!--\u2028&"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><!--\u2028&"}


def test_big_graphs_open_folded():
    mod = byoc.load_onnx(wide_model(1800))
    part = byoc.partition(mod, backends=["ccompiler"])
    data = data_of(html_report(part))
    regions = [b["id"] for b in data["graph"]["boxes"] if b["kind"] == "region"]
    assert regions and data["meta"]["folded"] == regions
    small = data_of(html_report(byoc.partition(byoc.load_onnx(wide_model(120)),
                                               backends=["ccompiler"])))
    assert small["meta"]["folded"] == []


# --- the command -------------------------------------------------------------------------------


def test_the_command_writes_the_page_and_says_where(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert cli_main(["report", str(LOOP), "--backend", "ccompiler", "--profile", "--repeat", "2",
                     "-o", str(out)]) == 0
    said = capsys.readouterr()
    assert f"wrote {out}: 16 nodes, 6 region(s)" in said.out
    data = data_of(out.read_text())
    assert data["summary"]["total_s"] > 0 and data["meta"]["backends"] == ["ccompiler"]
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]  # no temporary file left


def test_the_command_shows_dims_from_inputs(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert cli_main(["report", str(BERT), "--backend", "ccompiler", "--dim", "batch=3",
                     "-o", str(out)]) == 0
    nodes = data_of(out.read_text())["graph"]["nodes"]
    ids = next(n for n in nodes if n["name"] == "input_ids")
    assert ids["outputs"][0][1].startswith("int64[3,")


def test_the_command_refuses_in_one_line(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "byoc", *args], capture_output=True,
                              text=True, cwd=tmp_path)

    r = run("report", str(LOOP), "--backend", "ccompiler", "-o", "r.txt")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and ".html" in r.stderr
    r = run("report", str(LOOP), "--backend", "nosuch", "-o", "r.html")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "nosuch" in r.stderr
    assert not list(tmp_path.iterdir())


def test_run_profile_and_partition_point_at_the_report(capsys):
    assert cli_main(["partition", str(LOOP), "--backend", "ccompiler"]) == 0
    assert "byoc report" in capsys.readouterr().out
    assert cli_main(["run", str(LOOP), "--backend", "ccompiler", "--profile"]) == 0
    assert "byoc report" in capsys.readouterr().out


# --- a plan from byoc tune ---------------------------------------------------------------------


def test_a_plans_measurements_land_on_its_regions_and_host_nodes(tmp_path):
    from tests.tuning.util import Costs, chain_model, fake_backends, tune_fake

    ops = ["Relu", "Abs", "Neg", "Sigmoid", "Tanh", "Relu"]
    names = [f"n{k}" for k in range(len(ops))]
    # fa is fast at the start, fb at the end, the host in the middle (n2, n3): three segments.
    node = {n: {"host": 1e-3, "fa": 5e-3, "fb": 5e-3} for n in names}
    for n in names[:2]:
        node[n]["fa"] = 1e-5
    for n in names[4:]:
        node[n]["fb"] = 1e-5
    costs = Costs(node, {"fa": 1e-5, "fb": 1e-5}, {"fa": 1e-6, "fb": 1e-6})
    with fake_backends(fa=set(ops), fb=set(ops)):
        plan, _, mod = tune_fake(chain_model(ops), ["fa", "fb"], costs)
        part = byoc.partition(mod, plan=plan)
        data = report_data(part, plan=plan, backends=plan.backends)
        path = tmp_path / "plan.json"
        plan.save(path)
        out = tmp_path / "r.html"
        model = tmp_path / "chain.onnx"
        import onnx

        onnx.save(chain_model(ops), str(model))
        assert cli_main(["report", str(model), "--plan", str(path), "-o", str(out)]) == 0
        assert data_of(out.read_text())["plan"]["segments"]
    view, rows = data["view"], data["plan"]["segments"]
    assert [r["chosen"] for r in rows] == [s["chosen"] for s in plan.data["segments"]]
    places = {n["name"]: n["where"] for n in view["nodes"] if n["kind"] == "op"}
    assert places == {"n0": "fa", "n1": "fa", "n2": "host", "n3": "host", "n4": "fb",
                      "n5": "fb"}
    for b in view["boxes"]:  # each region: the segment that chose its backend
        seg = rows[b["segment"]]
        assert seg["chosen"] == b["where"]
        assert set(seg["times"]) >= {"host", "fa", "fb"}
        assert seg["why"].startswith(b["where"])
    host = [n for n in view["nodes"] if n["where"] == "host" and n["kind"] == "op"]
    assert all(rows[n["segment"]]["chosen"] == "host" for n in host)
    assert any("predicted" in line for line in data["plan"]["summary"])


def test_report_refuses_a_plan_and_backends_together(tmp_path):
    r = subprocess.run([sys.executable, "-m", "byoc", "report", str(LOOP), "--backend",
                        "ccompiler", "--plan", "p.json", "-o", "r.html"], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 2 and "drop --backend" in r.stderr
