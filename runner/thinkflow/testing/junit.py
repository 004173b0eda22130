"""JUnit XML for CI systems (Jenkins, GitLab, GitHub test reporters) from ``thinkflow test`` results.

Shape (the common JUnit schema those tools read)::

    <testsuites tests=N failures=F time=S>
      <testsuite name="agents.d/calculator_agent.test.yaml" tests=.. failures=.. time=..>
        <testcase classname="calculator_agent" name="multiplies" file=".." line=".." time="..">
          <failure message="answer does not contain '391'" type="AssertionFailed">details, diff</failure>
        </testcase>
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import OrderedDict
from pathlib import Path
from typing import Iterable

from thinkflow.config.testspec import test_stem
from thinkflow.testing.runner import CaseResult


def failure_text(result: CaseResult) -> str:
    """The body of a failure: every failing run's message (and a replay diff), one block per run."""
    blocks = []
    for number, run in enumerate(result.runs, 1):
        if run.passed:
            continue
        block = f"run {number}: {run.failure} (line {run.line})"
        if run.diff:
            block += "\n" + run.diff
        blocks.append(block)
    return "\n\n".join(blocks)


def to_junit(results: Iterable[CaseResult]) -> str:
    """The JUnit XML document (UTF-8 text with an XML declaration) of ``results``, one testsuite per test file."""
    by_file: "OrderedDict[Path, list[CaseResult]]" = OrderedDict()
    for result in results:
        by_file.setdefault(result.file, []).append(result)
    root = ET.Element("testsuites")
    total = failures = 0
    seconds = 0.0
    for file, cases in by_file.items():
        failed = sum(1 for c in cases if not c.passed)
        took = sum(c.duration_s for c in cases)
        suite = ET.SubElement(root, "testsuite", name=str(file), tests=str(len(cases)), failures=str(failed),
                              errors="0", skipped="0", time=f"{took:.3f}")
        for case in cases:
            item = ET.SubElement(suite, "testcase", classname=test_stem(file), name=case.case.name,
                                 file=str(file), line=str(case.case.line), time=f"{case.duration_s:.3f}")
            if not case.passed:
                first = case.first_failure
                message = first.failure if first is not None and first.failure else "failed"
                if case.case.repeat > 1:
                    message = f"{case.passes} of {case.case.repeat} runs passed, {case.case.pass_at_least} needed: " \
                              + message
                failure = ET.SubElement(item, "failure", message=message, type="AssertionFailed")
                failure.text = failure_text(case)
        total += len(cases)
        failures += failed
        seconds += took
    root.set("tests", str(total))
    root.set("failures", str(failures))
    root.set("errors", "0")
    root.set("time", f"{seconds:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
