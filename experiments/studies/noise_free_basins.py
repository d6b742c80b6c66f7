"""Basins of the noise-free GD++ loss: L-BFGS on its closed form (interp.noise_free.gdpp_noise_free_loss, the exact
mean over w and x_t of each context, from XᵀX's spectrum) from random starts, each minimum scored on fresh contexts.

    OMP_NUM_THREADS=1 python experiments/studies/noise_free_basins.py --layers 4 --starts 12

A start draws ω_xx^l ~ −U(0, 0.05)·e^{U(0, 3)} and ω_yx^l ~ −U(0, 0.1)·e^{U(0, 3)} per layer (torch.Generator(L)),
then runs two L-BFGS steps of 300 iterations on the log of the mean over --contexts contexts (data seed 2); printed:
that mean, the mean over 200 000 fresh contexts (seed 3) and the ω's (the last layer's ω_xx does not enter the loss).
Compare a trained model with `experiments/studies/noise_free_tail.py`.
"""

from __future__ import annotations

import argparse

import torch
from noise_free_tail import spectra  # this directory's script: the same fresh contexts

from interp.noise_free import gdpp_noise_free_loss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--starts", type=int, default=12)
    ap.add_argument("--contexts", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--n", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    L = args.layers
    train, fresh = spectra(args.contexts, args.d, args.n, 2), spectra(200_000, args.d, args.n, 3)
    gen = torch.Generator().manual_seed(L)

    def draw(scale: float) -> torch.Tensor:
        u, e = torch.rand(L, generator=gen, dtype=torch.float64), torch.rand(L, generator=gen, dtype=torch.float64)
        return -u * scale * (3 * e).exp()

    print("| start | mean (fit) | mean (fresh) | ω_xx per layer | ω_yx per layer |\n|---|---|---|---|---|")
    for k in range(args.starts):
        om = torch.stack([draw(0.05), draw(0.1)]).requires_grad_()
        opt = torch.optim.LBFGS(
            [om], lr=1, max_iter=300, history_size=30, tolerance_grad=0, tolerance_change=0,
            line_search_fn="strong_wolfe",
        )  # fmt: skip

        def closure():
            opt.zero_grad()
            value = gdpp_noise_free_loss(om[0], om[1], train).mean().log()
            if not torch.isfinite(value):  # a trial that blew up: very bad, no gradient
                om.grad = torch.zeros_like(om)
                return torch.tensor(1e30, dtype=torch.float64)
            value.backward()
            return value

        for _ in range(2):
            opt.step(closure)
        with torch.no_grad():
            fit = gdpp_noise_free_loss(om[0], om[1], train).mean().item()
            new = gdpp_noise_free_loss(om[0], om[1], fresh).mean().item()
        xx, yx = (", ".join(f"{v:.4g}" for v in row) for row in om.detach().tolist())
        print(f"| {k} | {fit:.4g} | {new:.4g} | {xx} | {yx} |", flush=True)


if __name__ == "__main__":
    main()
