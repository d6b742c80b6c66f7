"""`interp probe`: every probe of interp.probes on checkpoints or run directories, as one JSON file."""

from __future__ import annotations

import math
import sys

from interp.cli import MAX_SEQ, ArgError, check_output, existing_path, noise_spec, note_training, positive_int
from interp.cli.flags import alias
from interp.limits import MAX_BATCH_ELEMENTS, MAX_N

HELP = "read the implicit per-layer model and fit it to the paper's forms"  # listed by `interp --help`


def add(sub) -> None:
    p = sub.add_parser(
        "probe",
        help=HELP,
        description=(
            "Reads, through the model's hooks, the implicit linear model of every layer (Theorem 4.1), compares it "
            "with OLS / ridge / GD, fits the layers to the paper's algebraic forms and writes one JSON file "
            "(schema: docs/probe_schema.md); prints a short per-layer table per model and its layer schedule (§5.3: "
            "each layer's update split into x<-x, x<-y, y<-x, y<-y blocks, sized, and ablated one at a time). A run "
            "trained on x ~ N(0, Λ) (interp train --x-cov) is probed on inputs from N(0, Λ), one trained with --quad "
            "on its quadratic task. A model of the linear-attention family (--attention, --mlp) gets the one readout "
            "every model has instead: the adjusted loss after each layer, w^l = dŷ^l/dx_t and its linearity, Theorem "
            "4.2's cosine, the token weights of decays and gates, DeltaNet against LMS and RLS."
        ),
    )
    p.add_argument(
        "checkpoints",
        nargs="+",
        type=existing_path,
        metavar="CKPT",
        help="checkpoint files or run directories (a run directory means its last checkpoint)",
    )
    p.add_argument(
        "--noise",
        type=noise_spec,
        help="noise prior of the probe sequences (default: the prior each checkpoint was trained on)",
    )
    p.add_argument("--out", "--json", dest="out", required=True, metavar="PATH", help="JSON file to write")
    p.add_argument(
        "--probe-seq", type=positive_int("--probe-seq"), default=10_000, help="probe sequences (default 10 000)"
    )
    alias(p, "--n-seq", "probe_seq", positive_int("--n-seq"))
    p.add_argument("--n", type=positive_int("--n", MAX_N), help="context length (default: the run's, else 20)")
    p.add_argument("--chunk", type=positive_int("--chunk"), default=1_000, help="sequences per chunk (default 1 000)")
    p.add_argument(
        "--fit-seq",
        type=positive_int("--fit-seq"),
        default=4_096,
        help="other sequences (disjoint) for the form fits, the GD-step and constant-λ tuning (default 4 096)",
    )
    p.add_argument(
        "--ablation-seq",
        type=int,
        default=20_000,
        help="sequences for the DIAG ablation's and the layer schedule's adjusted loss, 0 to skip (default 20 000)",
    )
    p.add_argument(
        "--eval-seed",
        type=int,
        default=0,
        help="seed of the probe sequences (default 0); the fits' and ablations' derive from it (docs/probe_schema.md)",
    )
    alias(p, "--seed", "eval_seed", int)
    p.add_argument("--threads", type=positive_int("--threads", 1024), default=1, help="torch CPU threads (default 1)")
    p.set_defaults(func=cmd_probe)


