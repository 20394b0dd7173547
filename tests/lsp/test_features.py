"""Each feature of the server, as an editor uses it."""

from __future__ import annotations

import pathlib
import subprocess

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from conftest import (
    DEFS,
    JADPOC,
    SUBS,
    change_doc,
    codes,
    diagnostics_until,
    doc_pos,
    open_doc,
    pos,
    start,
    write,
)


def ident(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


async def test_initialize_advertises_every_feature(client: LanguageClient, workspace):
    root, _ = workspace
    result = await start(client, root)
    caps = result.capabilities
    assert caps.position_encoding == types.PositionEncodingKind.Utf16
    assert caps.hover_provider and caps.definition_provider and caps.references_provider
    assert caps.rename_provider.prepare_provider
    assert caps.completion_provider is not None
    assert caps.code_action_provider and caps.document_formatting_provider
    assert caps.document_symbol_provider and caps.workspace_symbol_provider and caps.inlay_hint_provider
    assert result.server_info.name == "jadpoc lsp"


async def test_diagnostics_for_every_file_as_you_type_and_cleared_when_fixed(client: LanguageClient, workspace):
    root, uris = workspace
    subs = SUBS.replace("on: PaymentReceived", "on: PaymentRecieved")
    (root / "subs.jadpo").write_text(subs, encoding="utf-8")
    await start(client, root)
    # The folder is checked at start: both files, before any is opened.
    found = await diagnostics_until(client, uris["subs.jadpo"], lambda ds: len(ds) > 0)
    assert codes(found) == ["subscriber.unknown_event"]
    d = found[0]
    assert d.range == types.Range(start=pos(subs, "PaymentRecieved"), end=pos(subs, "PaymentRecieved", 15))
    assert d.severity == types.DiagnosticSeverity.Error
    assert d.source == "jadpo"
    assert "help: did you mean `PaymentReceived`?" in d.message
    # The test's `emit` uses the event, so the declarations' file is clean.
    assert await diagnostics_until(client, uris["defs.jadpo"], lambda ds: True) == []

    open_doc(client, uris["subs.jadpo"], subs)
    # One character fixes it (`ie` -> `ei`, typed as two edits): diagnostics are cleared.
    fix_at = pos(subs, "PaymentRecieved", 10)
    change_doc(client, uris["subs.jadpo"], 2, "ei", types.Range(start=fix_at, end=pos(subs, "PaymentRecieved", 12)))
    await diagnostics_until(client, uris["subs.jadpo"], lambda ds: ds == [])

    # Removing the subscriber's `on:` in the buffer: a warning appears in the other file.
    fixed = subs.replace("PaymentRecieved", "PaymentReceived")
    broken = fixed.replace("    on: PaymentReceived\n", "")
    broken = broken.replace('    emit PaymentReceived { payment_id: "p1", amount_cents: 5 }\n', "")
    change_doc(client, uris["subs.jadpo"], 3, broken)
    found = await diagnostics_until(client, uris["defs.jadpo"], lambda ds: len(ds) > 0)
    assert codes(found) == ["event.unused"]
    assert list(found[0].tags) == [types.DiagnosticTag.Unnecessary]
    assert found[0].severity == types.DiagnosticSeverity.Warning


async def test_open_buffers_override_the_disk_and_closing_falls_back(client: LanguageClient, workspace):
    root, uris = workspace
    await start(client, root)
    await diagnostics_until(client, uris["subs.jadpo"], lambda ds: ds == [])
    # An unsaved buffer that renames the event breaks the other file on disk.
    renamed = DEFS.replace("event PaymentReceived", "event PaymentTaken")
    open_doc(client, uris["defs.jadpo"], renamed)
    found = await diagnostics_until(client, uris["subs.jadpo"], lambda ds: len(ds) > 0)
    assert set(codes(found)) == {"subscriber.unknown_event", "test.unknown_event"}
    # Closed without saving: the disk's text counts again.
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=ident(uris["defs.jadpo"])))
    await diagnostics_until(client, uris["subs.jadpo"], lambda ds: ds == [])


