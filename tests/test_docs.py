"""The documentation's code examples are run, so they cannot rot.

Every ```python block of README.md and docs/**/*.md runs in a fresh namespace (in a temporary
working folder, so the files an example writes land there). When the block is followed at once by
a plain ``` block, that block is the example's output: what the example prints must equal it, line
for line (trailing spaces aside; a line ``...`` stands for any number of lines).

A block that cannot run here says so, and why, in an HTML comment on the line before its fence
(invisible on GitHub and on the site):

    <!-- docs-test: skip: needs a Spark cluster and its files -->

Most blocks must run: ``test_most_examples_run`` fails when a quarter of them or more are skipped.
"""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP = re.compile(r"<!--\s*docs-test:\s*skip:\s*(?P<reason>.*?)\s*-->")
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,})(?P<info>[^`]*)$")


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[dict]:
    """The fenced blocks of a Markdown file: language, code, first line, the skip reason (or
    None) and the expected output (the plain block right after it, or None)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m["indent"]), m["fence"], m["info"].strip()
        start, body = i, []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(fence) and lines[i].strip().strip("`") == ""):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1  # the closing fence
        prev = lines[start - 1] if start > 0 else ""
        skip = SKIP.search(prev)
        found.append({"lang": info.split()[0].lower() if info else "", "code": "\n".join(body),
                      "line": start + 1, "skip": skip["reason"] if skip else None, "end": i})
    for a, b in zip(found, found[1:]):  # a plain block right after a python block is its output
        if a["lang"] == "python" and b["lang"] == "" and b["line"] == a["end"] + 1:
            a["output"] = b["code"]
    return [b for b in found if b["lang"] == "python"]


EXAMPLES = [(p, b) for p in doc_files() for b in blocks(p)]


def _matches(got: list[str], want: list[str]) -> bool:
    """``want`` against ``got`` line by line; a ``...`` line in ``want`` matches any run of lines."""
    if not want:
        return not got
    if want[0].strip() == "...":
        return any(_matches(got[k:], want[1:]) for k in range(len(got) + 1))
    return bool(got) and got[0].rstrip() == want[0].rstrip() and _matches(got[1:], want[1:])


@pytest.mark.parametrize("path,block", EXAMPLES,
                         ids=[f"{p.relative_to(ROOT)}:{b['line']}" for p, b in EXAMPLES])
def test_example(path, block, tmp_path, monkeypatch):
    if block["skip"] is not None:
        assert block["skip"], f"{path.name}:{block['line']}: a skipped example must say why"
        pytest.skip(block["skip"])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    out = io.StringIO()
    code = compile(block["code"], f"{path.relative_to(ROOT)}:{block['line']}", "exec")
    with contextlib.redirect_stdout(out):
        exec(code, {"__name__": "__docs__"})
    if "output" in block:
        got = out.getvalue().rstrip("\n").split("\n") if out.getvalue() else []
        want = block["output"].rstrip("\n").split("\n")
        assert _matches(got, want), (f"{path.relative_to(ROOT)}:{block['line']}: the example printed\n"
                                     + out.getvalue() + "\nwhere the page shows\n" + block["output"])


def test_most_examples_run():
    skipped = [f"{p.relative_to(ROOT)}:{b['line']}" for p, b in EXAMPLES if b["skip"] is not None]
    assert len(EXAMPLES) >= 20, "the examples were not found"
    assert len(skipped) * 4 < len(EXAMPLES), f"too many examples skipped: {skipped}"


LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub and the site's table of contents both make it."""
    text = re.sub(r"[`*_]", "", heading.strip().lstrip("#").strip()).lower()
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))


def test_readme_links():
    """Every relative link of the README reaches a file, and its anchor a heading of that file:
    the README is the front page, and each part of the site must be one click from it."""
    readme = ROOT / "README.md"
    broken = []
    for m in LINK.finditer(readme.read_text(encoding="utf-8")):
        target = m["target"]
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (readme.parent / path) if path else readme
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md":
            heads = [_slug(line) for line in file.read_text(encoding="utf-8").split("\n") if line.startswith("#")]
            if anchor not in heads:
                broken.append(target)
    assert not broken, f"README links that lead nowhere: {broken}"


def test_output_matching():
    assert _matches(["a", "b", "c"], ["a", "...", "c"])
    assert _matches(["a", "c"], ["a", "...", "c"])
    assert not _matches(["a", "b"], ["a", "c"])
    assert not _matches(["a"], ["a", "b"])
