"""Ahn et al. 2023's linear transformer (*Transformers learn to implement preconditioned gradient descent for
in-context learning*) written out from their equations, independently of interp: the reference the `ahn` import is
checked against, and a small trainer whose model docs/import.md imports.

Their layer on tokens z_i = (x_i, y_i) (rows of Z [B, N+1, d+1], the query last with y = 0), per head with
allparam[l, h] = (P, Q), both d×d:
    P̄ = [[P, 0], [0, 1]], Q̄ = [[Q, 0], [0, 0]]
    Z ← Z + Σ_h (1/N) Σ_{j≤N} (z_iᵀ Q̄ z_j) P̄ z_j     (the query is no key: the mask A = diag(1, ..., 1, 0))
and the prediction is −Z[N, d] after the last layer. `python -m tests.ahn_reference --out FILE` trains one and saves
its state dict as their code does (torch.save(model.state_dict(), FILE)).
"""

from __future__ import annotations

import argparse

import torch


def transformer_f(allparam: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
    """The prediction −Z[:, N, d] of Ahn et al.'s Transformer_F with parameter `allparam` [L, H, 2, d, d] on Z."""
    B, T, D = Z.shape
    N, d = T - 1, D - 1
    A = torch.eye(T, dtype=Z.dtype)
    A[N, N] = 0.0  # the query is masked as a key
    for l in range(allparam.shape[0]):
        residues = 0.0
        for h in range(allparam.shape[1]):
            P_bar = torch.zeros(D, D, dtype=Z.dtype)
            P_bar[:d, :d] = allparam[l, h, 0]
            P_bar[d, d] = 1.0
            Q_bar = torch.zeros(D, D, dtype=Z.dtype)
            Q_bar[:d, :d] = allparam[l, h, 1]
            attn = torch.einsum("bti,ij,bsj->bts", Z, Q_bar, Z)  # z_tᵀ Q̄ z_s
            key = torch.einsum("ij,bsj->bsi", P_bar, Z)  # P̄ z_s
            residues = residues + torch.einsum("bts,su,bui->bti", attn, A, key) / N
        Z = Z + residues
    return -Z[:, N, d]


def regression(B: int, N: int, d: int, generator: torch.Generator, dtype=torch.float64):
    """(Z, y_query): x, w ~ N(0, I), y = ⟨w, x⟩ without noise (their data), the query's y slot 0."""
    x = torch.randn(B, N + 1, d, generator=generator, dtype=dtype)
    w = torch.randn(B, d, generator=generator, dtype=dtype)
    y = torch.einsum("bnd,bd->bn", x, w)
    target = y[:, -1].clone()
    y[:, -1] = 0.0
    return torch.cat([x, y[..., None]], dim=-1), target


def train(
    L: int = 3, d: int = 3, N: int = 20, steps: int = 1000, batch: int = 256, lr: float = 0.01, seed: int = 0
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(allparam [L, 1, 2, d, d], 11 snapshots: before the first step and every steps // 10 steps after it): Adam on
    their loss E[(ŷ − y)²] with fresh data every step, init N(0, 0.05²), float32 like their code. About 10 s on one
    thread with the defaults (the model docs/import.md imports)."""
    g = torch.Generator().manual_seed(seed)
    allparam = (torch.randn(L, 1, 2, d, d, generator=g) * 0.05).requires_grad_(True)
    opt = torch.optim.Adam([allparam], lr=lr)
    snapshots = [allparam.detach().clone()]
    for step in range(1, steps + 1):
        Z, target = regression(batch, N, d, g, torch.float32)
        loss = ((transformer_f(allparam, Z) - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % max(steps // 10, 1) == 0:
            snapshots.append(allparam.detach().clone())
    return allparam.detach().clone(), snapshots


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to save the state dict ({'allparam': ...})")
    parser.add_argument("--snapshots", help="also save {'hist_list': [allparam, ...]} here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    allparam, snapshots = train()
    torch.save({"allparam": allparam}, args.out)
    if args.snapshots:
        torch.save({"hist_list": snapshots}, args.snapshots)
    print(f"wrote {args.out}")