def cmd_probe(args) -> int:
    import torch

    from interp.evalset import EvalSet
    from interp.probes import probe_model
    from interp.probes.summary import SCHEMA_VERSION
    from interp.run import resolve_model

    if not 0 <= args.ablation_seq <= MAX_SEQ:
        raise ArgError(f"--ablation-seq must be in [0, {MAX_SEQ}], got {args.ablation_seq}")
    out = check_output(args.out, "--out", args.checkpoints)
    note_training(args.checkpoints, "interp probe")
    torch.set_num_threads(args.threads)
    models = []
    for path in args.checkpoints:
        m = resolve_model(path)  # the model, its step and what it was trained on (its run's config, if any)
        model = m.model
        noise = args.noise or m.noise
        if noise is None:
            raise ArgError(f"--noise: required ({path} does not record its training prior)")
        n = args.n or m.n or 20
        x_cov = m.x_cov  # a run trained on x ~ N(0, Λ) is probed on such inputs
        if args.chunk * (n + 1) * model.cfg.d_model > MAX_BATCH_ELEMENTS:
            raise ArgError(
                f"--chunk: {args.chunk} sequences of {n + 1} x {model.cfg.d_model} tokens exceed "
                f"{MAX_BATCH_ELEMENTS} entries per chunk; lower --chunk"
            )
        if n + 1 < model.cfg.d + 1:
            raise ArgError(f"--n: {n} is too short for d = {model.cfg.d} (least squares needs n >= d)")
        if not model.cfg.is_lsa and n < model.cfg.d + 1:  # the linearity fit: one token map from the n context tokens
            raise ArgError(f"--n: {n} is too short for d = {model.cfg.d} (the family's linearity fit needs n >= d + 1)")
        quad = 0.0 if m.config is None else m.config.quad  # a --quad run: probed on its own task
        data = EvalSet(
            noise,
            d=model.cfg.d,
            n=n,
            n_seq=args.probe_seq,
            seed=args.eval_seed,
            chunk=args.chunk,
            x_cov=x_cov,
            quad=quad,
        )
        if m.note:  # every check passed: what is not known of the model is said before the work
            print(f"interp probe: note: {m.note}", file=sys.stderr)
        if not model.cfg.is_lsa:  # Theorem 4.1's recursion and the DIAG fits read P, Q: the family's one readout
            models.append(_family_record(str(path), m, model, data))
            print_family_table(str(path), m.step, models[-1])
            continue
        rec = probe_model(model, data, fit_seq=args.fit_seq, ablation_seq=args.ablation_seq)
        models.append(
            {
                "path": str(path),
                "checkpoint": str(m.checkpoint),
                "step": m.step,
                "trained_noise": m.noise,
                **({} if x_cov is None else {"x_cov": data.describe()["x_cov"]}),
                **rec.to_json(),
            }
        )
        print_table(str(path), m.step, rec, x_cov)
    argv = getattr(args, "argv", None) or sys.argv[1:]
    doc = {"format": "interp-probe", "format_version": SCHEMA_VERSION, "command": ["interp", *argv], "models": models}
    from interp.cli.output import json_text, write

    write(out, json_text(doc, strict=True))
    print(f"wrote {out}")
    return 0


def _family_record(path: str, m, model, data) -> dict:
    """The probe record of a model of the linear-attention family (interp.variants): the adjusted loss after each
    layer and the one readout every model has (interp.probes.readout.readout_summary, docs/probe_schema.md)."""
    from interp.evaluate import per_layer_loss, skipped_layer_loss
    from interp.probes.readout import readout_summary

    batch = data.draw()
    return {
        "path": path,
        "checkpoint": str(m.checkpoint),
        "step": m.step,
        "trained_noise": m.noise,
        **data.describe(),
        "family": model.cfg.family_label,
        "attention": model.cfg.attention,
        "mlp": model.cfg.mlp,
        "n_layers": model.cfg.n_layers,
        "n_heads": model.cfg.n_heads,
        "loss_per_layer": [e.to_dict() for e in per_layer_loss(model, data)],
        "loss_skipped": [e.to_json() for e in skipped_layer_loss(model, data)],  # a blown-up mean: null
        "readout": readout_summary(model, batch.tokens, batch.sigma),
    }


