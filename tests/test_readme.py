"""The README's Python API block runs as written, on the shipped zoo (issue: every API line the README shows works)."""

from __future__ import annotations

import re
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def _api_block() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python API") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README's Python API section has no python block"
    return match.group(1)


def test_the_readme_api_block_runs(monkeypatch):
    monkeypatch.chdir(ROOT)  # its paths are relative to the repository
    scope: dict = {}
    exec(compile(_api_block(), "README.md (Python API)", "exec"), scope)
    model, batch = scope["model"], scope["batch"]
    assert scope["y_hat"].shape == (1000,) and scope["per_layer"].shape == (model.cfg.n_layers + 1, 1000)
    # the token-by-token prediction after the last layer and the fast path: two float32 computations of one number
    torch.testing.assert_close(scope["per_layer"][-1], model(batch.tokens), rtol=1e-3, atol=1e-5)
    with torch.no_grad():  # the FULL model built from the DIAG model's materialised P, Q predicts the same
        torch.testing.assert_close(scope["handmade"](batch.tokens), model(batch.tokens), rtol=1e-3, atol=1e-5)
    assert scope["probe"].implied_lambda.median[-1] > 0  # the last layer acts as a ridge with a positive λ