async def test_a_new_unsaved_file_joins_the_program(client: LanguageClient, workspace):
    root, uris = workspace
    await start(client, root)
    new = (root / "more.jadpo").as_uri()
    open_doc(client, new, "subscriber other {\n    on: PaymentReceived\n    run: record_payment(event.payment_id, 1)\n}\n")
    assert await diagnostics_until(client, new, lambda ds: True) == []
    # Resolved across files: the definition is in defs.jadpo.
    loc = await client.text_document_definition_async(
        types.DefinitionParams(text_document=ident(new), position=types.Position(line=1, character=8))
    )
    assert loc.uri == uris["defs.jadpo"]


async def test_a_file_outside_the_folder_is_its_own_program(client: LanguageClient, workspace, tmp_path):
    root, _ = workspace
    await start(client, root)
    alone = tmp_path / "alone.jadpo"
    alone.write_text("", encoding="utf-8")
    text = "subscriber s {\n    on: PaymentReceived\n    run: record_payment(event.payment_id, 1)\n}\n"
    open_doc(client, alone.as_uri(), text)
    found = await diagnostics_until(client, alone.as_uri(), lambda ds: len(ds) > 0)
    assert codes(found) == ["subscriber.unknown_event", "run.unknown_action"]


NON_ASCII = 'subscriber s {\n    /* é😀 */ on: Nope\n    run: record_payment(event.payment_id, 1)\n}\n'


@pytest.mark.parametrize(
    "spec,encoding,column",
    [
        # `    /* é😀 */ on: ` is 18 UTF-16 units (😀 is 2) and 21 bytes (é 2, 😀 4).
        ("visual-studio-code", types.PositionEncodingKind.Utf16, 18),
        ("neovim@v0.11.0", types.PositionEncodingKind.Utf8, 21),
    ],
)
async def test_columns_on_non_ascii_lines(client: LanguageClient, tmp_path, spec, encoding, column):
    root = tmp_path / "ws"
    uris = write(root, {"defs.jadpo": DEFS, "subs.jadpo": NON_ASCII})
    result = await start(client, root, spec)
    assert result.capabilities.position_encoding == encoding
    found = await diagnostics_until(client, uris["subs.jadpo"], lambda ds: len(ds) > 0)
    assert codes(found) == ["subscriber.unknown_event"]
    assert found[0].range.start == types.Position(line=1, character=column)
    assert found[0].range.end == types.Position(line=1, character=column + 4)
    # Positions the client sends are read in the same encoding: hover on `Nope`.
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=ident(uris["subs.jadpo"]), position=types.Position(line=1, character=column + 1))
    )
    assert "subscriber.unknown_event" in hover.contents.value


async def test_hover(client: LanguageClient, workspace):
    root, uris = workspace
    await start(client, root)
    subs = uris["subs.jadpo"]

    async def hover(text: str, needle: str, after: int = 1) -> str:
        result = await client.text_document_hover_async(
            types.HoverParams(text_document=ident(subs), position=pos(text, needle, after))
        )
        return result.contents.value if result else ""

    # A name: its declaration, from the other file.
    assert "event PaymentReceived {\n    payment_id: string\n    amount_cents: int\n}" in await hover(SUBS, "PaymentReceived")
    assert "connection ledger {" in await hover(SUBS, "fake ledger", 6)
    # A key: its meaning, range and default.
    timeout_doc = await hover(SUBS, "retry:")
    assert "The retry budget" in timeout_doc and "default 10" in timeout_doc
    # A subscriber's retry: the plan of its attempts, as `jadpoc plan` computes it.
    assert "| 20 | 6h | 19s | 1d 7h 15m 45s | 2d 14h 31m 30s |" in timeout_doc
    # A diagnostic: `jadpoc explain`'s text.
    bad = SUBS.replace("attempts: 20, within: 3d", "attempts: 20, within: 1h")
    open_doc(client, subs, bad)
    await diagnostics_until(client, subs, lambda ds: codes(ds) == ["subscriber.retry_unreachable"])
    explained = await hover(bad, "{ attempts", 0)
    assert "# subscriber.retry_unreachable (warning)" in explained


