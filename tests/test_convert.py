"""`interp import` / interp.convert: each format's file, written in its source's layout, imports to a model whose
predictions equal the source's own forward pass on the same tokens, in float64, to 1e-12 (the reference passes are
written out here from each source's equations, never through interp). Bad files are refused in one line naming the
file, and nothing is written."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from interp import convert
from interp.checkpoints import load_file
from interp.files import CheckpointError, InvalidArgument
from interp.limits import MAX_CHECKPOINT_BYTES
from interp.probes.forms import diag_projection
from interp.run import Run, resolve_model
from tests.ahn_reference import regression, train, transformer_f
from tests.helpers import run_cli

TOL = dict(rtol=1e-12, atol=1e-12)


def tokens(B: int, N: int, d: int, seed: int = 0) -> torch.Tensor:
    """[B, N+1, d+1] float64 regression tokens (x, y), the query's y 0."""
    return regression(B, N, d, torch.Generator().manual_seed(seed))[0]


def one_line(code, err, *needles):
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert str(needle) in err, (needle, err)


# ---------------------------------------------------------------------- ahn
@pytest.mark.parametrize("heads", [1, 2])
def test_ahn_state_dict_predicts_as_transformer_F(tmp_path, heads):
    L, d, N = 3, 4, 10
    allparam = torch.randn(L, heads, 2, d, d, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 0.3
    torch.save({"module.allparam": allparam}, tmp_path / "ahn.pt")  # a DataParallel prefix
    imp = convert.read_ahn(tmp_path / "ahn.pt", n=N)
    Z = tokens(64, N, d)
    want = transformer_f(allparam, Z)
    assert want.abs().max() > 0.1  # not a trivial comparison
    torch.testing.assert_close(imp.model(Z), want, **TOL)
    assert (imp.model.cfg.d, imp.model.cfg.n_layers, imp.model.cfg.n_heads, imp.model.cfg.dtype) == (
        d,
        L,
        heads,
        "float64",
    )
    # the padding's zeros survive as interp's: no y enters the x's, y is never rescaled (P's y-column, Q's y-row)
    P, Q = imp.model.P.detach(), imp.model.Q.detach()
    assert torch.equal(P[..., :d, d], torch.zeros(L, heads, d, dtype=torch.float64))
    assert torch.equal(Q[..., d, :], torch.zeros(L, heads, d + 1, dtype=torch.float64))
    assert torch.equal(P[..., d, d], torch.full((L, heads), 1 / N, dtype=torch.float64))


def test_ahn_unconstrained_predicts_as_its_layer(tmp_path):
    """Their unconstrained variant: P̄, Q̄ (d+1)×(d+1) whole, the same layer (Σ_j (z_iᵀ Q̄ z_j) P̄ z_j / N)."""
    L, d, N = 2, 3, 7
    g = torch.Generator().manual_seed(2)
    allparam = torch.randn(L, 1, 2, d + 1, d + 1, dtype=torch.float64, generator=g) * 0.3
    torch.save({"allparam": allparam}, tmp_path / "u.pt")
    Z = tokens(32, N, d)
    want = Z.clone()
    mask = torch.ones(N + 1, dtype=torch.float64)
    mask[N] = 0
    for l in range(L):
        P_bar, Q_bar = allparam[l, 0, 0], allparam[l, 0, 1]
        attn = torch.einsum("bti,ij,bsj->bts", want, Q_bar, want) * mask
        want = want + torch.einsum("bts,ij,bsj->bti", attn, P_bar, want) / N
    got = convert.read_ahn(tmp_path / "u.pt", n=N, unconstrained=True).model(Z)
    torch.testing.assert_close(got, -want[:, N, d], **TOL)


def test_ahn_snapshot_files_are_trajectories(tmp_path):
    L, d, N = 2, 3, 6
    snaps = [torch.randn(L, 1, 2, d, d, generator=torch.Generator().manual_seed(s)) * 0.2 for s in range(4)]
    torch.save({"hist_dict": {"lr=0.01": snaps, "lr=0.1": snaps[:2]}}, tmp_path / "hd.pt")
    torch.save({"hist_list": snaps}, tmp_path / "hl.pt")
    Z = tokens(16, N, d)
    imp = convert.read_ahn(tmp_path / "hl.pt", n=N)
    assert [s for s, _ in imp.trajectory] == [0, 1, 2, 3] and imp.step == 3  # the last one is the model
    for (step, model), allparam in zip(imp.trajectory, snaps):
        torch.testing.assert_close(model(Z), transformer_f(allparam.double(), Z), **TOL)
    picked = convert.read_ahn(tmp_path / "hd.pt", n=N, key="lr=0.01", snapshot=1)
    assert picked.step == 1 and picked.container == {"container": "hist_dict", "key": "lr=0.01"}
    torch.testing.assert_close(picked.model(Z), transformer_f(snaps[1].double(), Z), **TOL)
    assert convert.read_ahn(tmp_path / "hd.pt", n=N, key="lr=0.01", snapshot=-1).step == 3
    with pytest.raises(CheckpointError, match="holds 2 runs .*pick one with --key"):
        convert.read_ahn(tmp_path / "hd.pt", n=N)


def test_the_checkpoint_records_where_it_came_from(tmp_path):
    allparam = torch.randn(2, 1, 2, 3, 3) * 0.2
    torch.save({"allparam": allparam}, tmp_path / "a.pt")
    convert.import_checkpoint("ahn", tmp_path / "a.pt", tmp_path / "a.safetensors", n=9, noise="uniform:2")
    model, meta = load_file(tmp_path / "a.safetensors")
    digest = hashlib.sha256((tmp_path / "a.pt").read_bytes()).hexdigest()
    imp = meta["imported"]
    assert (imp["format"], imp["source_sha256"], imp["n"], imp["d"], imp["noise"]) == ("ahn", digest, 9, 3, "uniform:2")
    assert imp["conventions"]["mapped"] == "P = Pbar / N, Q = Qbar^T" and imp["conventions"]["scale"] == "1/n"
    m = resolve_model(tmp_path / "a.safetensors")  # what eval / probe / report read
    assert (m.noise, m.n, m.d, m.note) == ("uniform:2", 9, 3, None)
    convert.import_checkpoint("ahn", tmp_path / "a.pt", tmp_path / "b.safetensors", n=9)
    _, meta = load_file(tmp_path / "b.safetensors")
    assert meta["noise"] == convert.DEFAULT_NOISE == "uniform:0" and "assumed" in meta["imported"]["noise"]


# ---------------------------------------------------------------------- oswald
def haiku_forward(params: dict[str, np.ndarray], h: np.ndarray, heads: int, layers: int, deq: bool) -> np.ndarray:
    """von Oswald et al.'s linear-attention Transformer (attention only, no bias / LayerNorm / PE, keys and values
    from the context): per layer h ← h + concat_k((h W_Q)_k (h_ctx W_K)_kᵀ (h_ctx W_V)_k) W_O, prediction −h[-1, -1]."""
    B, T, D = h.shape
    for nl in range(layers):
        scope = "transformer/multi_head_attention" if deq else f"transformer/layer_{nl}"
        w = {p: params[f"{scope}/{p}/w"] for p in ("query", "key", "value", "linear")}
        q = (h @ w["query"]).reshape(B, T, heads, -1)
        k = (h[:, :-1] @ w["key"]).reshape(B, T - 1, heads, -1)
        v = (h[:, :-1] @ w["value"]).reshape(B, T - 1, heads, -1)
        logits = np.einsum("bthd,bshd->bhts", q, k)
        attn = np.einsum("bhts,bshd->bthd", logits, v).reshape(B, T, -1)
        h = h + attn @ w["linear"]
    return -h[:, -1, -1]


def haiku_params(L: int, D: int, heads: int, K: int, V: int, deq: bool, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for nl in [0] if deq else range(L):
        scope = "transformer/multi_head_attention" if deq else f"transformer/layer_{nl}"
        for p, shape in (("query", (D, heads * K)), ("key", (D, heads * K)), ("value", (D, heads * V))):
            out[f"{scope}/{p}/w"] = rng.normal(0, 0.25, shape)
        out[f"{scope}/linear/w"] = rng.normal(0, 0.25, (heads * V, D))
    return out


@pytest.mark.parametrize("deq, heads", [(False, 1), (False, 2), (True, 2)])
def test_oswald_tree_predicts_as_their_transformer(tmp_path, deq, heads):
    L, d, N, K, V = 3, 3, 9, 4, 2
    params = haiku_params(L, d + 1, heads, K, V, deq)
    np.savez(tmp_path / "tree.npz", **params)
    imp = convert.read_oswald(tmp_path / "tree.npz", heads=heads, layers=L if deq else None, n=N)
    Z = tokens(64, N, d)
    want = torch.from_numpy(haiku_forward(params, Z.numpy(), heads, L, deq))
    assert want.abs().max() > 0.1
    torch.testing.assert_close(imp.model(Z), want, **TOL)
    assert imp.model.cfg.n_layers == L and imp.model.cfg.n_heads == heads and imp.conventions["deq"] is deq


def test_oswald_refuses_what_their_layer_has_and_interps_does_not(tmp_path):
    base = haiku_params(2, 4, 1, 4, 4, deq=False)
    cases = {
        "transformer/layer_0/query/b": (np.zeros(4), "a bias (use_bias_p=True)"),
        "transformer/norm_1/scale": (np.ones(4), "a LayerNorm (use_layer_norm=True)"),
        "transformer/emb/w": (np.ones((4, 4)), "an input embedding"),
        "transformer/mlp/linear/w": (np.ones((4, 16)), "an MLP"),
    }
    for name, (value, words) in cases.items():
        np.savez(tmp_path / "t.npz", **base, **{name: value})
        with pytest.raises(CheckpointError, match=re.escape(f"parameter '{name}' is {words}")):
            convert.read_oswald(tmp_path / "t.npz", heads=1)
    np.savez(tmp_path / "deq.npz", **haiku_params(2, 4, 1, 4, 4, deq=True))
    with pytest.raises(CheckpointError, match="does not record L; give --layers"):
        convert.read_oswald(tmp_path / "deq.npz", heads=1)
    np.savez(tmp_path / "t.npz", **base)
    with pytest.raises(CheckpointError, match="holds 2 layers, --layers says 3"):
        convert.read_oswald(tmp_path / "t.npz", heads=1, layers=3)
    with pytest.raises(CheckpointError, match="do not split into 3 heads"):
        convert.read_oswald(tmp_path / "t.npz", heads=3)
    del base["transformer/layer_1/value/w"]
    np.savez(tmp_path / "t.npz", **base)
    with pytest.raises(CheckpointError, match="layer_1 has no value/w"):
        convert.read_oswald(tmp_path / "t.npz", heads=1)


# ---------------------------------------------------------------------- matrices
def qkv_forward(W: dict[str, torch.Tensor], Z: torch.Tensor, scale: float, y_at: int) -> torch.Tensor:
    """Column-vector linear attention: e_i ← e_i + scale Σ_k W_O,k Σ_{j≤n} v_j (k_jᵀ q_i), q = W_Q e, k = W_K e,
    v = W_V e, keys and values from the context; prediction −(y slot of the query), the y slot at index `y_at`."""
    h = Z.clone()
    for l in range(W["W_Q"].shape[0]):
        out = 0.0
        for k in range(W["W_Q"].shape[1]):
            q = h @ W["W_Q"][l, k].T
            key = h[:, :-1] @ W["W_K"][l, k].T
            v = h[:, :-1] @ W["W_V"][l, k].T
            o = torch.einsum("bti,bsi,bsc->btc", q, key, v)
            out = out + o @ W["W_O"][l, k].T
        h = h + scale * out
    return -h[:, -1, y_at]


def pq_forward(P: torch.Tensor, Q: torch.Tensor, Z: torch.Tensor, scale: float, y_at: int) -> torch.Tensor:
    """e_i ← e_i + scale Σ_k P_k (Σ_{j≤n} e_j e_jᵀ) Q_k e_i, prediction −(y slot of the query)."""
    h = Z.clone()
    for l in range(P.shape[0]):
        S = h[:, :-1].transpose(1, 2) @ h[:, :-1]
        h = h + scale * torch.einsum("kab,zbc,kcd,ztd->zta", P[l], S, Q[l], h)
    return -h[:, -1, y_at]


@pytest.mark.parametrize("layout", ["xy", "yx"])
@pytest.mark.parametrize("scale", ["1", "1/n"])
def test_matrices_P_Q_with_conventions(tmp_path, layout, scale):
    L, H, d, N = 2, 2, 3, 8
    g = torch.Generator().manual_seed(3)
    P = torch.randn(L, H, d + 1, d + 1, dtype=torch.float64, generator=g) * (0.25 if scale == "1" else 0.9)
    Q = torch.randn(L, H, d + 1, d + 1, dtype=torch.float64, generator=g) * (0.25 if scale == "1" else 0.9)
    save_file({"P": P, "Q": Q}, tmp_path / "pq.safetensors")
    Z = tokens(64, N, d)
    src = Z[..., [d, *range(d)]] if layout == "yx" else Z  # the source's tokens: (y, x)
    want = pq_forward(P, Q, src, 1 / N if scale == "1/n" else 1.0, 0 if layout == "yx" else d)
    assert want.abs().max() > 0.1
    got = convert.read_matrices(tmp_path / "pq.safetensors", scale=scale, layout=layout, n=N).model(Z)
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("vectors", ["column", "row"])
def test_matrices_qkvo_npz(tmp_path, vectors):
    L, H, d, N, K, V = 2, 2, 3, 8, 5, 2
    g = torch.Generator().manual_seed(4)
    shapes = {"W_Q": (K, d + 1), "W_K": (K, d + 1), "W_V": (V, d + 1), "W_O": (d + 1, V)}
    W = {k: torch.randn(L, H, *s, dtype=torch.float64, generator=g) * 0.4 for k, s in shapes.items()}
    stored = {k: (w.transpose(-1, -2) if vectors == "row" else w).numpy() for k, w in W.items()}
    np.savez(tmp_path / "w.npz", **stored)
    Z = tokens(64, N, d)
    want = qkv_forward(W, Z, 1.0, d)
    torch.testing.assert_close(convert.read_matrices(tmp_path / "w.npz", vectors=vectors).model(Z), want, **TOL)


def test_matrices_refuse_what_interp_cannot_represent(tmp_path):
    P = torch.zeros(1, 1, 3, 3)
    save_file({"P": P, "Q": P.clone()}, tmp_path / "pq.safetensors")
    with pytest.raises(InvalidArgument, match="query_as_key: .*masks the query"):
        convert.read_matrices(tmp_path / "pq.safetensors", query_as_key=True)
    with pytest.raises(InvalidArgument, match="readout \\+y: .*−2·y in the residual"):
        convert.read_matrices(tmp_path / "pq.safetensors", readout="+y")
    with pytest.raises(InvalidArgument, match="context length is required for matrices with scale 1/n"):
        convert.read_matrices(tmp_path / "pq.safetensors", scale="1/n")
    for extra, words in (("b_Q", "a bias"), ("ln_scale", "a LayerNorm"), ("R", "not one of P, Q")):
        save_file({"P": P, "Q": P.clone(), extra: torch.zeros(3)}, tmp_path / "x.safetensors")
        with pytest.raises(CheckpointError, match=re.escape(f"tensor '{extra}' is {words}")):
            convert.read_matrices(tmp_path / "x.safetensors")
    save_file({"P": P, "Q": torch.zeros(1, 1, 3, 4)}, tmp_path / "x.safetensors")
    with pytest.raises(CheckpointError, match=r"P and Q must both be \[L, H, d\+1, d\+1\]"):
        convert.read_matrices(tmp_path / "x.safetensors")


# ---------------------------------------------------------------------- bad files: one line, nothing written
class NeedsCode:  # a pickled object of this class needs this module's code to load
    pass


def _bad_files(tmp_path):
    good = torch.randn(2, 1, 2, 3, 3) * 0.1
    nan = good.clone()
    nan[1, 0, 1, 2, 0] = float("nan")
    files = {
        "missing.pt": ({"weights": good}, "no 'allparam' tensor, 'hist_dict' or 'hist_list' (keys: weights)"),
        "shape.pt": (
            {"allparam": torch.zeros(2, 1, 3, 3, 3)},
            "allparam has shape [2, 1, 3, 3, 3], not [L, H, 2, d, d]",
        ),
        "nan.pt": ({"allparam": nan}, "allparam holds non-finite values (NaN or inf)"),
        "range.pt": ({"hist_list": [good, good]}, "snapshot 5 is out of range: the file holds 2 snapshots (0..1)"),
        "code.pt": ({"allparam": good, "extra": NeedsCode()}, "a pickle that needs code to load"),
        "ints.pt": ({"allparam": torch.zeros(2, 1, 2, 3, 3, dtype=torch.int64)}, "allparam holds int64"),
    }
    for name, (obj, _) in files.items():
        torch.save(obj, tmp_path / name)
    (tmp_path / "truncated.pt").write_bytes((tmp_path / "nan.pt").read_bytes()[:300])
    files["truncated.pt"] = (None, "not a file torch.load reads")
    return {name: words for name, (_, words) in files.items()}


def test_bad_files_are_one_line_naming_the_file_and_nothing_is_written(tmp_path, capsys):
    for name, words in _bad_files(tmp_path).items():
        out = tmp_path / f"{name}.safetensors"
        with pytest.raises(CheckpointError) as err:
            convert.import_checkpoint("ahn", tmp_path / name, out, n=5, snapshot=5 if name == "range.pt" else None)
        assert str(err.value).startswith(str(tmp_path / name)) and words in str(err.value), str(err.value)
        argv = ["import", "ahn", tmp_path / name, "-o", out, "--n", "5"] + (
            ["--snapshot", "5"] if "range" in name else []
        )
        one_line(*run_cli(capsys, *argv)[::2], tmp_path / name, words)
        traj = tmp_path / f"{name}.run"
        if name != "range.pt":  # a run directory holds every snapshot: none is picked
            one_line(*run_cli(capsys, *argv[:4], traj, "--n", "5", "--trajectory")[::2], tmp_path / name, words)
        assert not out.exists() and not traj.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".pt")) == []  # no temporary left


