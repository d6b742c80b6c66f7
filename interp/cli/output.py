"""Writing a command's files: every output path goes through `write` (atomic, "-" for stdout, one-line errors), and
rows of dicts become CSV or JSON text here. Terminal tables and loss formatting are interp.render's."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from interp.cli import ArgError

STDOUT = "-"  # a PATH of "-" (or a flag given without one, where it takes an optional PATH) writes to stdout


def write(target: str | Path, text: str) -> None:
    """`text` to the file `target` through interp.files.atomic_write_text (a reader never sees half a file), or to
    stdout for "-"; a file that cannot be written is an ArgError naming it."""
    from interp.files import atomic_write_text

    if str(target) == STDOUT:
        sys.stdout.write(text)
        return
    try:
        atomic_write_text(target, text)
    except OSError as err:
        raise ArgError(f"{target}: cannot write ({err.strerror or err})") from None


def json_text(doc, strict: bool = False, default=None) -> str:
    """A JSON document as written (indent 1, one trailing newline); `strict`: NaN and inf refused (a ValueError), not
    written as the non-standard NaN / Infinity; `default`: what other objects become (json.dumps's)."""
    return json.dumps(doc, indent=1, allow_nan=not strict, default=default) + "\n"


def csv_text(rows: Iterable[Mapping], fields: Sequence[str], common: Mapping | None = None) -> str:
    """Rows of dicts as CSV with the header `fields`, each row completed by `common` (the columns every row shares);
    None is written as an empty cell."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(fields), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({**(common or {}), **{k: ("" if v is None else v) for k, v in row.items()}})
    return buf.getvalue()
