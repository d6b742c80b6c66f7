"""Plotly figures of the report: one short function per view, registered with its section, title and caption.

`base` holds the registry (`@view`, REGISTRY, sections) and the helpers every view shares; the views register on
import, in the order of the modules imported here, which is the order of the report's sections and panels:

- `paper`: the paper's views (Vladymyrov et al. 2024, Table 1 and Figures 1–7): loss vs layers, Table 1 against
  ours, per-σ profiles (per prior, and of the 7-layer models on every prior), Pˡ / Qˡ heatmaps, prediction after K
  layers;
- `probes`: interp's own: ω per layer, implicit wˡ against solvers, momentum ‖uˡ‖, implied ridge λ, rescaling and
  effective step, the §5.3 layer schedule, FULL-to-DIAG fits;
- `theorem51`: Theorem 5.1 on the GD++ models at σ = 0: loss after K layers, the preconditioning map per layer;
- `variants`: the variants study (FFN, softmax and kernel attention) beside the models: each layer's distance from
  Theorem 4.1's implicit linear model, loss vs layers;
- `family`: the linear-attention family study beside the models: loss vs layers per variant, each layer's readout gap,
  the gates' token weights against position and σ, each variant against FULL by σ, its implied ridge λ (of the last
  layer and of each), each layer skipped in turn;
- `training`: training and drift curves.
"""

from __future__ import annotations

from interp.report.figures.base import REGISTRY, SECTIONS, Note, Panel, View, sections, view
from interp.report.figures.paper import (
    after_k_layers,
    heatmaps,
    last_layer_profiles,
    loss_vs_layers,
    sigma_profiles,
    table1,
)
from interp.report.figures.probes import (
    SCHEDULE_CODE,
    SCHEDULE_TEXT,
    full_fits,
    implied_lambda,
    momentum,
    omegas,
    rescaling_and_step,
    schedule,
    solvers,
)
from interp.report.figures.theorem51 import theorem51
from interp.report.figures.variants import variants_linearity, variants_loss

# isort: split
# (the family views after the variants study's, in the same section)
from interp.report.figures.family import (
    family_by_sigma,
    family_gates,
    family_lambda,
    family_lambda_layers,
    family_loss,
    family_readout,
    family_skip,
    family_weights,
)

# isort: split
# (the training views register last: their section is the report's last)
from interp.report.figures.training import drift, training_curves

__all__ = [
    "REGISTRY",
    "SCHEDULE_CODE",
    "SCHEDULE_TEXT",
    "SECTIONS",
    "Note",
    "Panel",
    "View",
    "after_k_layers",
    "drift",
    "family_by_sigma",
    "family_gates",
    "family_lambda",
    "family_lambda_layers",
    "family_loss",
    "family_readout",
    "family_skip",
    "family_weights",
    "full_fits",
    "heatmaps",
    "implied_lambda",
    "last_layer_profiles",
    "loss_vs_layers",
    "momentum",
    "omegas",
    "rescaling_and_step",
    "schedule",
    "sections",
    "sigma_profiles",
    "solvers",
    "table1",
    "theorem51",
    "training_curves",
    "variants_linearity",
    "variants_loss",
    "view",
]
