"""File paths named in a final answer (``loop.check_answer_files``): what counts as a path, and which are missing."""

from __future__ import annotations

import pytest

from thinkflow.run.answer_files import missing_files, missing_files_request, named_files


@pytest.mark.parametrize("text, paths", [
    ("Laptop 88525.69 charts/sales_by_product.png", ["charts/sales_by_product.png"]),
    ("Saved to `out/report.CSV`. See out/report.CSV again.", ["out/report.CSV"]),
    ("(/tmp/x.json), ~/notes/a.md; a.b.c.txt", ["/tmp/x.json", "~/notes/a.md", "a.b.c.txt"]),
    ("see https://example.com/img/a.png or ftp://h/b.csv", []),
    ("version 1.2.3, e.g. 3.5 of foo.bar", []),
    ("the file data.csv's third row", ["data.csv"]),
    ("charts/sales.png.", ["charts/sales.png"]),
])
def test_named_files(text, paths):
    assert named_files(text) == paths


def test_missing_files_resolves_against_the_workspace(tmp_path):
    (tmp_path / "charts").mkdir()
    (tmp_path / "charts" / "a.png").write_bytes(b"x")
    text = f"made charts/a.png and charts/b.png; raw data in {tmp_path / 'charts' / 'a.png'} and /nonexistent/c.csv"
    assert missing_files(text, tmp_path) == ["charts/b.png", "/nonexistent/c.csv"]


def test_the_request_says_make_it_or_answer_without_it():
    assert missing_files_request('Top: "Laptop", see c.png', ["c.png"]) == (
        "Your final answer names c.png, but it does not exist: no tool has written it. If the task asks for it, "
        "call the tool that creates it now, then give your final answer again. If the task does not, give the "
        "final answer to the task without it."
    )
    assert missing_files_request("a.png b.png", ["a.png", "b.png"]).startswith(
        "Your final answer names a.png, b.png, but they do not exist: no tool has written them. If the task asks "
        "for them, call the tool that creates them now")


def test_unnamed_files_are_those_an_answer_names_neither_by_path_nor_by_name():
    from thinkflow.run.answer_files import unnamed_files

    written = ["charts/a.png", "charts/b.png", "charts/a.png"]
    assert unnamed_files("The total is 5.", written) == ["charts/a.png", "charts/b.png"]  # in order, no repeats
    assert unnamed_files("see charts/b.png", written) == []  # one named is enough (a redrawn draft need not be)
    assert unnamed_files("saved as a.png", written) == []  # the file name alone names it
    assert unnamed_files("anything", []) == []