def test_cli_arguments_are_checked_before_any_work(tmp_path, capsys):
    torch.save({"allparam": torch.zeros(1, 1, 2, 2, 2)}, tmp_path / "a.pt")
    src = tmp_path / "a.pt"
    for argv, words in (
        (["ahn", src, "-o", tmp_path / "o.safetensors"], "--n: ahn files need the context length N"),
        (["ahn", src, "-o", tmp_path / "o.pt", "--n", "4"], "must end in .safetensors"),
        (["ahn", src, "-o", tmp_path / "o.safetensors", "--n", "4", "--heads", "2"], "--heads is for oswald files"),
        (["ahn", src, "-o", tmp_path / "o.safetensors", "--n", "4", "--layout", "yx"], "--layout is for matrices"),
        (["oswald", src, "-o", tmp_path / "o.safetensors"], "--heads: the parameter tree does not record num_heads"),
        (["matrices", src, "-o", tmp_path / "o.safetensors", "--scale", "1/n"], "--scale 1/n needs the context"),
        (["matrices", src, "-o", tmp_path / "o.safetensors", "--readout", "+y"], "readout +y"),
        (["ahn", src, "-o", tmp_path, "--n", "4", "--trajectory"], "exists; --trajectory writes a new run directory"),
        (["ahn", src, "-o", tmp_path / "r", "--n", "4", "--trajectory", "--snapshot", "0"], "--snapshot picks one"),
        (["ahn", src, "-o", src, "--n", "4"], "must end in .safetensors"),
        (["ahn", tmp_path / "nope.pt", "-o", tmp_path / "o.safetensors", "--n", "4"], "no such file"),
    ):
        one_line(*run_cli(capsys, "import", *argv)[::2], words)
    assert not (tmp_path / "o.safetensors").exists() and not (tmp_path / "o.pt").exists()


