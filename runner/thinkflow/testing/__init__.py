"""Agent tests (``thinkflow test``): run ``*.test.yaml`` cases against cassettes of recorded model replies (offline,
deterministic), record them from a real model, or run them live; check the assertions; report as a table, JUnit
XML or GitHub annotations. Sits below ``agent`` (it builds agents) and above ``serve``, ``batch`` and ``cli``."""
