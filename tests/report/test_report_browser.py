"""The report in a real browser: headless Chromium opens it from a file URL, every figure draws, no console errors.

Skipped, with the reason, only where no Chromium binary exists (`.ci/run` installs the Debian `chromium` package).
A PNG screenshot is saved (to $INTERP_REPORT_SCREENSHOT when set, else the test's temporary directory).
"""

from __future__ import annotations

import html as html_lib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from report_fixtures import quick_report

pytestmark = pytest.mark.slow

CHROMIUM = next(
    (b for b in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable") if shutil.which(b)), None
)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--mute-audio",
]

# Installed before any other script: records uncaught errors and console.error calls.
CAPTURE = """<script>window.__errors = [];
window.addEventListener('error', function (e) { window.__errors.push('error: ' + e.message); });
window.addEventListener('unhandledrejection', function (e) { window.__errors.push('rejection: ' + e.reason); });
(function () { var ce = console.error; console.error = function () {
  window.__errors.push('console.error: ' + Array.prototype.join.call(arguments, ' '));
  ce.apply(console, arguments); }; })();
</script>"""
# After load: does every figure container hold a drawn plot? The verdict goes into the DOM for --dump-dom.
VERDICT = """<script>window.addEventListener('load', function () { setTimeout(function () {
  var divs = Array.prototype.slice.call(document.querySelectorAll('.plotly-graph-div'));
  var drawn = divs.filter(function (d) {
    return d.querySelector('svg.main-svg') && d._fullData && d._fullData.length > 0; });
  var v = {figures: divs.length, drawn: drawn.map(function (d) { return d.id; }),
           missing: divs.filter(function (d) { return drawn.indexOf(d) < 0; }).map(function (d) { return d.id; }),
           errors: window.__errors};
  var pre = document.createElement('pre'); pre.id = 'verdict'; pre.textContent = JSON.stringify(v);
  document.body.appendChild(pre); }, 1000); });
</script>"""

requires_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium binary on PATH (install the Debian "
    "'chromium' package: apt-get install -y chromium; .ci/run does this)",
)


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / "chromium-profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser")
    path, _ = quick_report(root)
    return root, path


def _verdict(root: Path, page: str, name: str = "probe.html") -> tuple[dict, subprocess.CompletedProcess]:
    """Open a copy of `page` with the error capture and the drawn-figure check; return the verdict."""
    probe = root / name
    probe.write_text(page.replace("<head>", "<head>" + CAPTURE, 1).replace("</body>", VERDICT + "</body>", 1))
    res = _chromium(
        root,
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=30000",
        "--window-size=1400,1000",
        "--dump-dom",
        probe.as_uri(),
    )
    found = re.search(r'<pre id="verdict">(.*?)</pre>', res.stdout, re.S)
    assert found, f"no verdict in the DOM (chromium rc {res.returncode}): {res.stderr[-2000:]}"
    return json.loads(html_lib.unescape(found.group(1))), res


@requires_chromium
def test_every_figure_draws_without_console_errors(report):
    root, path = report
    page = path.read_text()
    verdict, res = _verdict(root, page)
    n_figs = page.count('class="plotly-graph-div"')
    assert verdict["figures"] == n_figs >= 12
    assert verdict["missing"] == [], verdict
    assert verdict["errors"] == [], verdict["errors"]
    console = [ln for ln in res.stderr.splitlines() if "CONSOLE" in ln and ("Uncaught" in ln or "Error" in ln)]
    assert console == []


@requires_chromium
def test_the_check_catches_errors_and_undrawn_figures(report):
    root, path = report
    page = path.read_text()
    first = re.search(r'id="(fig-[^"]+)" class="plotly-graph-div"', page).group(1)
    broken = re.sub(r'Plotly\.newPlot\(\s*"' + first + '"', f'notAFunction("{first}"', page, count=1)
    assert broken != page
    verdict, _ = _verdict(root, broken, "broken.html")
    assert verdict["missing"] == [first]
    assert any("notAFunction" in e for e in verdict["errors"]), verdict


@requires_chromium
def test_screenshot(report):
    root, path = report
    shot = Path(os.environ.get("INTERP_REPORT_SCREENSHOT", root / "report.png"))
    shot.parent.mkdir(parents=True, exist_ok=True)
    res = _chromium(
        root, "--virtual-time-budget=30000", "--window-size=1400,2400", f"--screenshot={shot}", path.as_uri()
    )
    assert shot.is_file(), res.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1400, 2400)
    assert len(data) > 50_000  # a drawn page, not a blank one
    print(f"screenshot: {shot}")
