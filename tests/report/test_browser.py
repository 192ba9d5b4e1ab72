"""The report as a person sees it: real models' reports opened in headless Chromium.

Slow, and skipped where Chromium is not installed (Debian: ``apt-get install chromium``; CI
installs no browser). Screenshots are saved under pytest's tmp_path, or in $BYOC_REPORT_SHOTS.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from byoc.cli import main as cli_main
from tests.models import zoo
from tests.report.chromium import Chromium, find_chromium
from tests.report.models import LOOP, wide_model

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(find_chromium() is None,
                       reason="needs Chromium on PATH (Debian: apt-get install chromium); "
                              "CI installs no browser"),
]

READY = "['ready', 'error'].includes(document.body.dataset.state)"


def shots(tmp_path):
    folder = os.environ.get("BYOC_REPORT_SHOTS") or str(tmp_path)
    os.makedirs(folder, exist_ok=True)
    return folder


def zoo_case(name: str, tmp_path) -> tuple[str, list[str]]:
    """A zoo model's file and the --input arguments of its real inputs."""
    import numpy as np

    entry = next(m for m in zoo.MODELS if m.name == name)
    try:
        path = entry.locate()
    except zoo.ModelUnavailable as exc:
        pytest.skip(str(exc))
    args = []
    for k, (input_name, value) in enumerate(entry.make_inputs(np.random.default_rng(0)).items()):
        np.save(tmp_path / f"in{k}.npy", value)
        args += ["--input", f"{input_name}={tmp_path / f'in{k}.npy'}"]
    return str(path), args


def open_report(page: Chromium, path) -> dict:
    page.open(path.as_uri())
    assert page.wait_for(READY, timeout=120)
    assert page.evaluate("document.body.dataset.state") == "ready", page.evaluate(
        "document.getElementById('status').textContent")
    return json.loads(page.evaluate("document.getElementById('byoc-data').textContent"))


def drawn(page: Chromium, selector: str, attr: str) -> set[str]:
    return set(page.evaluate(
        f"[...document.querySelectorAll('{selector}')].map(e => e.getAttribute('{attr}'))"))


def center_of(page: Chromium, key: str) -> tuple[float, float]:
    x, y = page.evaluate(f"""(() => {{
        const r = document.querySelector('.node[data-key="{key}"]').getBoundingClientRect();
        return [r.x + r.width / 2, r.y + r.height / 2]; }})()""")
    return x, y


def overlapping(page: Chromium) -> list[list[str]]:
    """Pairs of drawn nodes whose boxes overlap (nodes sorted by left edge, swept)."""
    return page.evaluate("""(() => {
        const boxes = [...document.querySelectorAll('.node')].map(g => {
            const r = g.querySelector('rect').getBoundingClientRect();
            return [r.left, r.right, r.top, r.bottom, g.getAttribute('data-key')]; });
        boxes.sort((a, b) => a[0] - b[0]);
        const out = [];
        for (let i = 0; i < boxes.length && out.length < 5; i++)
            for (let j = i + 1; j < boxes.length && boxes[j][0] < boxes[i][1] - 0.5; j++)
                if (boxes[j][2] < boxes[i][3] - 0.5 && boxes[i][2] < boxes[j][3] - 0.5)
                    out.push([boxes[i][4], boxes[j][4]]);
        return out; })()""")


def find(page: Chromium, name: str) -> None:
    """Type a node's name in the search box, as a person would, and wait for it to be shown."""
    page.evaluate(f"""(() => {{ const f = document.getElementById('find');
        f.value = {json.dumps(name)}; f.dispatchEvent(new Event('change')); }})()""")
    page.wait_for(READY)
    time.sleep(0.2)


@pytest.mark.parametrize("name", ["bert_tiny", "loop_running_sum", "silero_vad_16k"])
def test_a_real_models_report_draws_every_node_and_region_and_says_why(name, tmp_path):
    backend = "ccompiler"
    model, inputs = (str(LOOP), []) if name == "loop_running_sum" else zoo_case(name, tmp_path)
    out = tmp_path / "report.html"
    assert cli_main(["report", model, "--backend", backend, "--profile", "--repeat", "2",
                     *inputs, "-o", str(out)]) == 0
    with Chromium() as page:
        data = open_report(page, out)
        nodes, boxes = data["graph"]["nodes"], data["graph"]["boxes"]
        assert data["meta"]["folded"] == []
        assert drawn(page, ".node", "data-key") == {f"n{n['id']}" for n in nodes}
        assert drawn(page, ".box.region", "data-box") == {
            str(b["id"]) for b in boxes if b["kind"] == "region"}
        assert drawn(page, ".box.control", "data-box") == {
            str(b["id"]) for b in boxes if b["kind"] == "control"}
        assert not overlapping(page)
        # Hover a host node: its tooltip says why it stayed there, and its time.
        host = [n for n in nodes if n["kind"] == "op" and n["where"] == "host"]
        assert host
        node = max(host, key=lambda n: n.get("time_s", 0))
        find(page, node["name"])
        page.hover(*center_of(page, f"n{node['id']}"))
        tip = page.wait_for("!document.getElementById('tip').hidden && "
                            "document.getElementById('tip').textContent")
        assert node["name"] in tip and node["op"] in tip
        assert node["reason"] in tip and "runs on the host" in tip
        assert " ms" in tip
        # Hover a node in a region: its backend and region.
        inside = next(n for n in nodes if n["kind"] == "op" and n["where"] == backend)
        find(page, inside["name"])
        page.hover(*center_of(page, f"n{inside['id']}"))
        tip = page.wait_for(f"document.getElementById('tip').textContent.includes("
                            f"{json.dumps(inside['name'])}) && "
                            "document.getElementById('tip').textContent")
        assert f"runs on {backend} in region" in tip
        page.screenshot(os.path.join(shots(tmp_path), f"{name}.png"))
        assert not page.errors, page.errors
    from PIL import Image

    with Image.open(os.path.join(shots(tmp_path), f"{name}.png")) as img:
        assert img.size == (1400, 900)
        assert len(img.convert("RGB").getcolors(1 << 20)) > 50  # a picture, not a blank page