def print_family_table(path: str, step, rec: dict) -> None:
    """One row per layer l = 1..L of a family model's probe record (`_family_record`)."""
    from interp.render import count, table

    r, lin = rec["readout"], rec["readout"]["linearity"]
    task = f"; quadratic task, labels + {rec['quad']:g}·(x(1)² − 1)" if rec.get("quad") else ""
    print(
        f"\n{path}: {rec['family']} L={rec['n_layers']} H={rec['n_heads']} step {step}, {count(rec['n_seq'])} "
        f"sequences of {rec['noise']} (seed {rec['seed']}{task})"
    )
    head = ["l", "adjusted loss", "l skipped", "query lin. resid", "readout gap", "Thm 4.2 |cos|"]
    weights, ffn, lam = r.get("token_weights"), r.get("ffn_fit"), r.get("implied_lambda")
    if lam:
        head += ["implied λ"]
    if weights:
        head += ["ω fit resid", "ω_1", "ω_n"]
    if ffn:
        head += ["FFN lin. resid", "FFN y→y", "FFN writes"]
    rows = []
    for l in range(1, rec["n_layers"] + 1):
        row = [
            str(l),
            _f(rec["loss_per_layer"][l]["mean"], ".4g"),
            _skipped(rec["loss_skipped"][l - 1]["mean"]),
            _f(lin["query_median"][l], ".1e"),
            _f(r["readout_gap_median"][l], ".1e"),
            _f(r["theorem42_cosine_median"][l], ".3f"),
        ]
        if lam:
            row.append(_f(lam["median"][l], ".3g"))
        if weights:
            pos = weights["by_position"][l - 1]
            row += [_f(weights["residual"][l - 1], ".2e"), _f(pos[0]), _f(pos[-1])]
        if ffn:
            row += [_f(ffn["query_residual"][l - 1], ".2g"), _f(ffn["query_scale"][l - 1], "+.3f")]
            row.append(_f(ffn["query_norm"][l - 1], ".2g"))
        rows.append(row)
    print(table(head, rows, left=0))
    if lam:
        by = ", ".join(f"{v:.3g} at σ ≈ {s:.2g}" for v, s in zip(lam["median_by_sigma"][-1], lam["sigma"]) if v)
        print(f"implied ridge λ of the last layer by σ (the Bayes ridge: λ = σ²): {by}")
    if "delta_vs_online" in r:
        dv = r["delta_vs_online"]
        print(
            "DeltaNet's w^l against online solvers, median relative error per layer: LMS "
            + ", ".join(f"{e:.2g} (η {eta:.2g})" for e, eta in zip(dv["lms_error"], dv["eta"]))
            + "; RLS "
            + ", ".join(f"{e:.2g} (λ {lam:.2g})" for e, lam in zip(dv["rls_error"], dv["lam"]))
            + "; OLS "
            + ", ".join(f"{e:.2g}" for e in dv["ols_error"])
        )


def _skipped(mean) -> str:
    """The adjusted loss with a layer skipped: ∞ where it blew up (a non-finite mean, null in the record)."""
    return "∞" if mean is None or not math.isfinite(mean) else format(mean, ".4g")


def _f(x, fmt: str = ".3g") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def print_table(path: str, step, rec, x_cov=None) -> None:
    """One row per layer l = 1..L of a ProbeResult (its sequences' inputs x ~ N(0, x_cov); None: I)."""
    from interp.config import inputs_suffix
    from interp.params import of
    from interp.render import count, table
    from interp.tuning import format_param

    L = rec.n_layers
    inputs = inputs_suffix(x_cov)
    print(
        f"\n{path}: {of(rec.param).label} L={L} H={rec.n_heads} step {step}, {count(rec.n_seq)} sequences of "
        f"{rec.noise}{inputs} (seed {rec.seed})"
    )
    imp, sol, lam, fits, proj = rec.implicit, rec.solvers, rec.implied_lambda, rec.fits, rec.projection
    ridge, abl = rec.const_ridge, rec.ablation
    head = [
        "l",
        "a/b diff",
        "lsq resid",
        "cos OLS",
        "cos ridge",
        "cos GD",
        "impl λ",
        "ρ(λ,σ)",
        "DIAG R²",
        "equiv R²",
        "off-DIAG",
        "Δloss abl",
        "match λ",
        "λ mism",
    ]
    rows = []
    for l in range(1, L + 1):
        rows.append(
            [
                str(l),
                _f(imp.lstsq_vs_recursion[l], ".1e"),
                _f(imp.lstsq_residual[l], ".1e"),
                _f(sol.cos_ols[l]),
                _f(sol.cos_ridge_oracle[l]),
                _f(sol.cos_gd[l]),
                _f(lam.median[l]),
                _f(lam.spearman_sigma[l], ".2f"),
                _f(fits.diag.r2[l - 1], ".4f"),
                _f(fits.equivariant.r2[l - 1], ".4f"),
                _f(proj.share_outside[l - 1], ".2e"),
                _f(abl.delta_per_layer[l - 1], ".2e") if abl else "-",
                _f(ridge.lambda_match[l]),
                _f(ridge.relative_mismatch[l], ".2e"),
            ]
        )
    print(table(head, rows, left=0))
    print(
        f"ω ({rec.omegas.source}): "
        + "; ".join(f"l{l + 1} " + " ".join(_f(v, ".3g") for v in om) for l, om in enumerate(rec.omegas.omega))
    )
    print(
        f"ConstRR λ {format_param(ridge.lambda_constrr)} (interp.tuning's, as interp eval prints it); match λ: the "
        "model's own, the constant λ whose ridge predictions best match the layer's"
    )
    if abl:
        print(ablation_line(abl))
    if rec.schedule is not None:
        print_schedule(rec.schedule)
    if rec.theorem51 is not None:
        print_theorem51(rec.theorem51)


