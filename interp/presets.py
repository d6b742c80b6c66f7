"""The training presets: `fast` (one-cycle, tuned by depth) and `paper` (Adam 1e-4 constant, 200k steps), and
`resolve`, which fills a TrainConfig's steps / lr / schedule / stress from its preset where they were left at None."""

from __future__ import annotations

import dataclasses

from interp import params
from interp.config import TrainConfig
from interp.files import InvalidArgument
from interp.tasks import as_prior

# Peak learning rate of the fast one-cycle preset by depth: the stable peak falls with depth
# (measured with a prototype: 2 layers at 1e-2 fine, 4 layers diverged at 5e-3 but trained at 2e-3).
FAST_PEAK_LR = {1: 1e-2, 2: 1e-2, 3: 4e-3, 4: 2e-3, 5: 1.5e-3, 6: 1e-3}
# DIAG / GD++ (4 scalars per head and layer) plateau at 4 layers with 2e-3 (adjusted loss 0.11, about
# the 3-layer value) and train to 0.06 with 5e-3: measured in experiments/results/presets.md.
# From 6 layers DIAG / GD++ need a higher peak: at 7 layers 8e-3 against 2e-3 gave DIAG 0.0023 against 0.0081 on
# uniform:1 (paper 0.002), GD++ 0.0088 against 0.0134 (paper 0.009), and the same 0.0498 on uniform:5 (10⁵
# sequences; experiments/results/presets.md, session 8). Deeper models take the 7-layer value.
FAST_PEAK_LR_DIAG = {**FAST_PEAK_LR, 4: 5e-3, 5: 3e-3, 6: 8e-3, 7: 8e-3}
FAST_PEAK_LRS = {"full": FAST_PEAK_LR, "diag": FAST_PEAK_LR_DIAG, "gdpp": FAST_PEAK_LR_DIAG}  # param → its table
FAST_STEPS_PER_LAYER = 2000
# FULL models from 5 layers on diverge on rare contexts (XᵀX's largest eigenvalue ≳ 75 against a median of 49, or a
# large Σ y²) in 8 of 14 runs, measured on 10⁶ sequences. A stressed proposal (part of each batch drawn at 1.25-1.4×
# the size, importance-weighted: interp.tasks.stressed_tasks; TrainConfig.stress_scale) tames them
# (experiments/results/presets.md, session 4); FULL from 4 layers now takes FAST_LONG's below.
FAST_STRESS_SCALE = 1.4  # the low-noise 3-layer stress's scale (FAST_LOW_NOISE), and the paper preset's unused one
# FULL-7 keeps learning past 2000·L steps: four times the steps with an eighth of each batch stressed at 1.25× met
# the paper's 7-layer FULL values on uniform:5 (0.0465 against 0.047) and {1,3} (0.0098 against 0.010) with no
# blow-up in 10⁶ sequences, where the preset gave 0.0499 and 0.0130 (experiments/results/presets.md, session 4).
# From 4 layers FULL takes the same recipe, 8 000 steps a layer: on 10⁶ sequences the 2 000·L-step preset left FULL-6
# on uniform:7 at 0.0700 (paper 0.059) and FULL-5 on {1,3} at 0.0184 (0.016), and FULL-4 on {1,3} blew up (4.36, a
# worst sequence of 3.9·10⁶); the long recipe gave 0.0572, 0.0143 and 0.0312 (0.032), worst sequences 25-36
# (experiments/results/presets.md, session 12). FULL-3 takes it too: at 6 000 steps every FULL-3 at σ_max = 5-6 blew up
# 2-3 times in 10⁶ sequences (session 16); with the long recipe seed 0 on uniform:6 had none in 5·10⁶ (12 before)
# and its mean went from 0.121 to 0.114 (paper 0.124), on uniform:7 0.140 → 0.119 (13 → 3); at σ_max = 4-5 about one
# blow-up per 10⁶ remains in three of four runs (5-6 in 5·10⁶): presets.md, session 20.
FAST_LONG_FROM = {"full": 3}  # param → from this many layers: FAST_LONG_STEPS_PER_LAYER steps and FAST_LONG's stress
FAST_LONG_STEPS_PER_LAYER = 8000
FAST_LONG = dict(stress=0.125, stress_scale=1.25)
# FULL-3 stresses a quarter of each batch on every prior: at an eighth its σ_max = 4-7 and {1,3,5} runs still blew up
# on contexts with a large λ_max(XᵀX) and Σ y²; at a quarter, over six seed/prior pairs, the blow-ups in 5·10⁶
# sequences fell from 20 to 7 (uniform:4 seed 1 6 → 1, its mean 0.104 → 0.088), at a cost of 0.2-1.2% of the mean
# where there were few (presets.md, sessions 21 and 22). Until then only σ_max ≤ 2 gave FULL-3 a quarter.
FAST_LONG_BY_DEPTH = {("full", 3): dict(stress=0.25)}  # (param, L) → overrides of FAST_LONG
# At low noise (σ ≤ 2) 3-layer FULL and DIAG models take a large step that diverges on rare large contexts: on
# uniform:1 the mean was carried by a few sequences (DIAG-3 0.065, FULL-3 0.084 against the paper's 0.015, worst
# sequences 3·10³-4·10³ of 10⁵); a quarter of each batch stressed at 1.4× gave 0.0149 and 0.0151 with no blow-up
# (presets.md, session 8). DIAG-3 takes it on priors whose largest σ is at most LOW_NOISE; FULL-3 takes a quarter on
# every prior (FAST_LONG_BY_DEPTH) at the long recipe's 1.25 (uniform:2 seed 0: 0.0460 with no blow-up in 5·10⁶
# sequences, against 0.0464 at 6 000 steps: presets.md, session 20).
LOW_NOISE = 2.0
FAST_LOW_NOISE = {("diag", 3): dict(stress=0.25)}  # (param, L) → overrides
# Noise-free priors (σ_max = 0): Adam alone plateaus. GD++-5 in float64 stops at a training ½·MSE of 1e-4 from step
# ~7 000 (paper 1.14e-7), its mean carried by rare small-λ_min(XᵀX) contexts; four rounds of full-batch L-BFGS after
# Adam (interp.train.polish, 65 536 fresh sequences a round; 16 384 over-fitted a batch's tail) took it to 1.46e-7
# ± 0.47e-7 (median 8.3e-9, worst 4.5e-3) on 10⁵ sequences, in 357 s: experiments/results/presets.md, session 10.
# float64 for the training and the polish (whose line search compares losses of 1e-7…1e-12); evaluated in float32,
# the same GD++-5 weights give the same 1.46e-7, so float32 is not what limits the 5-layer cell (session 10).
NOISE_FREE_POLISH = 4  # rounds (TrainConfig.polish)
# From 4 layers on the noise-free prior, DIAG and FULL train as GD++ (TrainConfig.start_as: GD++'s preset and its
# polish, then the model embedded exactly in their own parameterization). From their own init Adam leaves them in a
# poor basin: DIAG-5 3.4e-4 and FULL-4 0.015 against GD++-5's 1.5e-7 (paper: 1.8e-7 and 1.6e-4), and FULL-5 stood at a
# training loss of 0.74 at step 7 550. Polished in DIAG's own weights after the embedding, GD++-5's Adam model went only
# to 2.8e-5 (its ω_xy, ω_yy blow up on the stressed check batches), polished as GD++ to 1.5e-7; and polishing GD++-5's
# polished solution again in DIAG or FULL kept it at 1.5-1.6e-7 (presets.md, session 11). The paper has the three
# within 1.6× of each other from 4 layers at σ_max = 0, while at 2-3 layers DIAG and FULL beat GD++ (0.265 against
# 0.341 at 2) and train from their own init.
NOISE_FREE_NEST = ("gdpp", 4)  # (the parameterization Adam trains, from this many layers)
# The polish fits 65 536 sequences a round, and a 4-7-layer GD++'s mean over 10⁶ noise-free sequences is carried by
# one to ten contexts that no such batch holds (a λ_max(XᵀX) near its 10⁻⁶ quantile, where s^L diverges; a small
# λ_min, where the iteration has not converged): the grid's best seeds read 1.8×, 5×, 4.5× and 32× the paper at 4, 5,
# 6 and 7 layers. The spectral polish (interp.train.spectral_polish) fits GD++'s exact loss per eigenvalue over
# contexts drawn at five scales from 0.6 to 1.45 and importance-weighted (interp.noise_free.spectral_proposal), so
# every round sees those tails: presets.md, session 26.
SPECTRAL_POLISH = 3  # rounds (TrainConfig.spectral_polish), on GD++'s Adam phase (DIAG and FULL: NOISE_FREE_NEST)
# From 5 layers: at 4 the loss it finds (1.2e-4 against 1.9e-4 on a check of 10⁶ contexts) is the fragile basin of
# session 11, which blew up on a fresh 10⁶ (one context at 6·10¹³): presets.md, session 26.
SPECTRAL_POLISH_FROM = 5
# Noisy priors, 3- and 4-layer DIAG: the y→y term compounds through the layers (the prediction grows like (Σ y²)^13 past
# a threshold), so contexts with σ near σ_max and a large Σ y² (beyond its 10⁻⁴ quantile) blow up; Adam's guarded loss
# log-compresses them and never learns them away. On 10⁶ sequences 5 of 8 such runs had a worst sequence of 3.5·10³ to
# 1.4·10⁸ (DIAG-3 on uniform:7 1.16 against the paper's 0.123). The noise-free recipe's polish (run in float64; in
# float32 it left them unchanged) tamed all 8 (worst 6-81) and met the paper where the run's basin allowed it (DIAG-3
# uniform:7 0.1241, uniform:6 0.1209, DIAG-4 uniform:1 0.0056); where a run had no blow-up it costs 0-10% of the mean
# (DIAG-3 uniform:1 0.0149 → 0.0164 on the grid's 18 retrained seed-0 runs). Training the whole run in
# float64 instead moved Adam to other basins (DIAG-4 on {1,3,5} 0.064 → 0.092). The polish did nothing for DIAG-5 and
# made FULL-3 on uniform:6 worse (0.124 → 0.143): presets.md, session 13.
NOISY_POLISH = {("diag", 3), ("diag", 4)}  # (param, L) → NOISE_FREE_POLISH rounds on a noisy prior, the run in float32
# That polish fits the bulk and leaves the rarest large-Σ y² contexts to chance: after it, 3-layer DIAG at σ_max = 5-6
# still blew up 2.0-2.8 times in 10⁶ sequences (presets.md, session 16). With a tail term (interp.train.polish: κ ×
# ½·MSE of contexts at σ near σ_max with labels 1.35× their size) at κ = 1e-3, DIAG-3 uniform:6 seed 0 retrained had
# none in 5·10⁶ (worst 264; 10 before), its mean over those 5·10⁶ fell from 0.138 to 0.128, and on 10⁶ sequences
# without a blow-up it rose from 0.120 to 0.127 (paper 0.121): presets.md, session 17.
NOISY_POLISH_TAIL = 1e-3  # TrainConfig.polish_tail of the NOISY_POLISH cells on a noisy prior
# Noisy priors, 3- and 4-layer DIAG: at the preset's peaks (4e-3 and 5e-3) seed 0 ended on 4 of 9 priors at 3 layers
# (uniform:2, 3, {1,3}; uniform:3's seed 1 too) and 4 of 9 at 4 layers (uniform:3, 5, 6, {1,3}) in a basin where early
# layers make no y→x step (p_y ≈ 0, so ω_yx = ω_yy ≈ 0 there) and the last layer has a large ω_yy. The loss is a
# narrow valley in those p_y (DIAG-3 on uniform:3: ½·MSE 1.00 at p_y = -3·10⁻⁴, 1.70 at -10⁻³, 12 at -3·10⁻³) though its
# gradient there is 20-30, so Adam stays in it. At 1e-2 every such run left it (DIAG-3 uniform:3 1.48 → 1.01 of the
# paper, {1,3} 1.55 → 1.03; DIAG-4 {1,3} 3.12 → 1.04, uniform:5 1.56 → 1.07, on 10⁵ sequences), and the runs already in
# the good basin ended at the same loss to about four digits (DIAG-4 uniform:1 0.00613 → 0.00651, within its error
# twice over): presets.md, session 14. The noise-free prior, not measured, keeps the table's peaks.
NOISY_PEAK_LR = {("diag", 3): 1e-2, ("diag", 4): 1e-2}  # (param, L) → the fast preset's peak lr on a noisy prior