async def test_definition_references_and_rename_across_files(client: LanguageClient, workspace):
    root, uris = workspace
    await start(client, root)
    subs, defs = uris["subs.jadpo"], uris["defs.jadpo"]
    loc = await client.text_document_definition_async(
        types.DefinitionParams(text_document=ident(subs), position=pos(SUBS, "event.payment_id", 7))
    )
    assert loc.uri == defs and loc.range.start == pos(DEFS, "payment_id")

    refs = await client.text_document_references_async(
        types.ReferenceParams(
            text_document=ident(defs),
            position=pos(DEFS, "ledger"),
            context=types.ReferenceContext(include_declaration=True),
        )
    )
    got = sorted((r.uri, r.range.start.line) for r in refs)
    assert got == sorted([(defs, 5), (defs, 10), (subs, 7)])

    # Renaming a field renames its `event.FIELD` uses and the test's emit too.
    prepared = await client.text_document_prepare_rename_async(
        types.PrepareRenameParams(text_document=ident(defs), position=pos(DEFS, "payment_id", 2))
    )
    assert prepared is not None
    edit = await client.text_document_rename_async(
        types.RenameParams(text_document=ident(defs), position=pos(DEFS, "payment_id", 2), new_name="pid")
    )
    changes = {uri: sorted((e.range.start.line, e.range.start.character) for e in es) for uri, es in edit.changes.items()}
    assert changes == {
        defs: [(pos(DEFS, "payment_id").line, pos(DEFS, "payment_id").character)],
        subs: sorted(
            [
                (pos(SUBS, "event.payment_id", 6).line, pos(SUBS, "event.payment_id", 6).character),
                (pos(SUBS, "payment_id: \"p1\"").line, pos(SUBS, "payment_id: \"p1\"").character),
            ]
        ),
    }
    # A taken name, and a name that is no identifier, are refused with an error.
    for bad in ["PaymentReceived", "9lives", "event"]:
        target = "PaymentReceived" if bad != "PaymentReceived" else "payment_id"
        new = bad if bad != "PaymentReceived" else "amount_cents"
        with pytest.raises(Exception) as refused:
            await client.text_document_rename_async(
                types.RenameParams(text_document=ident(defs), position=pos(DEFS, target, 2), new_name=new)
            )
        assert "already exists" in str(refused.value) or "is not a name" in str(refused.value)


async def completion_labels(client: LanguageClient, uri: str, text: str, needle: str, after: int) -> list[str]:
    open_doc(client, uri, text)
    result = await client.text_document_completion_async(
        types.CompletionParams(text_document=ident(uri), position=pos(text, needle, after))
    )
    items = result.items if isinstance(result, types.CompletionList) else result
    return [i.label for i in items]


async def test_completion(client: LanguageClient, workspace):
    root, _ = workspace
    await start(client, root)
    uri = (root / "typing.jadpo").as_uri()
    labels = await completion_labels(client, uri, "\n", "\n", 0)
    assert {"event", "connection", "action", "subscriber", "schedule", "test"} <= set(labels)
    text = "subscriber s {\n    on: \n}\n"
    assert await completion_labels(client, uri, text, "on: ", 4) == ["PaymentReceived"]
    text = "subscriber s {\n    on: PaymentReceived\n    \n}\n"
    assert await completion_labels(client, uri, text, "    \n", 4) == ["run", "retry", "timeout", "where", "order_by", "was"]
    text = "subscriber s {\n    on: PaymentReceived\n    run: rec\n}\n"
    open_doc(client, uri, text)
    result = await client.text_document_completion_async(
        types.CompletionParams(text_document=ident(uri), position=pos(text, "run: rec", 8))
    )
    items = result.items if isinstance(result, types.CompletionList) else result
    assert [i.label for i in items] == ["record_payment"]
    assert items[0].text_edit.new_text == "record_payment(${1:event.payment_id}, ${2:event.amount_cents})"
    assert items[0].insert_text_format == types.InsertTextFormat.Snippet
    text = "subscriber s {\n    on: PaymentReceived\n    run: record_payment(event.)\n}\n"
    assert await completion_labels(client, uri, text, "event.)", 6) == ["payment_id", "amount_cents"]
    text = "action a() {\n    via: \n}\n"
    assert await completion_labels(client, uri, text, "via: ", 5) == ["ledger"]
    text = 'test "t" {\n    fake ledger: [unavailable, ]\n}\n'
    answers = await completion_labels(client, uri, text, ", ]", 2)
    assert {"ok", "hang", "unavailable", "rate_limited", "rejected"} <= set(answers)
    assert "deadline_exceeded" not in answers
    text = 'test "t" {\n    expect \n}\n'
    assert "record_webhook" in await completion_labels(client, uri, text, "expect ", 7)
    text = 'test "t" {\n    retry \n}\n'
    assert await completion_labels(client, uri, text, "retry ", 6) == ["record_webhook"]
    text = 'connection c {\n    url: "https://x"\n    signing: {  }\n}\n'
    assert await completion_labels(client, uri, text, "{  }", 2) == ["secret", "key"]
    text = 'connection c {\n    url: "https://x"\n    sig\n}\n'
    assert "signing" in await completion_labels(client, uri, text, "sig\n", 3)


