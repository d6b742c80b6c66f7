"""Headless Chromium on a report: draw every figure, find colliding labels, screenshot one view at a time.

Shared by test_report_browser.py and usable by hand:

    python tests/report/report_browser.py figures/report.html figures/screenshots/zoo

writes one PNG per view (1400 px wide, every depth button's state of the views that have buttons) and prints the
collisions found: axis titles, annotations (subplot titles, curve labels), tick labels, legends and buttons of one
figure that overlap each other, reach into another panel's plotting area or leave the figure.
"""

from __future__ import annotations

import html as html_lib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

WIDTH = 1400  # px: the window the report is checked at
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

# After load: every figure in every state its buttons and menus give it, the pairs of boxes that collide.
COLLISIONS = r"""<script>
function __boxes(gd) {
  var svg = gd.querySelector('svg.main-svg').getBoundingClientRect(), out = [], areas = [];
  function add(kind, el, text) {
    var r = el.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) return;
    out.push({kind: kind, text: text, x0: r.left, x1: r.right, y0: r.top, y1: r.bottom});
  }
  gd.querySelectorAll('.infolayer > g').forEach(function (g) {
    var m = (g.getAttribute('class') || '').match(/^g-([xy]\d*)title$/);
    if (m) g.querySelectorAll('text').forEach(function (t) { if (t.textContent.trim()) add(m[1] + '-title', t,
      t.textContent); });
  });
  gd.querySelectorAll('g.annotation').forEach(function (a) {
    var t = a.querySelector('text');
    if (t && t.textContent.trim() && a.style.display !== 'none') add('annotation', t, t.textContent);
  });
  gd.querySelectorAll('g.xtick text, g.ytick text').forEach(function (t) {
    var layer = t.closest('[class*="axislayer"]'), id = layer ? layer.getAttribute('class').split('axislayer')[0] : '';
    if (t.textContent.trim()) add(id + '-tick', t, t.textContent);
  });
  gd.querySelectorAll('g.legend').forEach(function (l) { var b = l.querySelector('rect.bg'); if (b) add('legend', b,
    'legend'); });
  gd.querySelectorAll('g.updatemenu-button, g.updatemenu-header').forEach(function (b) {
    add('button', b, b.textContent); });
  gd.querySelectorAll('g.colorbar').forEach(function (c) { add('colorbar', c, 'colorbar'); });
  gd.querySelectorAll('.modebar').forEach(function (m) { add('modebar', m, 'mode bar'); });
  gd.querySelectorAll('.draglayer rect.nsewdrag').forEach(function (r) {
    var b = r.getBoundingClientRect();
    if (b.width > 4 && b.height > 4) areas.push({x0: b.left, x1: b.right, y0: b.top, y1: b.bottom});
  });
  return {svg: {x0: svg.left, x1: svg.right, y0: svg.top, y1: svg.bottom}, items: out, areas: areas};
}
function __hits(gd) {
  var b = __boxes(gd), hits = [], tol = 1;
  function inter(p, q) { return Math.min(p.x1, q.x1) - Math.max(p.x0, q.x0) > tol &&
                                Math.min(p.y1, q.y1) - Math.max(p.y0, q.y0) > tol; }
  function inside(x, y, q) { return q.x0 <= x && x <= q.x1 && q.y0 <= y && y <= q.y1; }
  var items = b.items;
  for (var i = 0; i < items.length; i++) {
    var p = items[i];
    if (p.x0 < b.svg.x0 - tol || p.x1 > b.svg.x1 + tol || p.y0 < b.svg.y0 - tol || p.y1 > b.svg.y1 + tol)
      hits.push([p.kind + ' "' + p.text + '"', 'the figure edge']);
    for (var j = i + 1; j < items.length; j++) {
      var q = items[j];
      if (p.kind === q.kind && /-tick$/.test(p.kind)) continue;  // one axis's own ticks: plotly spaces them
      if (inter(p, q)) hits.push([p.kind + ' "' + p.text + '"', q.kind + ' "' + q.text + '"']);
    }
    if (p.kind === 'legend' || p.kind === 'colorbar' || p.kind === 'modebar') continue;
    var cx = (p.x0 + p.x1) / 2, cy = (p.y0 + p.y1) / 2;
    b.areas.forEach(function (a, k) {  // a plotting area (an annotation may sit inside its own panel's)
      if (inter(p, a) && !(p.kind === 'annotation' && inside(cx, cy, a)))
        hits.push([p.kind + ' "' + p.text + '"', 'plot area ' + (k + 1)]);
    });
  }
  return hits;
}
function __states(gd) {
  var menus = (gd.layout.updatemenus || []), out = [];
  menus.forEach(function (m, i) { (m.buttons || []).forEach(function (b, k) {
    if (b.method === 'update') out.push({label: b.label, args: b.args, menu: i, index: k}); }); });
  return out;
}
window.addEventListener('load', function () { setTimeout(async function () {
  var found = [], checked = 0;
  var divs = Array.prototype.slice.call(document.querySelectorAll('.plotly-graph-div'));
  for (var d = 0; d < divs.length; d++) {
    var gd = divs[d], states = __states(gd);
    var report = function (state) { __hits(gd).forEach(function (h) {
      found.push({figure: gd.id, state: state, a: h[0], b: h[1]}); }); checked++; };
    report('default');
    for (var s = 0; s < states.length; s++) {
      await Plotly.update(gd, states[s].args[0], states[s].args[1] || {});
      report(states[s].label);
    }
  }
  var pre = document.createElement('pre'); pre.id = 'collisions';
  pre.textContent = JSON.stringify({checked: checked, found: found, errors: window.__errors});
  document.body.appendChild(pre);
}, 500); });
</script>"""