def resolve(cfg: TrainConfig) -> TrainConfig:
    """Fill start_as / steps / lr / schedule / stress / polish / polish_tail / spectral_polish from the preset where
    they were left at None: by architecture (start_as's, the one Adam trains) and depth, and for the fast preset also
    by the prior's noise level (FAST_LOW_NOISE; on a noise-free prior the polish and float64, NOISE_FREE_POLISH,
    from 4 layers DIAG and FULL start as GD++, NOISE_FREE_NEST, and from 5 layers GD++'s Adam phase ends with the
    spectral polish, SPECTRAL_POLISH; on a noisy prior 3- and 4-layer DIAG take the polish too, NOISY_POLISH, with its
    tail term, NOISY_POLISH_TAIL, and a higher peak lr, NOISY_PEAK_LR)."""
    L = cfg.model.n_layers
    sigma_max = max(as_prior(cfg.noise).values)
    noise_free = sigma_max == 0
    if cfg.start_as is None:  # the run's own parameterization, or on a noise-free prior GD++ (NOISE_FREE_NEST)
        nest, depth = NOISE_FREE_NEST
        nested = cfg.preset == "fast" and noise_free and cfg.init is None and L >= depth and cfg.model.is_lsa
        start_as = nest if nested and params.nests(cfg.model.param, nest) else cfg.model.param
        cfg = dataclasses.replace(cfg, start_as=start_as)
    param = cfg.start_as  # what Adam trains: its preset's steps, lr and stress
    if cfg.preset == "paper":
        defaults = dict(
            steps=200_000,
            lr=1e-4,
            schedule="constant",
            stress=0.0,
            stress_scale=FAST_STRESS_SCALE,
            polish=0,
            polish_tail=0.0,
            spectral_polish=0,
        )
    elif cfg.preset == "fast":
        table = FAST_PEAK_LRS[param]
        defaults = dict(
            steps=FAST_STEPS_PER_LAYER * max(L, 1),
            lr=table.get(L, table[6]),
            schedule="onecycle",
            stress=0.0,
            stress_scale=FAST_STRESS_SCALE,
            polish=0,
            polish_tail=0.0,
            spectral_polish=0,
        )
        if L >= FAST_LONG_FROM.get(param, float("inf")):
            defaults.update(steps=FAST_LONG_STEPS_PER_LAYER * L, **FAST_LONG)
            defaults.update(FAST_LONG_BY_DEPTH.get((param, L), {}))
        if sigma_max <= LOW_NOISE:
            defaults.update(FAST_LOW_NOISE.get((param, L), {}))
        if not noise_free and (param, L) in NOISY_PEAK_LR:
            defaults.update(lr=NOISY_PEAK_LR[param, L])
        if not noise_free and (param, L) in NOISY_POLISH and cfg.polish is None:
            defaults.update(polish=NOISE_FREE_POLISH)  # Adam in float32 as before; the polish runs in float64
            if cfg.polish_tail is None:
                defaults.update(polish_tail=NOISY_POLISH_TAIL)
        if noise_free and param == "gdpp" and L >= SPECTRAL_POLISH_FROM and cfg.x_cov is None:
            defaults.update(spectral_polish=SPECTRAL_POLISH)
        if noise_free and cfg.polish is None:  # noise-free: float64 and the polish
            defaults.update(polish=NOISE_FREE_POLISH)
            if cfg.model.dtype == "float32":  # the default (a float32 run on this prior: pass --polish too)
                cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, dtype="float64"))
    else:
        raise InvalidArgument(f"unknown preset {cfg.preset!r} (fast or paper)")
    fill = {k: v for k, v in defaults.items() if getattr(cfg, k) is None}
    cfg = dataclasses.replace(cfg, **fill)
    if cfg.schedule not in ("onecycle", "constant"):
        raise InvalidArgument(f"unknown schedule {cfg.schedule!r} (onecycle or constant)")
    if cfg.guard not in ("robust", "none"):
        raise InvalidArgument(f"unknown guard {cfg.guard!r} (robust or none)")
    if cfg.spectral_polish > 0 and cfg.start_as != "gdpp":
        raise InvalidArgument(
            f"spectral_polish polishes a GD++ model; this run's Adam phase trains {cfg.start_as} "
            "(--arch gdpp, or --start-as gdpp for diag and full)"
        )
    if cfg.polish_tail > 0 and cfg.polish == 0:
        raise InvalidArgument(f"polish_tail {cfg.polish_tail:g} needs polish rounds (--polish), got none")
    if cfg.steps < 1 or cfg.batch < 1 or cfg.n < 1 or not cfg.lr > 0:
        raise InvalidArgument("steps, batch and n must be >= 1 and lr > 0")
    as_prior(cfg.noise)
    return cfg
