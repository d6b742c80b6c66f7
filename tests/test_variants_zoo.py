"""Golden pin of the former variants zoo (trained by the removed experiments/variants.py; its files load through
interp.load, interp.variants.from_legacy): every model of the shipped study, recomputed.

For each row of experiments/zoo/variants/summary.json: the file is the one measured (SHA-256), its adjusted loss on the
pin's 10 000 sequences and its per-layer linearity on the probe's 2 000 are what the study recorded, and the headline
holds (FULL, DIAG and the linear FFN at rounding on every layer, the ReLU FFN and softmax off it). A retrained file
or a change to the models or the probe has to regenerate the study on purpose:

    the family study replaces it: python experiments/family.py (docs/variants.md)
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from interp.evalset import EvalSet
from interp.evaluate import adjusted_loss
from interp.probes.linearity import VariantStudy, layer_linearity
from interp.run import load

ROOT = Path(__file__).resolve().parent.parent
STUDY = ROOT / "experiments" / "zoo" / "variants" / "summary.json"
REGENERATE = "the family study, python experiments/family.py (the former study's script is gone)"
LINEAR = {"full", "diag", "full_ctrl", "ffn_linear"}  # exact implicit linear models (Theorem 4.1)
ROUNDING = 1e-10

pytestmark = pytest.mark.skipif(not STUDY.is_file(), reason="the variants zoo is not shipped")


@pytest.fixture(scope="module")
def study() -> VariantStudy:
    return VariantStudy.from_json(json.loads(STUDY.read_text()))


def test_headline(study):
    by = {(r.name, r.layers): r for r in study.rows}
    for (name, L), r in by.items():
        worst = max(r.linearity.query_max[1:] + r.linearity.context_max[1:])
        if name in LINEAR:
            assert worst < ROUNDING, (name, L, worst)
        elif name in ("ffn_relu", "softmax"):
            assert max(r.linearity.query_median[1:]) > 1e-4, (name, L)


def test_every_row_recomputes(study):
    pin = EvalSet(study.eval["noise"], d=study.eval["d"], n=study.eval["n"], n_seq=10_000, seed=study.eval["seed"])
    probe = EvalSet(study.probe["noise"], d=study.probe["d"], n=study.probe["n"], n_seq=study.probe["n_seq"], seed=1)
    tokens = probe.draw().tokens
    for r in study.rows:
        path = ROOT / r.file
        assert hashlib.sha256(path.read_bytes()).hexdigest() == r.sha256, f"{r.file} changed; regenerate: {REGENERATE}"
        model = load(path)  # a variant file of the former second trainer too (interp.variants.from_legacy)
        loss = adjusted_loss(model, pin)
        assert loss.mean == pytest.approx(r.pin_loss.mean, rel=1e-4), f"{r.file}; regenerate: {REGENERATE}"
        got = layer_linearity(model, tokens).summary()
        for field in ("context_median", "query_median", "gap_median"):
            want, have = torch.tensor(getattr(r.linearity, field)), torch.tensor(getattr(got, field))
            if r.name in LINEAR:
                assert have.max() < ROUNDING, (r.file, field)
            else:
                torch.testing.assert_close(have, want, rtol=1e-6, atol=1e-12, msg=f"{r.file} {field}")