NEEDLE = {
    "fifo": "not a regular file (a FIFO)",
    "zero": "not a regular file (a character device)",
    "pagemap": "not a regular file (a /proc or /sys pseudo-file)",
    "directory": "is a directory",
}


@pytest.mark.parametrize("fmt", ["ahn", "oswald", "matrices"])
@pytest.mark.parametrize("kind", sorted(NEEDLE))
def test_hostile_sources_are_refused_promptly(tmp_path, capsys, fmt, kind):
    """Every reader goes through interp.files' regular-file-only reads: a FIFO (which would block), /dev/zero
    (endless), /proc/self/pagemap (says regular, reads anything) or a directory, named directly or through a link."""
    src = tmp_path / "src"
    if kind == "fifo":
        os.mkfifo(src)
    elif kind == "directory":
        src.mkdir()
    else:
        (tmp_path / "link").symlink_to({"zero": "/dev/zero", "pagemap": "/proc/self/pagemap"}[kind])
        src = tmp_path / "link"
    options = {"ahn": {"n": 4}, "oswald": {"heads": 1}, "matrices": {}}[fmt]
    with pytest.raises(CheckpointError, match="^" + str(src)) as err:
        convert.read(fmt, src, **options)
    assert NEEDLE[kind] in str(err.value)
    flags = {"ahn": ["--n", "4"], "oswald": ["--heads", "1"], "matrices": []}[fmt]
    out = tmp_path / "o.safetensors"
    one_line(*run_cli(capsys, "import", fmt, src, "-o", out, *flags)[::2], src, NEEDLE[kind])
    assert not out.exists()


