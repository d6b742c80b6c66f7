import os

import pytest
import torch

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)  # 2 shared cores: tests run on one thread, as the benchmarks record


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(0)
