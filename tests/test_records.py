"""interp.records: rounded, what a study's JSON carries."""

import json
import math

from interp.records import rounded


def test_rounded_keeps_the_significant_digits_asked_for_through_nested_containers():
    doc = {"a": 0.1 + 0.2, "b": [1 / 3, (2 / 3, -1e-20 / 3)], "n": 7, "s": "0.123456789", "ok": True, "inf": math.inf}
    out = rounded(doc, 6)
    assert out == {
        "a": 0.3,
        "b": [0.333333, [0.666667, -3.33333e-21]],
        "n": 7,
        "s": "0.123456789",
        "ok": True,
        "inf": math.inf,
    }
    assert type(out["n"]) is int and out["ok"] is True  # ints and bools are not floats to round
    # two values that differ in their last bits (the same code on another alignment) write the same JSON
    x, y = 0.09106252023228956, 0.09106252023228957
    assert x != y and json.dumps(rounded([x], 12)) == json.dumps(rounded([y], 12)) == "[0.0910625202323]"
    assert rounded(rounded(doc, 12), 12) == rounded(doc, 12)  # idempotent: a rerun rewrites nothing
