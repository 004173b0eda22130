"""The README's config reference is generated from the schemas and must match them."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_config_reference_matches_schemas():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "config_reference.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "| `memory.long_term.recall.min_score` | number | `0` |" in readme
    assert "#### Tool, `kind: http`" in readme
