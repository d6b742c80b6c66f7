"""interp.probes.summary: ConstRR's λ is interp.tuning's (one value wherever it is printed), and the DIAG ablation is
forms.diag_ablation's with standard errors."""

from __future__ import annotations

import pytest

from interp import tuning
from interp.evalset import EvalSet
from interp.evaluate import adjusted_loss
from interp.probes.forms import diag_ablation, diag_projection
from interp.probes.summary import constrr_lambda, diag_ablation_estimates
from tests.helpers import random_full


def test_constrr_lambda_is_the_tuned_one():
    assert constrr_lambda("uniform:5", 10, 20) == tuning.tuned("uniform:5")["constrr"]["lam"]  # shipped
    # a prior interp does not ship: ConstRR alone, tuned on interp.tuning's own tuning set, gives what tuning records
    lam = constrr_lambda("uniform:1.5", 3, 3)
    assert not tuning.is_cached("uniform:1.5", 3, 3)  # nothing else was tuned for it
    assert lam == tuning.tuned("uniform:1.5", 3, 3)["constrr"]["lam"]
    lam_cov = constrr_lambda("uniform:1.5", 3, 3, ((2.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 0.5)))
    assert lam_cov != pytest.approx(lam, rel=1e-3)  # tuned on the inputs' own law


def test_diag_ablation_estimates_carry_standard_errors():
    model = random_full(d=4, n_layers=2, n_heads=1, scale=0.05)
    data = EvalSet("uniform:1", d=4, n=8, n_seq=600, seed=1)
    omega = diag_projection(model.P.detach(), model.Q.detach()).omega
    ours, theirs = diag_ablation_estimates(model, data, omega), diag_ablation(model, data, omega=omega)
    for key in ("base", "all", "delta_all", "n_seq"):
        assert getattr(ours, key) == pytest.approx(getattr(theirs, key), rel=1e-12, abs=1e-15)
    assert ours.per_layer == pytest.approx(theirs.per_layer, rel=1e-12)
    assert ours.base_stderr == pytest.approx(adjusted_loss(model.double(), data).stderr, rel=1e-9)
    assert ours.seed == 1 and len(ours.delta_per_layer_stderr) == 2
    assert 0 < ours.delta_all_stderr and all(se >= 0 for se in ours.delta_per_layer_stderr)
    back = type(ours).from_json(ours.to_json())
    assert back.to_json() == ours.to_json()
    old = {k: v for k, v in theirs.to_json().items()}  # a probe JSON written before the standard errors
    assert type(ours).from_json(old).base_stderr is None