def test_control_flow_folds_and_opens(tmp_path):
    out = tmp_path / "loop.html"
    assert cli_main(["report", str(LOOP), "--backend", "ccompiler", "-o", str(out)]) == 0
    with Chromium() as page:
        data = open_report(page, out)
        nodes, boxes = data["graph"]["nodes"], data["graph"]["boxes"]
        loop = next(b for b in boxes if b["kind"] == "control" and nodes[b["node"]]["op"] == "Loop")
        before = drawn(page, ".node", "data-key")
        label = page.evaluate(f"""(() => {{ const r = document.querySelector(
            '.box[data-box="{loop["id"]}"] .label').getBoundingClientRect();
            return [r.x + 4, r.y + r.height / 2]; }})()""")
        page.click(*label)
        page.wait_for(READY)
        # Folded: the Loop node stands alone; what its box held (bodies, ends) is gone.
        def in_loop(n):
            b = n["box"]
            while b is not None and b != loop["id"]:
                b = boxes[b]["parent"]
            return b == loop["id"] and n["id"] != loop["node"]

        gone = {f"n{n['id']}" for n in nodes if in_loop(n)}
        assert len(gone) == loop["size"] + 2  # its 12 body nodes, its end and the If's end
        assert drawn(page, ".node", "data-key") == before - gone
        assert f"b{loop['id']}" not in drawn(page, ".box", "data-key")
        page.click(*center_of(page, f"n{loop['node']}"))
        page.wait_for(READY)
        assert drawn(page, ".node", "data-key") == before
        assert not page.errors, page.errors


