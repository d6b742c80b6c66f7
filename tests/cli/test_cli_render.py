"""interp.render: one way to write a loss ("mean ± s.e. (N seq.)"), a ratio the noise supports, and the tables every
command prints (eval, probe, drift, table, the sweep's end table, the report's summary)."""

from __future__ import annotations

from interp.render import DASH, NOISY, count, fixed, loss, markdown, number, ratio, stderr, table


def test_a_loss_carries_its_standard_error_and_its_sequences():
    assert loss(0.2457, 0.0042, 100_000) == "0.2457 ± 0.0042 (100 000 seq.)"
    assert loss(0.2457, 0.0042, 20_000, "seed 1") == "0.2457 ± 0.0042 (20 000 seq., seed 1)"
    assert loss(0.25, 0.01) == "0.25 ± 0.01"  # a table whose heading names the count
    assert loss(1.2e-4, 3.4e-5, 10) == "1.20e-04 ± 3.4e-05 (10 seq.)"
    assert loss(None, None) == DASH and loss(0.5, None) == "0.5"
    assert loss(0.08, 0.01, fmt=lambda v: f"{v:.3g}") == "0.08 ± 0.01"  # Table 1 at the paper's precision


def test_numbers():
    assert count(100_000) == "100 000" and count(999) == "999"
    assert number(0.24567) == "0.2457" and number(None) == DASH and number(float("nan")) == "nan"
    assert fixed(0.365) == "0.3650" and fixed(2e-4) == "2.00e-04" and fixed(None) == DASH
    assert stderr(0.0042) == "0.0042" and stderr(4.2e-5) == "4.2e-05"


def test_a_ratio_only_where_the_noise_supports_it():
    assert ratio(0.25, 0.005, 0.25) == "1.00 ± 0.02"
    assert ratio(0.25, 0.05, 0.25, supported=False) == NOISY
    assert ratio(0.25, 0.005, None) == DASH


def test_tables():
    text = table(["name", "what", "loss"], [["a", "DIAG L=1", "0.25 ± 0.01"], ["bb", "x", "1 ± 0.1"]], left=2)
    assert text.splitlines() == [
        "name  what             loss",
        "----  --------  -----------",
        "a     DIAG L=1  0.25 ± 0.01",
        "bb    x             1 ± 0.1",
    ]
    assert markdown(["run", "loss"], [["r", "0.25 ± 0.01"]]) == "| run | loss |\n|---|---|\n| r | 0.25 ± 0.01 |"
