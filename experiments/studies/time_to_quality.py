"""Time to quality: wall time of `interp train` on each path of the hook-free step, and the loss reached.

    python experiments/studies/time_to_quality.py --root runs/ttq2 \
        --out experiments/results/time_to_quality_fused.json --runs full:0 diag:0 --paths fused kernel

Trains `uniform:5` models as the zoo's (fast preset, one thread; 4 layers unless --layers), once per path, one run
at a time, the paths alternating: "fused" (the default: the kernel's fused training pass,
interp.moments.half_squared_errors), "kernel" (INTERP_FUSED=0: the model's forward on the kernel and its separate
backward) and "torch" (INTERP_KERNEL=0: the torch backend). Every run's adjusted loss is evaluated on the
zoo's 100 000 evaluation sequences (seed 0) as experiments/zoo_summary.py does. Same seed, same random numbers: the
paths differ only in float32 rounding, which is enough to send a run whose early training has loss spikes (DIAG-4)
down another path; hence several seeds. Rerunning skips finished runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from interp.evalset import EvalSet
from interp.evaluate import LossEstimate, adjusted_losses
from interp.run import Run, load

# the environment of each
PATHS = {"fused": "", "kernel": "INTERP_FUSED=0", "torch": "INTERP_KERNEL=0"}


def command(arch: str, layers: int, seed: int, out: Path) -> list[str]:
    return [
        "interp", "train", "--arch", arch, "--layers", str(layers), "--noise", "uniform:5", "--seed", str(seed),
        "--threads", "1", "--no-progress", "--out", str(out),
    ]  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, required=True, help="directory for the four runs")
    ap.add_argument("--out", type=Path, help="JSON record to write")
    ap.add_argument("--runs", nargs="+", default=["full:0", "diag:0"], help="ARCH:SEED pairs (default full:0 diag:0)")
    ap.add_argument("--paths", nargs="+", choices=list(PATHS), default=["fused", "kernel", "torch"])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--n-seq", type=int, default=100_000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    args.root.mkdir(parents=True, exist_ok=True)
    timing_path = args.root / "wall.json"
    walls = json.loads(timing_path.read_text()) if timing_path.exists() else {}
    records = []
    for arch, seed in (spec.split(":") for spec in args.runs):
        for path in args.paths:
            flag = PATHS[path]
            env = {**os.environ, "OMP_NUM_THREADS": "1", "INTERP_KERNEL": "1", "INTERP_FUSED": "1"}
            env.update(v.split("=") for v in flag.split())
            name = f"{arch}{args.layers}_s{seed}_{path}"
            run = args.root / name
            if not Run(run).is_complete():
                cmd = command(arch, args.layers, int(seed), run)
                load0, t0 = os.getloadavg()[0], time.perf_counter()
                subprocess.run(cmd, check=True, env=env)
                walls[name] = dict(wall_s=time.perf_counter() - t0, load_before=load0, load_after=os.getloadavg()[0])
                timing_path.write_text(json.dumps(walls, indent=1))
            cfg = Run(run).config()
            rates = [json.loads(line)["steps_per_s"] for line in (run / "metrics.jsonl").read_text().splitlines()]
            data = EvalSet(cfg.noise, d=cfg.model.d, n=cfg.n, n_seq=args.n_seq, seed=0, x_cov=cfg.x_cov)
            est = LossEstimate.of(adjusted_losses({"m": load(run)}, data)["m"])
            records.append(
                dict(
                    run=name,
                    path=path,
                    command=" ".join([*flag.split(), *command(arch, args.layers, int(seed), run)]),
                    steps=cfg.steps,
                    median_steps_per_s=statistics.median(rates),
                    adjusted=est.to_dict(),
                    **walls.get(name, {}),
                )
            )
            r = records[-1]
            print(
                f"{name}: {r.get('wall_s', float('nan')):.0f} s, median {r['median_steps_per_s']:.1f} steps/s, "
                f"adjusted loss {est.mean:.4f} ± {est.stderr:.4f} (median {est.median:.4f})",
                flush=True,
            )
    if args.out:
        args.out.write_text(json.dumps(dict(records=records, python=sys.version.split()[0]), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
