"""Plain text for terminals and markdown files: the one way a loss is written, and aligned tables.

A loss estimate is written "mean ± s.e. (N seq.)" (`loss`; the count is left out only where a table's heading names
it for every cell), by interp eval, probe, drift, table, train's last line, the sweep's end table and the report's
summary alike; `table` lays out a terminal table (the first columns left-aligned, numbers right-aligned, a rule under
the header) and `markdown` a markdown one. Pure formatting: it imports nothing of interp, so any module may use it.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

DASH = "–"  # a value that does not exist (no paper cell, not evaluated)
NOISY = "○"  # a comparison the standard error cannot support (interp.evaluate.precise), left out


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def count(n: int) -> str:
    """100 000: thousands apart by a space."""
    return f"{n:,}".replace(",", " ")


def number(v: float | None, digits: int = 4) -> str:
    """A measured value: `digits` significant digits, 3 in exponent form below 1e-3; "–" for None, "nan"/"inf" as
    they are."""
    if v is None:
        return DASH
    if not _finite(v):
        return str(v)
    if v != 0 and abs(v) < 1e-3:
        return f"{v:.2e}"
    return f"{v:.{digits}g}"


def fixed(v: float | None) -> str:
    """A reference value (the paper's Table 1): 4 decimals, 3 significant digits in exponent form below 1e-3."""
    if v is None:
        return DASH
    if not _finite(v):
        return str(v)
    return f"{v:.2e}" if v != 0 and abs(v) < 1e-3 else f"{v:.4f}"


def stderr(v: float | None) -> str:
    """A standard error: 2 significant digits (exponent form below 1e-3)."""
    if v is None:
        return DASH
    if not _finite(v):
        return str(v)
    return f"{v:.1e}" if v != 0 and abs(v) < 1e-3 else f"{v:.2g}"


def loss(
    mean: float | None,
    se: float | None,
    n_seq: int | None = None,
    where: str = "",
    fmt: Callable[[float | None], str] = number,
) -> str:
    """The mean, its standard error and (given `n_seq`) the sequence count, with `where` (which sequences, e.g.
    "seed 1") beside the count: "0.2457 ± 0.0042 (100 000 seq.)". A missing mean is "–"."""
    if mean is None:
        return DASH
    text = fmt(mean) if se is None else f"{fmt(mean)} ± {stderr(se)}"
    about = ", ".join(part for part in (f"{count(n_seq)} seq." if n_seq is not None else "", where) if part)
    return f"{text} ({about})" if about else text


def ratio(mean: float | None, se: float | None, ref: float | None, supported: bool = True) -> str:
    """ours / ref ± its standard error, ref taken as exact ("0.98 ± 0.02"); "○" where the noise cannot support a ratio
    (not `supported`: interp.evaluate.precise), "–" without a ref."""
    if not ref or mean is None:
        return DASH
    if not supported:
        return NOISY
    return f"{mean / ref:.2f}" + ("" if se is None else f" ± {se / abs(ref):.2f}")


def table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """A terminal table: the first `left` columns left-aligned, the others right-aligned, a rule under the header."""
    cells = [[str(c) for c in header], *([str(c) for c in row] for row in rows)]
    widths = [max(len(r[i]) for r in cells if i < len(r)) for i in range(len(header))]

    def line(row: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths), *(line(r) for r in cells[1:])])


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table, one line per row: "| a | b |" under "| head | head |" and "|---|---|"."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])
