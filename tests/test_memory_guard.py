"""Issue 51, a memory guard that knows its container: the headroom is the smaller of MemAvailable and every memory
cgroup's limit less its usage (v2 memory.max / memory.current, v1 memory.limit_in_bytes / memory.usage_in_bytes),
read from fake /proc and /sys/fs/cgroup trees here; training and moments.predict(width=...) are refused on it."""

from __future__ import annotations

import pytest
import torch

import interp.files as files
import interp.train as train_mod
from interp import moments
from interp.config import ModelConfig, TrainConfig
from interp.files import InvalidArgument, available_memory
from tests.helpers import random_full, small_batch

GiB = 2**30


def fake_tree(tmp_path, cgroup_line: str, files_at: dict[str, str], mem_available: int = 100 * GiB):
    proc, cgroup = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text(f"MemTotal: {200 * GiB // 1024} kB\nMemAvailable: {mem_available // 1024} kB\n")
    (proc / "self" / "cgroup").write_text(cgroup_line + "\n")
    for rel, text in files_at.items():
        (cgroup / rel).parent.mkdir(parents=True, exist_ok=True)
        (cgroup / rel).write_text(text + "\n")
    return proc, cgroup


def test_cgroup_v2_limit_less_usage_is_the_headroom(tmp_path):
    proc, cgroup = fake_tree(
        tmp_path,
        "0::/user.slice/job",
        {
            "user.slice/job/memory.max": str(3 * GiB),
            "user.slice/job/memory.current": str(2 * GiB),
            "user.slice/job/memory.stat": f"anon 1\ninactive_file {GiB // 4}",
            "user.slice/memory.max": "max",
        },
    )
    assert available_memory(proc, cgroup) == GiB + GiB // 4  # reclaimable page cache counts as free


def test_a_parent_cgroups_tighter_limit_counts(tmp_path):
    proc, cgroup = fake_tree(
        tmp_path,
        "0::/a/b",
        {"a/b/memory.max": "max", "a/memory.max": str(2 * GiB), "a/memory.current": str(GiB + 5)},
    )
    assert available_memory(proc, cgroup) == GiB - 5


def test_cgroup_v1_and_an_unlimited_one(tmp_path):
    proc, cgroup = fake_tree(
        tmp_path,
        "4:memory:/docker/abc",
        {
            "memory/docker/abc/memory.limit_in_bytes": str(3 * GiB),
            "memory/docker/abc/memory.usage_in_bytes": str(GiB),
            "memory/docker/memory.limit_in_bytes": str(9223372036854771712),  # no limit
            "memory/docker/memory.usage_in_bytes": str(GiB),
        },
    )
    assert available_memory(proc, cgroup) == 2 * GiB
    proc, cgroup = fake_tree(tmp_path / "none", "0::/", {}, mem_available=5 * GiB)
    assert available_memory(proc, cgroup) == 5 * GiB  # no cgroup limit: MemAvailable


@pytest.fixture
def three_gib_cgroup(tmp_path, monkeypatch):
    """A 3 GiB cgroup with 1 GiB used, on a machine whose MemAvailable says 100 GiB."""
    proc, cgroup = fake_tree(tmp_path, "0::/job", {"job/memory.max": str(3 * GiB), "job/memory.current": str(GiB)})
    monkeypatch.setattr(files, "PROC_ROOT", proc)
    monkeypatch.setattr(files, "CGROUP_ROOT", cgroup)


def test_training_that_would_pass_memavailable_is_refused_in_its_cgroup(three_gib_cgroup, tmp_path, monkeypatch):
    monkeypatch.setattr(train_mod, "kernel_takes", lambda cfg: False)  # the torch backend's footprint
    cfg = TrainConfig(model=ModelConfig(d=10, n_layers=4, param="full"), noise="uniform:1", n=20, batch=131_072)
    assert 1.6 * GiB < train_mod.recursion_bytes(cfg) < 80 * GiB  # fits MemAvailable, not the cgroup's 2 GiB left
    with pytest.raises(InvalidArgument, match="cgroup") as info:
        train_mod.train(cfg, tmp_path / "run", progress=False)
    assert "\n" not in str(info.value) and not (tmp_path / "run").exists()


def test_moments_predict_width_is_bounded_by_the_cgroup(three_gib_cgroup):
    model, batch = random_full(d=2, n_layers=2, n_heads=1), small_batch(batch=16, d=2, n=5)
    with pytest.raises(InvalidArgument, match="width 3000"):  # 16 x 3000² floats x (4 + 2L): 4.3 GiB, 2 GiB left
        moments.predict(model, batch.tokens, width=3000, backend="torch")
    wide = moments.predict(model, batch.tokens, width=16, backend="torch")  # a width that fits still runs
    assert torch.allclose(wide, moments.predict(model, batch.tokens, backend="torch"), atol=1e-5)
