"""Approval of ``confirm`` tools: the approver type and the flag-decided approver.

An approver is ``Callable[[ToolSpec, dict], bool]``: given the tool's spec and the exact arguments, True
approves. ``--yes`` approves all (:func:`auto_approver`); the terminal prompt that asks a person lives in
:mod:`thinkflow.cli.approval` (only cli/ asks); with no approver the Toolbox denies with
"needs approval: run with --yes or in a terminal".
"""

from __future__ import annotations

from typing import Callable

from thinkflow.config.spec import ToolSpec

Approver = Callable[[ToolSpec, dict], bool]


def auto_approver(yes: bool) -> Approver:
    """An approver that answers ``yes`` to every call without asking."""

    def approve(spec: ToolSpec, arguments: dict) -> bool:
        return yes

    return approve
