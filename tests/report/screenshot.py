"""Make the README's picture of a report: ``python -m tests.report.screenshot docs/report.png``.

The committed model with a Loop and an If (tests/models/files/loop_running_sum.onnx), on
ccompiler with --profile; the pointer on a node that stayed on the host, so its tooltip shows
why. Needs Chromium (Debian: apt-get install chromium) and Pillow.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from byoc.cli import main as cli_main
from tests.report.chromium import Chromium
from tests.report.models import LOOP


def main(out: str) -> None:
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "report.html"
        shot = Path(tmp) / "shot.png"
        cli_main(["report", str(LOOP), "--backend", "ccompiler", "--profile", "-o",
                  str(page_path)])
        with Chromium(width=1200, height=760) as page:
            page.open(page_path.as_uri())
            page.wait_for("document.body.dataset.state === 'ready'")
            data = json.loads(page.evaluate("document.getElementById('byoc-data').textContent"))
            node = next(n for n in data["graph"]["nodes"] if n["op"] == "Mod")
            time.sleep(0.3)
            x, y = page.evaluate(f"""(() => {{ const r = document.querySelector(
                '.node[data-key="n{node['id']}"]').getBoundingClientRect();
                return [r.x + r.width / 2, r.y + r.height / 2]; }})()""")
            page.hover(x, y)
            page.wait_for("!document.getElementById('tip').hidden")
            page.screenshot(str(shot))
        with Image.open(shot) as img:  # a palette PNG: a tenth of the bytes, same picture
            img.convert("RGB").quantize(colors=128).save(out, optimize=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/report.png")
