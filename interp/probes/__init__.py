"""Probes of trained linear transformers (PAPER.md §3): the implicit per-layer model of Theorem 4.1,
its comparison with known solvers, the paper's algebraic forms (DIAG ω's, Lemma 4.4, FULL fits),
the weight-space DIAG projection, the functional DIAG ablation, and GD++ versus ConstRR."""

from interp.probes.forms import (
    DiagProjection, FormFits, Lemma44, const_ridge_fit, diag_ablation, diag_projection, effective_step,
    fit_form, fit_layer_maps, layer_omegas, layer_operator, lemma44, momentum, rescaling_factor, with_diag_layers,
)
from interp.probes.implicit import (
    Context, ImplicitModel, as_float64, compare_solvers, gd_iterates, implicit_model, implied_lambda, probe_cache,
    tune_gd_steps,
)
from interp.probes.drift import (
    DriftData, drift_metrics, drift_trajectory, functional_metrics, register_directions, run_drift,
    scalar_identity_deviation, weight_metrics,
)
from interp.probes.summary import probe_model

__all__ = [
    "Context", "DiagProjection", "DriftData", "drift_metrics", "drift_trajectory", "functional_metrics",
    "register_directions", "run_drift", "scalar_identity_deviation", "weight_metrics", "FormFits", "ImplicitModel", "Lemma44", "as_float64", "compare_solvers",
    "const_ridge_fit", "diag_ablation", "diag_projection", "effective_step", "fit_form", "fit_layer_maps",
    "gd_iterates", "implicit_model", "implied_lambda", "layer_omegas", "layer_operator", "lemma44", "momentum",
    "probe_cache", "probe_model", "rescaling_factor", "tune_gd_steps", "with_diag_layers",
]