async def code_actions(client: LanguageClient, uri: str, text: str) -> list[types.CodeAction]:
    end = types.Position(line=text.count("\n") + 1, character=0)
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=ident(uri),
            range=types.Range(start=types.Position(line=0, character=0), end=end),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    return result or []


def apply(text: str, edits: list[types.TextEdit]) -> str:
    lines = text.split("\n")

    def offset(p: types.Position) -> int:
        return sum(len(l) + 1 for l in lines[: p.line]) + p.character

    for e in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[: offset(e.range.start)] + e.new_text + text[offset(e.range.end) :]
    return text


async def test_code_actions(client: LanguageClient, workspace):
    root, uris = workspace
    await start(client, root)
    subs = uris["subs.jadpo"]
    # "did you mean", applied, checks clean.
    typo = SUBS.replace("on: PaymentReceived", "on: PaymentRecieved")
    open_doc(client, subs, typo)
    await diagnostics_until(client, subs, lambda ds: len(ds) > 0)
    actions = await code_actions(client, subs, typo)
    assert [a.title for a in actions] == ["Replace `PaymentRecieved` with `PaymentReceived`"]
    assert actions[0].is_preferred and actions[0].diagnostics[0].code == "subscriber.unknown_event"
    assert apply(typo, actions[0].edit.changes[subs]) == SUBS

    # Both fixes of an unreachable budget.
    tight = SUBS.replace("within: 3d", "within: 1h")
    change_doc(client, subs, 2, tight)
    await diagnostics_until(client, subs, lambda ds: codes(ds) == ["subscriber.retry_unreachable"])
    actions = await code_actions(client, subs, tight)
    assert [a.title for a in actions] == ["Raise `within:` to 1d7h15m45s", "Lower `attempts:` to 8"]
    assert "within: 1d7h15m45s" in apply(tight, actions[0].edit.changes[subs])
    assert "attempts: 8, within: 1h" in apply(tight, actions[1].edit.changes[subs])
    for action in actions:
        change_doc(client, subs, 3, apply(tight, action.edit.changes[subs]))
        await diagnostics_until(client, subs, lambda ds: ds == [])
        change_doc(client, subs, 4, tight)
        await diagnostics_until(client, subs, lambda ds: len(ds) > 0)

    # A missing required key, added with a placeholder.
    missing = SUBS.replace("    on: PaymentReceived\n", "")
    change_doc(client, subs, 5, missing)
    await diagnostics_until(client, subs, lambda ds: "subscriber.missing_on" in codes(ds))
    actions = await code_actions(client, subs, missing)
    add = [a for a in actions if a.title == "Add `on:`"]
    assert len(add) == 1
    assert "    retry: { attempts: 20, within: 3d }\n    on: Event\n}" in apply(missing, add[0].edit.changes[subs])


async def test_formatting_by_the_code_of_jadpoc_fmt(client: LanguageClient, workspace):
    root, _ = workspace
    await start(client, root)
    uri = (root / "messy.jadpo").as_uri()
    messy = "// payments\nevent   E {id: string // the id\n  n:int}\n\n\n\nconnection c {url: \"https://x.example\"}\n"
    open_doc(client, uri, messy)
    options = types.FormattingOptions(tab_size=2, insert_spaces=True)
    edits = await client.text_document_formatting_async(
        types.DocumentFormattingParams(text_document=ident(uri), options=options)
    )
    formatted = apply(messy, edits)
    expected = subprocess.run([JADPOC, "fmt", "-"], input=messy, capture_output=True, text=True, check=True).stdout
    assert formatted == expected
    assert formatted.startswith("// payments\nevent E {\n    id: string // the id\n    n: int\n}\n\nconnection c {")
    # Formatted already: nothing to change. A syntax error: left as it is.
    open_doc(client, uri, formatted, 2)
    assert not await client.text_document_formatting_async(
        types.DocumentFormattingParams(text_document=ident(uri), options=options)
    )
    open_doc(client, uri, "event E {\n  id: \n", 3)
    assert not await client.text_document_formatting_async(
        types.DocumentFormattingParams(text_document=ident(uri), options=options)
    )


