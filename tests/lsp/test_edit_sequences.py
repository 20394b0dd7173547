"""A property of the server: after any series of edits, sent as an editor sends
them (ranges in UTF-16 positions, several per change), its diagnostics are
exactly what `jadpoc check --format json` says of the text those edits make.

500 random series over the checker's corpus (tests/check/*.jadpo) and the
examples: each starts from a corpus file's text and makes one to six edits
(inserting words, punctuation, line breaks, non-ASCII letters and characters
outside the BMP, deleting or replacing a run), seeded so a failure names the
series that found it. After the series a hover is asked: the server answers it
from a fresh analysis, whose diagnostics it publishes before the answer, so the
diagnostics the client holds then are those of the last edit.
"""

from __future__ import annotations

import json
import pathlib
import random
import subprocess

from lsprotocol import types
from pytest_lsp import LanguageClient

from conftest import JADPOC, REPO, change_doc, open_doc, start, write

SERIES = 500
SNIPPETS = [
    "x", "0", "7", " ", "\n", "{", "}", ":", '"', ",", ".", "?", "[", "]", "//", "/*",
    "event ", "subscriber ", "on: ", "run: ", "attempts: 20", "within: 3d", "rate: 5/s",
    "where: event.x > 1", "é", "日本", "😀",
]
SEVERITY = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning}


def corpus() -> list[str]:
    files = sorted((REPO / "tests" / "check").glob("*.jadpo")) + sorted((REPO / "examples").glob("*.jadpo"))
    return [f.read_text(encoding="utf-8") for f in files]


def position(text: str, index: int) -> types.Position:
    """The LSP position (UTF-16 code units) of character `index` of `text`."""
    line = text.count("\n", 0, index)
    start = text.rfind("\n", 0, index) + 1
    return types.Position(line=line, character=len(text[start:index].encode("utf-16-le")) // 2)


def byte_position(text: str, offset: int) -> types.Position:
    """The LSP position of byte `offset` of `text`'s UTF-8."""
    return position(text, len(text.encode("utf-8")[:offset].decode("utf-8")))


def expected(text: str, folder: pathlib.Path) -> list[tuple]:
    """What `jadpoc check` says of `text`, as the server should publish it."""
    path = folder / "prog.jadpo"
    path.write_text(text, encoding="utf-8")
    out = subprocess.run([JADPOC, "check", "--format", "json", str(path)], capture_output=True, text=True)
    found = []
    for d in json.loads(out.stdout)["diagnostics"]:
        message = d["message"] + (f"\nhelp: {d['help']}" if d.get("help") else "")
        start, end = byte_position(text, d["start"]["offset"]), byte_position(text, d["end"]["offset"])
        found.append((d["code"], SEVERITY[d["severity"]], (start.line, start.character, end.line, end.character), message))
    return sorted(found)


def published(diagnostics) -> list[tuple]:
    return sorted(
        (d.code, d.severity, (d.range.start.line, d.range.start.character, d.range.end.line, d.range.end.character), d.message)
        for d in diagnostics
    )


def edit(rng: random.Random, text: str) -> tuple[types.Range, str, str]:
    """One random edit of `text`: its range, its new text, and the text after it."""
    start = rng.randrange(len(text) + 1)
    end = min(len(text), start + rng.choice([0, 0, 1, 2, 5, 12]))
    new = rng.choice(SNIPPETS) if rng.random() < 0.8 else ""
    return types.Range(start=position(text, start), end=position(text, end)), new, text[:start] + new + text[end:]


async def test_diagnostics_after_any_series_of_edits_are_those_of_check(client: LanguageClient, tmp_path):
    texts = corpus()
    root = tmp_path / "ws"
    uri = write(root, {"prog.jadpo": texts[0]})["prog.jadpo"]
    expect_dir = tmp_path / "expect"
    expect_dir.mkdir()
    await start(client, root)
    open_doc(client, uri, texts[0])
    version = 1
    codes_seen = set()
    for series in range(SERIES):
        rng = random.Random(series)
        text = rng.choice(texts)
        version += 1
        change_doc(client, uri, version, text)
        for _ in range(rng.randint(1, 6)):
            rng_range, new, text = edit(rng, text)
            version += 1
            change_doc(client, uri, version, new, rng_range)
        await client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=0, character=0)
            )
        )
        want = expected(text, expect_dir)
        got = published(client.diagnostics.get(uri, []))
        assert got == want, f"series {series} (random.Random({series})): the server's diagnostics differ from check's"
        codes_seen.update(code for code, *_ in want)
    # The series reach much of the checker: syntax errors the edits made, and the
    # corpus's own codes.
    assert len(codes_seen) >= 40, sorted(codes_seen)
    assert any(c.startswith("syntax.") for c in codes_seen), sorted(codes_seen)
