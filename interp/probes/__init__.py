"""Probes of trained linear transformers (Vladymyrov et al. 2024, §4): the implicit per-layer model of Theorem 4.1,
its comparison with known solvers, the paper's algebraic forms (DIAG ω's, Lemma 4.4, FULL fits),
the weight-space DIAG projection, the functional DIAG ablation, and GD++ versus ConstRR."""

from interp.probes.forms import (
    Ablation, DiagProjection, FormFits, Lemma44, const_ridge_fit, diag_ablation, diag_projection, effective_step,
    fit_form, fit_layer_maps, layer_omegas, layer_operator, lemma44, momentum, rescaling_factor, with_diag_layers,
)
from interp.probes.implicit import (
    ImplicitModel, as_float64, compare_solvers, gd_iterates, implicit_model, probe_cache, tune_gd_steps,
)
from interp.probes.drift import (
    DriftData, DriftRecord, FunctionalMetrics, WeightMetrics, drift_metrics, drift_trajectory, functional_metrics,
    register_directions, run_drift, scalar_identity_deviation, weight_metrics,
)
from interp.probes.summary import ProbeResult, probe_model

__all__ = [
    "Ablation", "DiagProjection", "DriftData", "DriftRecord", "FormFits", "FunctionalMetrics", "ImplicitModel",
    "Lemma44", "ProbeResult", "WeightMetrics", "as_float64", "compare_solvers", "const_ridge_fit", "diag_ablation",
    "diag_projection",
    "drift_metrics", "drift_trajectory", "effective_step", "fit_form", "fit_layer_maps", "functional_metrics",
    "gd_iterates", "implicit_model", "layer_omegas", "layer_operator", "lemma44", "momentum", "probe_cache",
    "probe_model", "register_directions", "rescaling_factor", "run_drift", "scalar_identity_deviation",
    "tune_gd_steps", "weight_metrics", "with_diag_layers",
]
