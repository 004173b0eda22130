"""Hypothesis strategies shared by the tests of readers of stored JSON (batch inputs and results, memory imports,
cassettes, the embedded model's sidecar, the ONNX model's config files)."""

from __future__ import annotations

from hypothesis import strategies as st

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
"""Short text with no lone surrogate: what a UTF-8 file can hold."""

ANY_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                        | TEXT, lambda c: st.lists(c, max_size=3) | st.dictionaries(TEXT, c, max_size=3),
                        max_leaves=10)
"""Any JSON value of a few levels, of any shape."""
