"""The lock files a fresh machine installs from: hash-pinned, and installed by a pip that honours the pins.

`python3.11 -m venv` ships pip 23.2, which resolves a dependency's extra (litellm's ``httpx[http2]``) to PyPI's newest
release instead of the pinned one and then refuses it under ``--require-hashes``; each venv therefore first gets the
pip of ``requirements-pip.lock``.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^([A-Za-z0-9._-]+)==(\S+) \\\n((?:\s+--hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)", re.M)


def pins(lock: str) -> dict[str, tuple[str, set[str]]]:
    """``{name: (version, {sha256, ...})}`` of a pip-compile lock file under the repository root."""
    text = (ROOT / lock).read_text(encoding="utf-8")
    return {m[1].lower(): (m[2], set(re.findall(r"sha256:([0-9a-f]{64})", m[3]))) for m in PIN.finditer(text)}


def test_every_requirement_of_each_lock_is_pinned_with_hashes():
    for lock in ("requirements.lock", "requirements-dev.lock", "requirements-pip.lock"):
        text = (ROOT / lock).read_text(encoding="utf-8")
        requirement_lines = [line for line in text.splitlines() if line and not line[0].isspace()
                             and not line.startswith("#")]
        found = pins(lock)
        assert len(found) == len(requirement_lines) > 0, (lock, requirement_lines[:3])
        assert all(hashes for _, hashes in found.values()), lock


def test_bootstrap_pip_is_the_dev_locks_pip_and_new_enough_for_extras():
    boot = pins("requirements-pip.lock")
    assert list(boot) == ["pip"]
    version, hashes = boot["pip"]
    assert pins("requirements-dev.lock")["pip"] == (version, hashes)
    assert tuple(int(p) for p in version.split(".")[:2]) >= (23, 3)


def test_each_venv_installs_the_bootstrap_pip_before_its_lock():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for lock in ("requirements.lock", "requirements-dev.lock"):
        rule = re.search(rf"^\S+/thinkflow: .*{re.escape(lock)}.*\n((?:\t.*\n)+)", makefile, re.M)
        assert rule, lock
        recipe = rule[1]
        assert "requirements-pip.lock" in rule[0].splitlines()[0]
        assert recipe.index("-r requirements-pip.lock") < recipe.index(f"-r {lock}")
