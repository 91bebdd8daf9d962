"""The tool-output corpus ``python -m bench`` measures (bench/outputs.py), made here from the
project's own files and commands: every JSON output's lossless re-encoding parses back to the
same value, and re-encoding the structured ones (pip's package list, npm's tree and lock
file) saves a fifth of their tokens."""

from __future__ import annotations

import json

import pytest

from bench.outputs import corpus
from proxy.windows.tokenizers import get_encoding
from strategies.lossless import Lossless


@pytest.mark.slow
def test_json_outputs_re_encode_losslessly_and_shorter() -> None:
    enc = get_encoding("o200k_base")
    outputs = [o for o in corpus(quick=True) if o.kind == "JSON"]
    assert {o.name for o in outputs} >= {"pip list --format=json", "package-lock.json"}
    before = after = 0
    for o in outputs:
        re_encoded = Lossless(min_chars=0)._text(o.text)
        assert json.loads(re_encoded) == json.loads(o.text), o.name
        assert Lossless(min_chars=0)._text(re_encoded) == re_encoded
        before += len(enc.encode_ordinary(o.text))
        after += len(enc.encode_ordinary(re_encoded))
    assert after <= 0.8 * before, (before, after)