def test_a_1000_node_model_opens_and_pans(tmp_path, capsys):
    model = tmp_path / "wide.onnx"
    import onnx

    onnx.save(wide_model(1000), str(model))
    out = tmp_path / "wide.html"
    assert cli_main(["report", str(model), "--backend", "ccompiler", "-o", str(out)]) == 0
    with Chromium() as page:
        start, cpu = time.monotonic(), page.cpu_seconds()
        data = open_report(page, out)
        opened, cpu = time.monotonic() - start, page.cpu_seconds() - cpu
        layout_ms = page.evaluate("document.body.dataset.layoutMs")
        ops = [n for n in data["graph"]["nodes"] if n["kind"] == "op"]
        assert len(ops) >= 1000
        assert drawn(page, ".node", "data-key") == {f"n{n['id']}" for n in data["graph"]["nodes"]}
        assert not overlapping(page)
        # Pan by dragging: 30 moves, each a frame; the scene follows the pointer.
        before = page.evaluate("document.getElementById('scene').getAttribute('transform')")
        page.send("Input.dispatchMouseEvent", type="mousePressed", x=300, y=600, button="left",
                  clickCount=1)
        t0, cpu0 = time.monotonic(), page.cpu_seconds()
        for k in range(30):
            page.send("Input.dispatchMouseEvent", type="mouseMoved", x=300, y=600 - 10 * k,
                      button="left", buttons=1)
        page.evaluate("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
        panned, pan_cpu = time.monotonic() - t0, page.cpu_seconds() - cpu0
        page.send("Input.dispatchMouseEvent", type="mouseReleased", x=300, y=310, button="left",
                  clickCount=1)
        after = page.evaluate("document.getElementById('scene').getAttribute('transform')")
        assert after != before
        page.screenshot(os.path.join(shots(tmp_path), "wide_1000.png"))
        assert not page.errors, page.errors
    with capsys.disabled():
        print(f"\n{len(ops)}-node report: opened in {opened:.1f} s ({cpu:.1f} s of browser CPU, "
              f"layout {layout_ms} ms); 30 pan moves in {panned * 1000:.0f} ms "
              f"({pan_cpu * 1000:.0f} ms CPU); the machine may be shared")


def test_a_long_model_is_laid_out_in_pieces_that_do_not_overlap(tmp_path, capsys):
    """ppocr_v4_rec on native: one region of 449 nodes, cut at its separators into pieces
    dagre lays out one by one, then stacked: every node drawn, none over another, and the
    region's box around them all."""
    model, inputs = zoo_case("ppocr_v4_rec", tmp_path)
    out = tmp_path / "rec.html"
    assert cli_main(["report", model, "--backend", "native", "-o", str(out)]) == 0
    with Chromium() as page:
        cpu = page.cpu_seconds()
        data = open_report(page, out)
        cpu = page.cpu_seconds() - cpu
        levels, pieces = (int(page.evaluate(f"document.body.dataset.{k}"))
                          for k in ("levels", "pieces"))
        assert pieces > levels + 10
        assert drawn(page, ".node", "data-key") == {f"n{n['id']}" for n in data["graph"]["nodes"]}
        assert not overlapping(page)
        (box,) = [b for b in data["graph"]["boxes"] if b["kind"] == "region"]
        inside = page.evaluate(f"""(() => {{
            const frame = document.querySelector('.box[data-box="{box["id"]}"] .frame')
                .getBoundingClientRect();
            return [...document.querySelectorAll('.node')].filter(g => {{
                const n = +g.getAttribute('data-key').slice(1);
                return JSON.parse(document.getElementById('byoc-data').textContent)
                    .graph.nodes[n].box === {box["id"]}; }}).every(g => {{
                const r = g.querySelector('rect').getBoundingClientRect();
                return r.left >= frame.left && r.right <= frame.right && r.top >= frame.top
                    && r.bottom <= frame.bottom; }}); }})()""")
        assert inside
        layout_ms = page.evaluate("document.body.dataset.layoutMs")
        assert not page.errors, page.errors
    with capsys.disabled():
        print(f"\nppocr_v4_rec report: {pieces} pieces in {levels} levels, layout {layout_ms} ms, "
              f"{cpu:.1f} s of browser CPU to open; the machine may be shared")


def test_a_chain_too_deep_for_one_layout_is_drawn_whole(tmp_path):
    """2,500 host nodes in a row: dagre alone overflows the browser's stack near 2,000 ranks
    (the page used to say so and draw nothing); in pieces every node is drawn."""
    import onnx
    from onnx import TensorProto, helper

    n = 2500
    nodes = [helper.make_node("Relu" if k % 2 else "Neg", [f"v{k}"], [f"v{k + 1}"],
                              name=f"op{k}") for k in range(n)]
    graph = helper.make_graph(nodes, "chain",
                              [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info(f"v{n}", TensorProto.FLOAT, [4])])
    model = tmp_path / "chain.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                                ir_version=10), str(model))
    out = tmp_path / "chain.html"
    assert cli_main(["report", str(model), "-o", str(out)]) == 0
    with Chromium() as page:
        data = open_report(page, out)  # ready, not "too deep"
        assert drawn(page, ".node", "data-key") == {f"n{n['id']}" for n in data["graph"]["nodes"]}
        assert int(page.evaluate("document.body.dataset.pieces")) > 100
        assert not overlapping(page)
        assert not page.errors, page.errors


def test_hostile_names_are_shown_as_text_and_run_nothing(tmp_path):
    import onnx

    from tests.report.models import HTML_HOSTILE, hostile_attribute_model, hostile_model

    for k, make in enumerate((hostile_model, hostile_attribute_model)):
        model = tmp_path / f"hostile{k}.onnx"
        onnx.save(make(), str(model))
        out = tmp_path / f"hostile{k}.html"
        assert cli_main(["report", str(model), "--backend", "ccompiler", "-o", str(out)]) == 0
        with Chromium() as page:
            data = open_report(page, out)
            assert page.evaluate("typeof window.__pwned") == "undefined"
            assert page.evaluate("document.querySelectorAll('script').length") == 3
            assert page.evaluate("document.querySelectorAll('img, iframe, object').length") == 0
            # Every node is drawn, and its name arrives whole in its tooltip, as text.
            nodes = [n for n in data["graph"]["nodes"] if n["kind"] == "op"]
            assert drawn(page, ".node", "data-key") >= {f"n{n['id']}" for n in nodes}
            node = next(n for n in nodes if n["name"] in HTML_HOSTILE and "<" in n["name"])
            page.evaluate(f"""(() => {{ const f = document.getElementById('find');
                f.value = {json.dumps(node['name'])}; f.dispatchEvent(new Event('change')); }})()""")
            page.wait_for(READY)
            time.sleep(0.2)
            page.hover(*center_of(page, f"n{node['id']}"))
            tip = page.wait_for("!document.getElementById('tip').hidden && "
                                "document.getElementById('tip').textContent")
            assert node["name"] in tip
            if k == 1:  # the attribute values too
                assert HTML_HOSTILE[0] in tip
            assert page.evaluate("typeof window.__pwned") == "undefined"
            assert not page.errors, page.errors
