"""How much of a noise-free GD++ cell's Table 1 value is its sample: the exact expected loss of each context
(interp.noise_free.gdpp_noise_free_loss, the mean over w and x_t, from the spectrum of XᵀX alone) on --contexts fresh
contexts, split into disjoint samples of --sample contexts (the paper's and the table's 10⁵).

    OMP_NUM_THREADS=1 python experiments/studies/noise_free_tail.py         # the Table 1 zoo's GD++ on uniform:0
    OMP_NUM_THREADS=1 python experiments/studies/noise_free_tail.py MODEL ... --contexts 2000000

For each model: the mean over all contexts, the median context, the min / median / max of the per-sample means, and
the share of the whole mean carried by the 10 worst contexts. Prints markdown.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from interp.noise_free import gdpp_noise_free_loss
from interp.run import resolve_model
from interp.spectral import context_spectrum
from interp.tasks import draw_tasks

ZOO = Path(__file__).resolve().parents[1] / "zoo" / "best" / "uniform0"
CHUNK = 65_536


def spectra(count: int, d: int, n: int, seed: int) -> torch.Tensor:
    """[count, d] eigenvalues of XᵀX of `count` fresh contexts (x ~ N(0, I); drawn CHUNK at a time from seed)."""
    gen, out = torch.Generator().manual_seed(seed), []
    for start in range(0, count, CHUNK):
        x = draw_tasks(min(CHUNK, count - start), d, n, "uniform:0", gen, dtype=torch.float64).x
        out.append(context_spectrum(x)[0])
    return torch.cat(out)


def context_losses(model, d: int, n: int, count: int, seed: int) -> torch.Tensor:
    """[count] exact expected ½·error² of each of `count` fresh noise-free contexts (x ~ N(0, I))."""
    om = model.omegas()
    with torch.no_grad():
        return gdpp_noise_free_loss(om.omega_xx.double(), om.omega_yx.double(), spectra(count, d, n, seed))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", type=Path, help="GD++ models (default: the zoo's on uniform:0)")
    ap.add_argument("--contexts", type=int, default=1_000_000)
    ap.add_argument("--sample", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(1)
    paths = args.models or sorted(ZOO.glob("gdpp*.safetensors"), key=lambda p: int(p.stem[4:]))
    print(f"{args.contexts:,} contexts (seed {args.seed}) in samples of {args.sample:,}\n")
    print("| model | L | mean, all | median context | sample means: min / median / max | 10 worst contexts' share |")
    print("|---|---|---|---|---|---|")
    for path in paths:
        m = resolve_model(path)
        cfg = m.model.cfg
        if cfg.param != "gdpp" or m.n is None:
            raise SystemExit(f"{path}: a GD++ model with a recorded context length is needed, got {cfg.param}")
        losses = context_losses(m.model, cfg.d, m.n, args.contexts, args.seed)
        means = losses[: len(losses) // args.sample * args.sample].reshape(-1, args.sample).mean(1)
        lo, mid, hi = means.min().item(), means.median().item(), means.max().item()
        share = losses.topk(10).values.sum().item() / losses.sum().item()
        print(
            f"| `{path}` | {cfg.n_layers} | {losses.mean().item():.3g} | {losses.median().item():.3g} | "
            f"{lo:.3g} / {mid:.3g} / {hi:.3g} | {share:.0%} |"
        )


if __name__ == "__main__":
    main()