@pytest.mark.parametrize("fmt", ["ahn", "oswald", "matrices"])
def test_a_huge_sparse_source_is_refused_on_its_size(tmp_path, fmt):
    src = tmp_path / "huge"
    with open(src, "wb") as f:
        f.truncate(MAX_CHECKPOINT_BYTES + 1)  # sparse: no disk used, and never read
    options = {"ahn": {"n": 4}, "oswald": {"heads": 1}, "matrices": {}}[fmt]
    with pytest.raises(CheckpointError, match=f"^{src}: {MAX_CHECKPOINT_BYTES + 1} bytes, more than"):
        convert.read(fmt, src, **options)


def test_truncated_and_pickled_npz_and_safetensors_are_refused(tmp_path):
    np.savez(tmp_path / "t.npz", **haiku_params(1, 3, 1, 2, 2, deq=False))
    (tmp_path / "cut.npz").write_bytes((tmp_path / "t.npz").read_bytes()[:-40])
    with pytest.raises(CheckpointError, match="cut.npz: not an .npz file numpy reads"):
        convert.read_oswald(tmp_path / "cut.npz", heads=1)
    np.savez(tmp_path / "obj.npz", **{"transformer/layer_0/query/w": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(CheckpointError, match="obj.npz: not an .npz file numpy reads"):  # object arrays are pickles
        convert.read_oswald(tmp_path / "obj.npz", heads=1)
    save_file({"P": torch.zeros(1, 1, 3, 3), "Q": torch.zeros(1, 1, 3, 3)}, tmp_path / "pq.safetensors")
    (tmp_path / "cut.safetensors").write_bytes((tmp_path / "pq.safetensors").read_bytes()[:-8])
    with pytest.raises(CheckpointError, match="cut.safetensors: neither a .safetensors nor an .npz file"):
        convert.read_matrices(tmp_path / "cut.safetensors")
    (tmp_path / "p.pkl").write_bytes(pickle.dumps({"P": 1}))
    with pytest.raises(CheckpointError, match="p.pkl: neither a .safetensors nor an .npz file"):
        convert.read_matrices(tmp_path / "p.pkl")


# ---------------------------------------------------------------------- through the CLI, into eval and drift
def test_import_then_eval_and_drift(tmp_path, capsys):
    snaps = [torch.randn(1, 1, 2, 2, 2, generator=torch.Generator().manual_seed(s)) * 0.3 for s in range(3)]
    torch.save({"hist_list": snaps}, tmp_path / "h.pt")
    out = tmp_path / "m.safetensors"
    code, stdout, err = run_cli(capsys, "import", "ahn", tmp_path / "h.pt", "-o", out, "--n", "6", "--noise", "fixed:1")
    assert code == 0, err
    assert stdout == f"wrote {out}: ahn snapshot 2 of 3, FULL d=2 L=1 H=1, n=6, fixed:1\n"
    code, stdout, err = run_cli(capsys, "eval", out, "--eval-seq", "200", "--no-baselines")
    assert code == 0 and "fixed:1" in stdout, err
    code, stdout, err = run_cli(
        capsys, "import", "ahn", tmp_path / "h.pt", "-o", tmp_path / "run", "--n", "6", "--trajectory"
    )
    assert code == 0 and "3 snapshot(s) as a run directory" in stdout, err
    run = Run(tmp_path / "run")
    assert [s for s, _ in run.checkpoints()] == [0, 1, 2] and run.config().n == 6
    for (step, model), allparam in zip(run.trajectory(), snaps):
        Z = tokens(8, 6, 2)
        torch.testing.assert_close(model(Z), transformer_f(allparam.double(), Z), **TOL)
    js = tmp_path / "drift.json"
    code, stdout, err = run_cli(
        capsys, "drift", run.path, "--eval-seq", "200", "--fit-seq", "64", "--no-per-layer", "--json", js
    )
    assert code == 0, err
    assert [r["step"] for r in json.loads(js.read_text())["checkpoints"]] == [0, 1, 2]


# ---------------------------------------------------------------------- a trained model, classified (docs/import.md)
def test_a_trained_ahn_model_is_full_inside_gdpps_blocks():
    """The model docs/import.md imports: Ahn et al.'s layer trained with Adam through the written-out forward pass.
    Their parameterization zeroes P's y-column and Q's y-row, so its DIAG projection has ω_xy = ω_yy = 0 exactly (a
    GD++), and the x←y and y←y blocks of every layer are exactly zero; what is left outside DIAG sits in the x←x and
    y←x blocks (x-blocks that are not multiples of I)."""
    torch.manual_seed(0)
    allparam, snapshots = train()
    assert len(snapshots) == 11
    Z, target = regression(4000, 20, 3, torch.Generator().manual_seed(1))
    before = ((transformer_f(snapshots[0].double(), Z) - target) ** 2).mean()
    after = ((transformer_f(allparam.double(), Z) - target) ** 2).mean()
    assert after < 0.1 * before  # it learned (their loss, E[(ŷ − y)²], y of variance d = 3)
    P, Q = convert.ahn_matrices(allparam, 20)
    proj = diag_projection(P, Q)
    assert torch.equal(proj.omega[:, 1], torch.zeros(3, dtype=torch.float64))  # ω_xy
    assert torch.equal(proj.omega[:, 3], torch.zeros(3, dtype=torch.float64))  # ω_yy
    assert bool((proj.omega[:, 2] < 0).all())  # ω_yx < 0: a GD step on every layer (ŷ = −y)
    assert torch.equal(proj.block_sv["y->x"], torch.zeros_like(proj.block_sv["y->x"]))
    assert torch.equal(proj.block_sv["y->y"], torch.zeros_like(proj.block_sv["y->y"]))
    assert bool((proj.share_outside > 0.01).all())  # not GD++ itself: its x-blocks are not multiples of I


def test_a_symlink_to_a_source_is_read_through_and_the_api_name_resolves(tmp_path):
    import interp

    allparam = torch.randn(1, 1, 2, 2, 2, dtype=torch.float64) * 0.3
    torch.save({"allparam": allparam}, tmp_path / "real.pt")
    (tmp_path / "link.pt").symlink_to(tmp_path / "real.pt")
    imp = interp.import_checkpoint("ahn", tmp_path / "link.pt", tmp_path / "o.safetensors", n=4)
    Z = tokens(8, 4, 2)
    torch.testing.assert_close(load_file(tmp_path / "o.safetensors")[0](Z), transformer_f(allparam, Z), **TOL)
    assert imp.sha256 == hashlib.sha256((tmp_path / "real.pt").read_bytes()).hexdigest()
