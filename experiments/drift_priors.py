"""Drift on all ten priors (issue 49): the FULL-7 trajectory of every prior (experiments/zoo/trajectories), its final
model against the zoo's best FULL-7 (experiments/zoo/best/<prior>/full7) on the same sequences, and what FULL keeps
outside DIAG at the end: the per-layer off-DIAG share, the loss of the DIAG projection, and the rank-one register
(the remainder's top singular value's share in layers 3 and 4, where the uniform:5 study found layer 3 writing and
layer 4 reading one direction; `docs/drift.md`).

    OMP_NUM_THREADS=1 python experiments/drift_priors.py   # writes experiments/results/drift_priors.{json,md}
"""

from __future__ import annotations

import json
from pathlib import Path

from interp.evalset import EvalSet
from interp.evaluate import adjusted_losses
from interp.probes.drift import DriftData, drift_record
from interp.run import Run, load
from interp.tasks import prior_slug

ROOT = Path(__file__).resolve().parent
TRAJ = ROOT / "zoo" / "trajectories"
BEST = ROOT / "zoo" / "best"
OUT = ROOT / "results"
N_SEQ, EVAL_SEQ, FIT_SEQ = 20_000, 5_000, 2_048
REGISTER = 0.5  # a layer "carries the register" when one direction holds more than half the remainder's energy


def main() -> None:
    rows = []
    for run in sorted(TRAJ.iterdir()):
        if not Run.is_run(run) or not Run(run).is_complete():
            continue
        cfg = Run(run).config()
        step, ckpt = Run(run).checkpoints()[-1]
        model, zoo = load(ckpt), load(BEST / prior_slug(cfg.noise) / "full7.safetensors")
        diffs = adjusted_losses({"retrain": model, "zoo": zoo}, EvalSet(cfg.noise, n_seq=N_SEQ, seed=0))
        loss = {k: float(v.mean()) for k, v in diffs.items()}
        data = DriftData.default(cfg.noise, cfg.model.d, cfg.n, eval_seq=EVAL_SEQ, fit_seq=FIT_SEQ)
        rec = drift_record(step, model, data, per_layer_gap=False)
        w, f = rec.weights, rec.functional
        top1 = [float(x) for x in w.remainder_top1_share]
        rows.append(
            {
                "run": str(run.relative_to(ROOT.parent)),
                "noise": cfg.noise,
                "seed": cfg.seed,
                "step": step,
                "loss_retrain": loss["retrain"],
                "loss_zoo": loss["zoo"],
                "ratio_to_zoo": loss["retrain"] / loss["zoo"] if loss["zoo"] else None,
                "share_outside": [float(x) for x in w.share_outside],
                "remainder_top1_share": top1,
                "loss": float(f.loss),
                "loss_diag_projection": float(f.loss_diag_projection),
                "gap_diag_projection": float(f.gap_diag_projection),
                "gap_diag_projection_stderr": float(f.gap_diag_projection_stderr),
                "register_3_4": top1[2] > REGISTER and top1[3] > REGISTER,
            }
        )
        print(run.name, f"{loss['retrain']:.4g} vs zoo {loss['zoo']:.4g}", flush=True)
    (OUT / "drift_priors.json").write_text(json.dumps({"n_seq": N_SEQ, "eval_seq": EVAL_SEQ, "runs": rows}, indent=1))
    lines = [
        "| prior | run (seed) | adjusted loss, retrain / zoo (ratio) | off-DIAG share per layer 1-7 | DIAG projection: "
        "loss (gap ± s.e.) | remainder top-1 share, layers 3 / 4 | register 3→4 |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        share = " ".join(f"{x:.2f}" for x in r["share_outside"])
        lines.append(
            f"| `{r['noise']}` | `{Path(r['run']).name}` ({r['seed']}) | {r['loss_retrain']:.4g} / {r['loss_zoo']:.4g} "
            f"({r['ratio_to_zoo']:.3f}) | {share} | {r['loss_diag_projection']:.4g} ({r['gap_diag_projection']:+.3g} ± "
            f"{r['gap_diag_projection_stderr']:.2g}) | {r['remainder_top1_share'][2]:.2f} / "
            f"{r['remainder_top1_share'][3]:.2f} | {'yes' if r['register_3_4'] else 'no'} |"
        )
    (OUT / "drift_priors.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
