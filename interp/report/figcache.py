"""The figure cache: the panels an earlier report drew, reused where the data and the code are the same.

With its per-run caches filled, a report still spent most of its time building about 130 Plotly figures (Plotly
validates every property it is given; experiments/results/bench_report.md). A panel is a pure function of the
ReportData and of interp's code, so it is stored under a digest of both, of its view and of the view's argument (the
prior of a per-prior view), in a file beside the HTML (`report.html` -> `report.panels.jsonl`), and drawn again only
when one of them changed. The file keeps the last report's panels only; it is a cache: unreadable, from another
format or from other code, it is ignored and rewritten.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path, PurePath
from typing import Callable

import plotly

import interp
from interp.files import CheckpointError, InterpError, atomic_write_text, read_regular_file
from interp.limits import MAX_TEXT_BYTES
from interp.report.data import ReportData
from interp.report.figures.base import Panel

FORMAT = 1
FIELDS = ("id", "title", "caption", "note", "group", "anchor")  # a Panel's fields besides its figure


def cache_path(html: str | Path) -> Path:
    """Where the figure cache of the report written to `html` lives."""
    html = Path(html)
    return html.with_name(html.stem + ".panels.jsonl")


@lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of interp's source files and Plotly's version: a panel drawn by other code is drawn again."""
    h = hashlib.sha256(f"{FORMAT} plotly {plotly.__version__}".encode())
    root = Path(interp.__file__).parent
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def data_digest(data: ReportData) -> str:
    """A digest of everything a view may read: the report's data as plain JSON (`_plain`), its timings and whether
    each record came from a cache left out (a record just measured and the same record read back draw alike)."""
    blob = json.dumps(_plain(replace(data, timings={})), sort_keys=True, allow_nan=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _plain(x):
    """`x` as JSON values: dataclasses and dicts as objects (a record's `cached` flag left out), tuples as lists,
    tensors and arrays as nested lists, paths as strings, anything else by its repr."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x) if f.name != "cached"}
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if x is None or isinstance(x, (str, bool, int, float)):
        return x
    if hasattr(x, "tolist"):  # a tensor or an array
        return _plain(x.tolist())
    return str(x) if isinstance(x, PurePath) else repr(x)


class FigureCache:
    """The panels of the last report written to one file, for the report of `data`: `panel(view, args, draw)`
    returns the stored panel of that view and argument (its figure a dict, as Plotly writes it) where the data and
    the code are the same, or draws, keeps and returns a new one; `save()` writes the panels of this report, and only
    those."""

    def __init__(self, path: str | Path, data: ReportData, log: Callable[[str], None] | None = None):
        self.path = Path(path)
        self.digest = data_digest(data)
        self.stored: dict[str, tuple[dict, str]] = self._load(log)
        self.used: dict[str, str] = {}  # key -> its line in the file
        self.hits = 0

    def _load(self, log) -> dict[str, tuple[dict, str]]:
        try:
            lines = read_regular_file(self.path, MAX_TEXT_BYTES, "figure cache").decode().splitlines()
            head = json.loads(lines[0]) if lines else {}
            if head.get("format") != FORMAT or head.get("code") != code_digest():
                return {}
            return {rec["key"]: (rec, line) for line in lines[1:] for rec in [json.loads(line)]}
        except CheckpointError as err:
            if self.path.exists() and log:
                log(f"{err}; drawing every figure again")
            return {}
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
            if log:
                log(f"{self.path}: not a figure cache of this interp; drawing every figure again")
            return {}

    def panel(self, view: str, args: tuple, draw: Callable[[], Panel]) -> Panel:
        key = hashlib.sha256(f"{code_digest()}\0{self.digest}\0{view}\0{args!r}".encode()).hexdigest()
        if key in self.stored:
            rec, self.used[key] = self.stored[key]
            self.hits += 1
            return Panel(**{f: rec[f] for f in FIELDS}, figure=rec["figure"])
        p = draw()
        meta = json.dumps({"key": key, **{f: getattr(p, f) for f in FIELDS}})
        fig = "null" if p.figure is None else p.figure.to_json()  # drawn now: a go.Figure
        self.used[key] = f'{meta[:-1]}, "figure": {fig}}}'
        return p

    def save(self) -> str | None:
        """Write the file; where it cannot be written (a directory in its place, no permission), the reason in one
        line instead of an error: the report stands without its cache."""
        head = json.dumps({"format": FORMAT, "code": code_digest()})
        try:
            atomic_write_text(self.path, "\n".join([head, *self.used.values()]) + "\n")
        except (OSError, InterpError) as err:
            return f"{self.path}: cannot write the figure cache ({getattr(err, 'strerror', None) or err})"
        return None
