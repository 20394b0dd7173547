"""Whatever is typed or found on disk, the server answers every request (a result,
possibly empty, or a JSON-RPC error) and never dies."""

from __future__ import annotations

import pathlib

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from conftest import DEFS, SUBS, change_doc, diagnostics_until, open_doc, start, write


def ident(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


async def answers_everything(client: LanguageClient, uri: str, text: str) -> None:
    """Sends every request the server answers, at positions inside the text, at the
    end of each line, past the end of a line and past the end of the file; each must
    get an answer, and the server must still be running."""
    lines = text.split("\n")
    positions = [
        types.Position(line=0, character=0),
        types.Position(line=0, character=10_000),
        types.Position(line=len(lines) - 1, character=len(lines[-1])),
        types.Position(line=len(lines) + 50, character=3),
    ]
    positions += [types.Position(line=i, character=len(l) // 2) for i, l in enumerate(lines[:40])]
    whole = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=len(lines) + 50, character=0))
    for p in positions:
        at = dict(text_document=ident(uri), position=p)
        await client.text_document_hover_async(types.HoverParams(**at))
        await client.text_document_completion_async(types.CompletionParams(**at))
        await client.text_document_definition_async(types.DefinitionParams(**at))
        await client.text_document_references_async(
            types.ReferenceParams(**at, context=types.ReferenceContext(include_declaration=True))
        )
        await client.text_document_prepare_rename_async(types.PrepareRenameParams(**at))
        try:
            await client.text_document_rename_async(types.RenameParams(**at, new_name="renamed"))
        except Exception as refused:  # A JSON-RPC error is an answer.
            assert "name" in str(refused)
    await client.text_document_code_action_async(
        types.CodeActionParams(text_document=ident(uri), range=whole, context=types.CodeActionContext(diagnostics=[]))
    )
    await client.text_document_formatting_async(
        types.DocumentFormattingParams(
            text_document=ident(uri), options=types.FormattingOptions(tab_size=4, insert_spaces=True)
        )
    )
    await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=ident(uri)))
    await client.workspace_symbol_async(types.WorkspaceSymbolParams(query=""))
    await client.text_document_inlay_hint_async(types.InlayHintParams(text_document=ident(uri), range=whole))
    assert client._server.returncode is None, "the server died"


BAD_TEXTS = {
    "half-written declarations": "event E {\n    id: str\nsubscriber s {\n    on: \n    run: record_payment(event.\naction",
    "unterminated string": 'connection c {\n    url: "https://x\n}\n',
    "unterminated comment": "event E {\n    id: string\n}\n/* never closed\nsubscriber s {",
    "deep nesting": "subscriber s {\n    run: f(" + "[" * 100_000 + "\n}\n",
    "nothing but noise": "\x00\x01 ☃ }}}{{{ ::: ,,, \"\n\\",
    "empty": "",
}


@pytest.mark.parametrize("name", list(BAD_TEXTS))
async def test_bad_text_is_answered(client: LanguageClient, workspace, name):
    root, uris = workspace
    await start(client, root)
    uri = (root / "bad.jadpo").as_uri()
    text = BAD_TEXTS[name]
    open_doc(client, uri, text)
    await diagnostics_until(client, uri, lambda ds: True)
    await answers_everything(client, uri, text)
    # Typing on, character by character, into the same buffer.
    for i, ch in enumerate("subscriber x { on: "):
        end = types.Position(line=0, character=i)
        change_doc(client, uri, 2 + i, ch, types.Range(start=end, end=end))
    await answers_everything(client, uri, "subscriber x { on: " + text)


async def test_invalid_utf8_on_disk(client: LanguageClient, workspace):
    root, uris = workspace
    (root / "latin1.jadpo").write_bytes(b"event Caf\xe9 {\n    id: string\n}\n")
    await start(client, root)
    uri = (root / "latin1.jadpo").as_uri()
    found = await diagnostics_until(client, uri, lambda ds: len(ds) > 0)
    assert "not UTF-8" in found[0].message
    assert found[0].range.start == types.Position(line=0, character=9)
    # The other files are still checked and answered.
    await diagnostics_until(client, uris["subs.jadpo"], lambda ds: ds == [])
    await answers_everything(client, uris["subs.jadpo"], SUBS)
    await answers_everything(client, uri, "")


async def test_a_file_deleted_while_open(client: LanguageClient, workspace):
    root, uris = workspace
    await start(client, root)
    open_doc(client, uris["defs.jadpo"], DEFS)
    (root / "defs.jadpo").unlink()
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=uris["defs.jadpo"], type=types.FileChangeType.Deleted)]
        )
    )
    # Still open: its buffer still counts.
    await answers_everything(client, uris["defs.jadpo"], DEFS)
    assert await diagnostics_until(client, uris["subs.jadpo"], lambda ds: True) == []
    # Closed: gone from the program, so the other file's names no longer resolve.
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=ident(uris["defs.jadpo"])))
    found = await diagnostics_until(client, uris["subs.jadpo"], lambda ds: len(ds) > 0)
    assert "subscriber.unknown_event" in [d.code for d in found]
    await answers_everything(client, uris["defs.jadpo"], DEFS)


async def test_a_workspace_with_no_jadpo_file(client: LanguageClient, tmp_path: pathlib.Path):
    root = tmp_path / "empty"
    root.mkdir()
    (root / "README.md").write_text("nothing here\n", encoding="utf-8")
    await start(client, root)
    found = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query=""))
    assert found == []
    uri = (root / "new.jadpo").as_uri()
    open_doc(client, uri, "event E {\n    id: string\n}\n")
    found = await diagnostics_until(client, uri, lambda ds: len(ds) > 0)
    assert [d.code for d in found] == ["event.unused"]
    await answers_everything(client, uri, "event E {\n    id: string\n}\n")


async def test_no_workspace_folder_at_all(client: LanguageClient, tmp_path: pathlib.Path):
    await start(client, None)
    uri = write(tmp_path, {"one.jadpo": DEFS + SUBS})["one.jadpo"]
    open_doc(client, uri, DEFS + SUBS)
    assert await diagnostics_until(client, uri, lambda ds: True) == []
    await answers_everything(client, uri, DEFS + SUBS)


async def test_unknown_methods_get_an_error(client: LanguageClient, workspace):
    root, _ = workspace
    await start(client, root)
    with pytest.raises(Exception) as error:
        await client.protocol.send_request_async("jadpo/noSuchMethod", {})
    assert "noSuchMethod" in str(error.value)
