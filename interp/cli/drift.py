"""`interp drift`: how far every checkpoint of a run is from the DIAG structure, per layer, and whether it matters."""

from __future__ import annotations

import math
import os
import time

from interp.cli import ArgError, check_output, existing_path, noise_spec, note_training, positive_int

HELP = "distance to the DIAG structure along a run's checkpoint trajectory"  # listed by `interp --help`


def add(sub) -> None:
    p = sub.add_parser(
        "drift",
        help=HELP,
        description=(
            "Reads every checkpoint of RUN_DIR and measures, per layer, the layer map's energy outside the DIAG "
            "subspace, the scalar-identity deviation of the x-blocks of P and Q, R² of the DIAG and equivariant fits "
            "on the checkpoint's own statistics, the singular values of the non-DIAG remainder, and the adjusted loss "
            "of the model and of its DIAG projection (the functional gap). Prints a per-layer table for the first, "
            "middle and last checkpoints; --json writes every metric of every checkpoint (docs/drift.md). A run "
            "trained on x ~ N(0, Λ) (interp train --x-cov) is measured on inputs from N(0, Λ). "
            "About 3 s per 4-layer checkpoint on one thread with the defaults."
        ),
    )
    p.add_argument("run_dir", type=existing_path, metavar="RUN_DIR", help="run directory (written by interp train)")
    p.add_argument(
        "--json", dest="json_out", metavar="PATH", help="write every metric of every checkpoint to this JSON file"
    )
    p.add_argument("--noise", type=noise_spec, help="noise prior of the measuring sequences (default: the run's)")
    p.add_argument(
        "--eval-seq",
        type=positive_int("--eval-seq"),
        default=20_000,
        help="sequences for the adjusted losses, the same for every checkpoint (default 20 000)",
    )
    p.add_argument(
        "--fit-seq",
        type=positive_int("--fit-seq"),
        default=2_048,
        help="sequences whose statistics the DIAG / equivariant fits use (default 2 048)",
    )
    p.add_argument(
        "--eval-seed",
        type=int,
        help="seed of the loss sequences (default: interp.probes.drift.EVAL_SEED, not interp eval's 0)",
    )
    p.add_argument(
        "--no-per-layer",
        action="store_true",
        help="skip the per-layer gap (each layer alone replaced by its DIAG projection); about 2x faster",
    )
    p.add_argument("--threads", type=positive_int("--threads", 1024), default=1, help="torch CPU threads (default 1)")
    p.set_defaults(func=cmd_drift)


def cmd_drift(args) -> int:
    import torch

    from interp.cli.output import json_text, write
    from interp.evalset import EvalSet
    from interp.probes.drift import EVAL_SEED, DriftData, drift_trajectory
    from interp.run import Run, resolve_model

    out = args.json_out
    if out is not None:
        check_output(out, "--json", [args.run_dir])
    if not os.path.isdir(args.run_dir):
        raise ArgError(f"RUN_DIR: {args.run_dir} is not a directory")
    if not Run.is_run(args.run_dir):
        raise ArgError(f"RUN_DIR: {args.run_dir} is not a run directory (it has no {Run.CONFIG_FILE})")
    torch.set_num_threads(args.threads)
    m = resolve_model(args.run_dir)  # the run's prior, d, n and input covariance (its config)
    if not m.model.cfg.is_lsa:
        raise ArgError(
            f"RUN_DIR: {args.run_dir} trains a {m.model.cfg.family_label} model; interp drift measures the paper's "
            "model's weights (P, Q) against DIAG; interp probe reads the family's"
        )
    note_training([args.run_dir], "interp drift")
    traj = m.run.trajectory()
    evalset = EvalSet(
        args.noise or m.noise,
        d=m.d,
        n=m.n,
        n_seq=args.eval_seq,
        seed=EVAL_SEED if args.eval_seed is None else args.eval_seed,
        x_cov=m.x_cov,  # a run trained on x ~ N(0, Λ) is measured on such inputs
        quad=m.config.quad,  # and one trained with --quad on its task
    )
    data = DriftData(evalset, fit_seq=args.fit_seq)
    t0 = time.time()
    doc = {
        "command": ["interp", *(getattr(args, "argv", None) or [])],
        "run_dir": args.run_dir,
        **drift_trajectory(traj, data, per_layer_gap=not args.no_per_layer),
    }
    doc["seconds"] = round(time.time() - t0, 1)
    print_table(doc)
    if out is not None:
        write(out, json_text(doc, strict=True))
        print(f"wrote {out}")
    return 0