# The page of one card (`ID`) alone, at the report's own column width; `STATE` (a button label, or '') is applied.
ONE_VIEW = """<style>header, footer, section > h2, #summary { display: none !important; }
.card:not(#ID) { display: none !important; } #ID { display: block !important; }
section { margin: 0 !important; }</style>
<script>window.addEventListener('load', function () {
  var gd = document.getElementById('fig-ID'), label = STATE;
  if (!gd || !label) return;
  (gd.layout.updatemenus || []).forEach(function (m, i) { (m.buttons || []).forEach(function (b, k) {
    if (b.label !== label) return;
    var lay = Object.assign({}, b.args[1] || {}); lay['updatemenus[' + i + '].active'] = k;  // as a click shows it
    Plotly.update(gd, b.args[0], lay); }); });
});</script>"""


def chromium(tmp: Path, *args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    profile = tmp / "chromium-profile"
    profile.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=timeout
    )


def with_scripts(page: str, head: str = "", body: str = "") -> str:
    return page.replace("<head>", "<head>" + head, 1).replace("</body>", body + "</body>", 1)


def dump(tmp: Path, page: str, name: str, pre_id: str, height: int = 1000) -> tuple[dict, subprocess.CompletedProcess]:
    """Open `page` (written to tmp/name) at WIDTH px, dump the DOM and return the JSON of <pre id=pre_id>."""
    path = tmp / name
    path.write_text(page)
    res = chromium(
        tmp,
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=60000",
        f"--window-size={WIDTH},{height}",
        "--dump-dom",
        path.as_uri(),
    )
    found = re.search(rf'<pre id="{pre_id}">(.*?)</pre>', res.stdout, re.S)
    assert found, f"no {pre_id} in the DOM (chromium rc {res.returncode}): {res.stderr[-2000:]}"
    return json.loads(html_lib.unescape(found.group(1))), res


def collisions(tmp: Path, page: str, name: str = "collisions.html") -> dict:
    """{checked: figure states, found: [{figure, state, a, b}], errors} of every figure of `page` at WIDTH px."""
    out, _ = dump(tmp, with_scripts(page, CAPTURE, COLLISIONS), name, "collisions")
    return out


def card_ids(page: str) -> list[str]:
    return re.findall(r'<div class="card" id="([^"]+)"[^>]*>', page)  # a per-prior card also names its prior


def button_labels(page: str, card: str, skip_active: bool = False) -> list[str]:
    """The labels of the buttons and menu entries of a card's figure (from its Plotly JSON); `skip_active`: less the
    one each menu opens on (the figure's default state)."""
    part = page.split(f'<div class="card" id="{card}"', 1)[1].split('<div class="card"', 1)[0]
    at = part.find('"updatemenus":')
    if at < 0:
        return []
    try:
        menus, _ = json.JSONDecoder().raw_decode(part, at + len('"updatemenus":'))
    except ValueError:
        return []
    return [
        b["label"]
        for m in menus
        for i, b in enumerate(m.get("buttons", []))
        if b.get("method") == "update" and not (skip_active and i == m.get("active", 0))
    ]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-") or "x"


def screenshot_views(
    tmp: Path, page: str, out: Path, cards: list[str] | None = None, states: bool = True, height: int = 1250
) -> list[Path]:
    """One PNG per card (and per other button state where `states`) at WIDTH px, written to `out`; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    shots = []
    for card in cards or card_ids(page):
        labels = [""] + (button_labels(page, card, skip_active=True) if states else [])
        for label in labels:
            script = ONE_VIEW.replace("ID", card).replace("STATE", json.dumps(label))
            src = tmp / f"view-{card}.html"
            src.write_text(with_scripts(page, body=script))
            shot = out / (f"{card}.png" if not label else f"{card}--{_slug(label)}.png")
            chromium(
                tmp,
                "--virtual-time-budget=30000",
                f"--window-size={WIDTH},{height}",
                f"--screenshot={shot}",
                src.as_uri(),
            )
            if shot.is_file():
                shots.append(shot)
    return shots


def main(argv: list[str]) -> int:
    page_path, out = Path(argv[0]), Path(argv[1]).resolve()
    tmp = out / ".tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    page = page_path.read_text()
    res = collisions(tmp, page)
    print(f"{res['checked']} figure states checked, {len(res['found'])} collisions, errors: {res['errors']}")
    for f in res["found"]:
        print(f"  {f['figure']} [{f['state']}]: {f['a']}  x  {f['b']}")
    cards = argv[2:] or None
    if cards != ["-"]:  # '-': the collisions only
        for shot in screenshot_views(tmp, page, out, cards):
            print(shot)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
