"""The report in a real browser: headless Chromium opens it from a file URL at 1400 px, every figure draws, no
console errors, and no label of a figure collides with another or with a panel beside it.

Skipped, with the reason, only where no Chromium binary exists (`.ci/run` installs the Debian `chromium` package).
Screenshots, one PNG per view (and per depth button of the many-run views), are kept in figures/screenshots/ (or
$INTERP_REPORT_SCREENSHOTS; the folder ignores itself in git): quick/ of the quick report over the tiny test runs,
many-runs/ of a report over a hand-built zoo of 30 runs on two priors and 1–7 layers (tests/report/report_synthetic).
The full page goes to $INTERP_REPORT_SCREENSHOT when set, else the test's temporary directory.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from report_browser import CAPTURE, CHROMIUM, VERDICT, WIDTH, chromium, collisions, dump, screenshot_views, with_scripts
from report_fixtures import quick_report
from report_synthetic import zoo_like

pytestmark = pytest.mark.slow

requires_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium binary on PATH (install the Debian "
    "'chromium' package: apt-get install -y chromium; .ci/run does this)",
)
SYNTHETIC_VIEWS = ["loss_vs_layers", "sigma_profiles", "after_k_layers", "training_curves"]  # need no probes


def screenshots_dir(name: str) -> Path:
    """figures/screenshots/<name> (or under $INTERP_REPORT_SCREENSHOTS), emptied; the folder ignores itself in git."""
    root = Path(
        os.environ.get("INTERP_REPORT_SCREENSHOTS", Path(__file__).resolve().parents[2] / "figures" / "screenshots")
    )
    root.mkdir(parents=True, exist_ok=True)
    (root / ".gitignore").write_text("*\n")
    out = root / name
    out.mkdir(exist_ok=True)
    for old in out.glob("*.png"):
        old.unlink()
    return out


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser")
    path, _ = quick_report(root)
    return root, path


@pytest.fixture(scope="module")
def many_runs(tmp_path_factory):
    """The views that need no probe records, over 30 hand-built runs (uniform:5 and {1,3}, 1–7 layers)."""
    from interp.report.html import render

    root = tmp_path_factory.mktemp("many-runs")
    page = render(zoo_like(), only=SYNTHETIC_VIEWS)
    return root, page


def _verdict(root: Path, page: str, name: str = "probe.html") -> dict:
    """Open a copy of `page` with the error capture and the drawn-figure check; return the verdict."""
    verdict, res = dump(root, with_scripts(page, CAPTURE, VERDICT), name, "verdict")
    console = [ln for ln in res.stderr.splitlines() if "CONSOLE" in ln and ("Uncaught" in ln or "Error" in ln)]
    return {**verdict, "console": console}


@requires_chromium
def test_every_figure_draws_without_console_errors(report):
    root, path = report
    page = path.read_text()
    verdict = _verdict(root, page)
    n_figs = page.count('class="plotly-graph-div"')
    assert verdict["figures"] == n_figs >= 12
    assert verdict["missing"] == [], verdict
    assert verdict["errors"] == [], verdict["errors"]
    assert verdict["console"] == []


@requires_chromium
def test_the_check_catches_errors_and_undrawn_figures(report):
    root, path = report
    page = path.read_text()
    first = re.search(r'id="(fig-[^"]+)" class="plotly-graph-div"', page).group(1)
    broken = re.sub(r'Plotly\.newPlot\(\s*"' + first + '"', f'notAFunction("{first}"', page, count=1)
    assert broken != page
    verdict = _verdict(root, broken, "broken.html")
    assert verdict["missing"] == [first]
    assert any("notAFunction" in e for e in verdict["errors"]), verdict


def _collisions(found: list[dict]) -> str:
    return "\n".join(f"{f['figure']} [{f['state']}]: {f['a']} x {f['b']}" for f in found)


@requires_chromium
def test_no_label_collides_at_1400_px(report, many_runs):
    """Axis titles, annotations (subplot titles, the K = k labels), tick labels, legends, buttons and the mode bar of
    every figure, in every state its buttons give it: none overlaps another, reaches into a plotting area (a data
    label may sit inside its own panel's) or leaves the figure."""
    root, path = report
    res = collisions(root, path.read_text())
    assert res["errors"] == [] and res["checked"] > 14, res
    assert res["found"] == [], _collisions(res["found"])
    root, page = many_runs
    res = collisions(root, page, "many.html")
    assert res["errors"] == [] and res["checked"] >= len(SYNTHETIC_VIEWS) + 6 + 9 + 3 + 8, res
    assert res["found"] == [], _collisions(res["found"])


@requires_chromium
def test_the_collision_check_sees_an_overlap(many_runs):
    """A y title on the second of two panels side by side (the report's old loss vs layers), and two K labels moved
    onto one another, are found."""
    root, page = many_runs
    bad = page.replace('"yaxis2":{"anchor":"x2",', '"yaxis2":{"title":{"text":"adjusted loss (log)"},"anchor":"x2",', 1)
    assert bad != page
    y1 = re.search(r'"text":"K=1"[^}]*?"y":([-0-9.e]+)', bad).group(1)  # K=2 of the same panel onto K=1
    bad = re.sub(r'("text":"K=2"[^}]*?"y":)[-0-9.e]+', lambda m: m.group(1) + y1, bad, count=1)
    found = collisions(root, bad, "bad.html")["found"]
    assert any("title" in f["a"] and "adjusted loss (log)" in f["a"] for f in found), _collisions(found)
    assert any({f["a"], f["b"]} == {'annotation "K=1"', 'annotation "K=2"'} for f in found), _collisions(found)


@requires_chromium
def test_screenshots_of_every_view(report, many_runs):
    """One PNG per view at 1400 px (the many-run views in each depth button's state), kept for a look."""
    root, path = report
    shots = screenshot_views(root, path.read_text(), screenshots_dir("quick"), states=False)
    assert len(shots) >= 14
    root, page = many_runs
    shots += screenshot_views(root, page, screenshots_dir("many-runs"), states=True)
    assert len(shots) >= 14 + 4 + 7 + 2 + 5
    for shot in shots:
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(data[16:20], "big") == WIDTH
        assert len(data) > 20_000, shot  # a drawn view, not a blank page
    print(f"screenshots: {shots[0].parent.parent}")


@requires_chromium
def test_screenshot(report):
    root, path = report
    shot = Path(os.environ.get("INTERP_REPORT_SCREENSHOT", root / "report.png"))
    shot.parent.mkdir(parents=True, exist_ok=True)
    res = chromium(
        root, "--virtual-time-budget=30000", f"--window-size={WIDTH},2400", f"--screenshot={shot}", path.as_uri()
    )
    assert shot.is_file(), res.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (WIDTH, 2400)
    assert len(data) > 50_000  # a drawn page, not a blank one
    print(f"screenshot: {shot}")