def _f(x, fmt: str = ".3g") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def picked(records: list) -> list:
    """The first, middle and last checkpoint (fewer when the trajectory is shorter)."""
    idx = sorted({0, len(records) // 2, len(records) - 1})
    return [records[i] for i in idx]


def print_table(doc: dict) -> None:
    """One row per (checkpoint, layer) for the first, middle and last checkpoints, then one loss line each."""
    from interp.config import inputs_suffix
    from interp.params import of
    from interp.probes.drift import DriftRecord
    from interp.render import count, loss, stderr, table

    recs = [DriftRecord.from_json(r) for r in doc["checkpoints"]]
    inputs = inputs_suffix(doc.get("x_cov"))
    seed = doc.get("eval_seed")
    print(
        f"{doc['run_dir']}: {of(doc['param']).label} L={doc['n_layers']} H={doc['n_heads']}, {len(recs)} checkpoints, "
        f"{doc['noise']}{inputs}; losses on {count(doc['eval_seq'])} sequences"
        + ("" if seed is None else f" of seed {seed} (the same for every checkpoint; not interp eval's)")
        + f", fits on {count(doc['fit_seq'])}"
    )
    head = [
        "step",
        "l",
        "off-DIAG",
        "read",
        "DIAG R²",
        "equiv R²",
        "xdev P",
        "xdev Q",
        "rem sv1/‖K‖",
        "eff rank",
        "top block",
        "Δloss l",
    ]
    rows = []
    for r in picked(recs):
        w, f = r.weights, r.functional
        for l in range(doc["n_layers"]):
            shares = {k: v[l] for k, v in w.remainder_block_share.items()}
            top = max(shares, key=lambda k: shares[k] if shares[k] is not None else -1)
            rows.append(
                [
                    str(r.step),
                    str(l + 1),
                    _f(w.share_outside[l], ".2e"),
                    _f(w.share_outside_read[l], ".2e"),
                    _f(f.r2_diag[l], ".4f"),
                    _f(f.r2_equivariant[l], ".4f"),
                    _f(w.x_block_dev_P[l], ".3f"),
                    _f(w.x_block_dev_Q[l], ".3f"),
                    _f(w.remainder_sv_rel[l][0], ".3f"),
                    "zero" if w.remainder_effective_rank[l] == 0 else _f(w.remainder_effective_rank[l], ".1f"),
                    f"{top} {_f(shares[top], '.2f')}",
                    "-" if f.gap_per_layer is None else _f(f.gap_per_layer[l], "+.2e"),
                ]
            )
    print(table(head, rows, left=0))
    last = recs[-1].weights
    cos, share = last.register_cos, last.write_share
    src = max(range(len(cos)), key=lambda l: share[l])
    dst = max(range(len(cos)), key=lambda m: cos[src][m])
    if share[src] >= 0.05:
        print(
            f"register (step {recs[-1].step}): layer {src + 1} writes {share[src]:.3f} of ‖P‖² into one "
            f"x-direction; layer {dst + 1} reads along it with |cos| {cos[src][dst]:.3f}"
        )
    else:
        print(f"register (step {recs[-1].step}): none (every layer's y → x write share < 0.05)")
    n_seq = doc["eval_seq"]
    for r in picked(recs):
        f = r.functional
        print(
            f"step {r.step}: adjusted loss {loss(f.loss, f.loss_stderr, n_seq)}; DIAG projection "
            f"{loss(f.loss_diag_projection, None)} (gap {f.gap_diag_projection:+.2e} ± "
            f"{stderr(f.gap_diag_projection_stderr)}, paired); DIAG fit {loss(f.loss_diag_fit, None)} (gap "
            f"{f.gap_diag_fit:+.2e} ± {stderr(f.gap_diag_fit_stderr)}, paired)"
        )