def print_theorem51(t) -> None:
    """Theorem 5.1 on a GD++ model and noise-free sequences (interp.probes.Theorem51): one row per K = 0..L."""
    from interp.render import table

    pre, L = t.preconditioning, len(t.loss) - 1
    print(
        f"Theorem 5.1 (noise-free GD++): loss after K layers (½·MSE, {t.n_seq} sequences), order log ε_K / log ε_K-1, "
        f"and layer K's γ = −ω_xx, median γ·s_max (theorem: 1/3), κ of Σ after it, map error ({t.probe_seq} sequences)"
    )
    rows = [
        [
            str(K),
            _f(t.loss[K], ".3g"),
            _f(t.order[K - 1], ".2f") if K else "-",
            _f(pre.gamma[K - 1], ".4g") if K else "-",
            _f(pre.gamma_smax[K - 1], ".3f") if K else "-",
            _f(pre.kappa[K], ".3g"),
            _f(pre.map_error[K - 1], ".1e") if K else "-",
        ]
        for K in range(L + 1)
    ]
    print(table(["K", "loss", "order", "γ", "γ·s_max", "κ", "map err"], rows, left=0))
    fit = t.fit
    print(
        "fitted order: -"
        if fit.start is None
        else f"fitted order {fit.order:.2f} (slope {fit.slope:.3f} of log(−log ε_K) per layer from K = {fit.start}; "
        "second order: log 2 = 0.693)"
    )


def ablation_line(abl) -> str:
    """The DIAG ablation's losses, each with its standard error and its sequences (not interp eval's: seed + 1)."""
    from interp.render import count, loss, stderr

    where = "" if abl.seed is None else f" of seed {abl.seed}"
    delta = f"{abl.delta_all:+.2e}" + ("" if abl.delta_all_stderr is None else f" ± {stderr(abl.delta_all_stderr)}")
    return (
        f"DIAG ablation on {count(abl.n_seq)} sequences{where} (not interp eval's): adjusted loss "
        f"{loss(abl.base, abl.base_stderr)}; all layers DIAG-projected {loss(abl.all, abl.all_stderr)} (Δ {delta}, "
        "paired)"
    )


ARROWS = {"x<-x": "x←x", "x<-y": "x←y", "y<-x": "y←x", "y<-y": "y←y"}


def _inc(mean, blowups: int, hurt: bool) -> str:
    text = "blow-up" if mean is None or not math.isfinite(mean) else format(mean, "+.2e")
    return text + (f" ({blowups})" if blowups else "") + ("*" if hurt else "")


def print_schedule(s) -> None:
    """The layer schedule (interp.probes.Schedule): one row per layer l = 1..L."""
    from interp.probes.schedule import hurts
    from interp.render import count, loss, table

    names = [ARROWS.get(b, b) for b in s.blocks]
    head = ["l", *(f"|{n}|" for n in names)]
    if s.labels is not None:
        head += [f"Δ {n}" for n in names] + ["label"]
    rows = []
    for l, rel in enumerate(s.relative):
        row = [str(l + 1), *(_f(v, ".3f") for v in rel)]
        if s.labels is not None:
            inc, se, bl = s.increase[l], s.increase_stderr[l], s.blowups[l]
            row += [_inc(m, b, hurts(m, e, s.base, b, s.rel_threshold, s.z)) for m, e, b in zip(inc, se, bl)] + [
                s.labels[l]
            ]
        rows.append(row)
    print(
        f"layer schedule (§5.3): |block| = median over {s.n_seq} sequences of ‖block's update‖ / ‖the part it writes‖"
        " (context tokens, before the layer)"
    )
    if s.labels is not None:
        left = f" (less {s.excluded} on which the model itself blows up)" if s.excluded else ""
        base = loss(s.base, s.base_stderr, s.ablation_seq - (s.excluded or 0))
        print(
            f"Δ = adjusted-loss increase with that block of that layer zeroed, {count(s.ablation_seq)} sequences"
            f"{left}, base {base}; * hurts (> {s.rel_threshold:.0%} of base and > {s.z:g} s.e., or a "
            "blow-up: (n) sequences above 100·d)"
        )
    print(table(head, rows, left=0))
    if s.labels is not None:
        print(f"schedule: {s.pattern}   (x: x-from-y, y: y-step, xy: both, -: neither)")