async def test_document_and_workspace_symbols(client: LanguageClient, workspace):
    root, uris = workspace
    await start(client, root)
    outline = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=ident(uris["defs.jadpo"]))
    )
    assert [(s.name, s.kind) for s in outline] == [
        ("PaymentReceived", types.SymbolKind.Event),
        ("ledger", types.SymbolKind.Interface),
        ("record_payment", types.SymbolKind.Function),
    ]
    assert [c.name for c in outline[0].children] == ["payment_id", "amount_cents"]
    assert outline[0].selection_range.start == pos(DEFS, "PaymentReceived")
    found = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="record"))
    names = sorted((s.name, s.location.uri) for s in found)
    assert names == sorted([("record_payment", uris["defs.jadpo"]), ("record_webhook", uris["subs.jadpo"])])


async def test_inlay_hints(client: LanguageClient, workspace):
    root, uris = workspace
    text = SUBS + "\nsubscriber plain {\n    on: PaymentReceived\n    run: record_payment(event.payment_id, 1)\n}\n"
    (root / "subs.jadpo").write_text(text, encoding="utf-8")
    await start(client, root)
    hints = await client.text_document_inlay_hint_async(
        types.InlayHintParams(
            text_document=ident(uris["subs.jadpo"]),
            range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=999, character=0)),
        )
    )
    assert [(h.position, h.label) for h in hints] == [
        (pos(text, "within: 3d }", 12), "20 attempts, last ≈ 2d15h after the event"),
        (pos(text, "plain", 5), "10 attempts, last ≈ 4h16m after the event"),
    ]


async def test_shutdown_and_exit(client: LanguageClient, workspace):
    root, _ = workspace
    await start(client, root)
    await client.shutdown_async(None)
    client.exit(None)
    await client._server.wait()
    assert client._server.returncode == 0
    # Already shut down: the fixture has nothing left to do.
    client.capabilities = None


async def test_findings_against_a_baseline_appear_as_diagnostics(client: LanguageClient, workspace, tmp_path):
    """With `initializationOptions.diffBaseline`, `jadpoc diff`'s findings against
    the baseline are diagnostics (breaking ones warnings), compared again on save."""
    root, uris = workspace
    # The baseline: the same program with a second subscriber, which the
    # workspace's program no longer has, and a longer budget.
    baseline = tmp_path / "baseline"
    audit = SUBS.split("test ")[0].replace("record_webhook", "audit_webhook").replace("attempts: 20", "attempts: 30")
    write(baseline, {"defs.jadpo": DEFS, "subs.jadpo": SUBS.replace("attempts: 20", "attempts: 30") + audit})
    folders = [types.WorkspaceFolder(uri=root.as_uri(), name=root.name)]
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            workspace_folders=folders,
            initialization_options={"diffBaseline": str(baseline)},
        )
    )
    found = await diagnostics_until(client, uris["subs.jadpo"], lambda ds: "subscriber.removed" in codes(ds))
    removed = next(d for d in found if d.code == "subscriber.removed")
    assert removed.source == "jadpo diff"
    assert removed.severity == types.DiagnosticSeverity.Warning
    assert "audit_webhook" in removed.message and "in the baseline at subs.jadpo:" in removed.message
    tightened = next(d for d in found if d.code == "subscriber.budget_tightened")
    assert tightened.range.start == pos(SUBS, "record_webhook")

    # Putting the subscriber back and saving: compared again, the removal is gone.
    text = SUBS + audit.replace("attempts: 30", "attempts: 20")
    (root / "subs.jadpo").write_text(text, encoding="utf-8")
    open_doc(client, uris["subs.jadpo"], text)
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=ident(uris["subs.jadpo"])))
    await diagnostics_until(client, uris["subs.jadpo"], lambda ds: "subscriber.removed" not in codes(ds))
