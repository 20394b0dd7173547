"""End-to-end tests of `jadpoc lsp` through a real LSP client (pygls, by pytest-lsp).

Each test starts the built server (`target/debug/jadpoc lsp`, or `$JADPOC`) over
stdio, opens a workspace folder it writes in a temporary directory, and talks to
the server as an editor would. Nothing sleeps: waits are on conditions (a
notification that satisfies a predicate), with generous deadlines.
"""

from __future__ import annotations

import asyncio
import os
import pathlib

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

REPO = pathlib.Path(__file__).resolve().parents[2]
JADPOC = os.environ.get("JADPOC", str(REPO / "target" / "debug" / "jadpoc"))
DEADLINE = 30.0


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[JADPOC, "lsp"]))
async def client(lsp_client: LanguageClient):
    # An editor accepts the server's request to watch `.jadpo` files.
    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: types.RegistrationParams) -> None:
        return None

    yield
    await lsp_client.shutdown_session()


async def start(
    client: LanguageClient, root: pathlib.Path | None, spec: str = "visual-studio-code"
) -> types.InitializeResult:
    """Initializes the server with `root` as its workspace folder (or none)."""
    folders = None
    if root is not None:
        folders = [types.WorkspaceFolder(uri=root.as_uri(), name=root.name)]
    params = types.InitializeParams(
        capabilities=client_capabilities(spec),
        workspace_folders=folders,
        root_uri=root.as_uri() if root is not None else None,
    )
    return await client.initialize_session(params)


def write(root: pathlib.Path, files: dict[str, str]) -> dict[str, str]:
    """Writes `files` under `root`; returns each one's URI by name."""
    uris = {}
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        uris[name] = path.as_uri()
    return uris


async def diagnostics_until(client: LanguageClient, uri: str, predicate) -> list[types.Diagnostic]:
    """Waits until the diagnostics published for `uri` satisfy `predicate`."""

    async def wait():
        while True:
            current = client.diagnostics.get(uri)
            if current is not None and predicate(list(current)):
                return list(current)
            await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

    return await asyncio.wait_for(wait(), DEADLINE)


def codes(diagnostics) -> list[str]:
    return [d.code for d in diagnostics]


def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="jadpo", version=version, text=text)
        )
    )


def change_doc(client: LanguageClient, uri: str, version: int, text: str, range: types.Range | None = None) -> None:
    """Sends one edit: the whole text, or `text` in place of `range`."""
    if range is None:
        change = types.TextDocumentContentChangeWholeDocument(text=text)
    else:
        change = types.TextDocumentContentChangePartial(range=range, text=text)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[change],
        )
    )


def pos(text: str, needle: str, after: int = 0) -> types.Position:
    """The UTF-16 position of `needle` in `text` (plus `after` characters)."""
    offset = text.index(needle) + after
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    col = len(text[start:offset].encode("utf-16-le")) // 2
    return types.Position(line=line, character=col)


def doc_pos(uri: str, position: types.Position) -> types.TextDocumentPositionParams:
    return types.TextDocumentPositionParams(text_document=types.TextDocumentIdentifier(uri=uri), position=position)


DEFS = """\
event PaymentReceived {
    payment_id: string
    amount_cents: int
}

connection ledger {
    url: "https://ledger.example.com"
}

action record_payment(payment_id: string, amount_cents: int) {
    via: ledger
    idempotent: true
}
"""

SUBS = """\
subscriber record_webhook {
    on: PaymentReceived
    run: record_payment(event.payment_id, event.amount_cents)
    retry: { attempts: 20, within: 3d }
}

test "the ledger answers" {
    fake ledger: [ok]
    emit PaymentReceived { payment_id: "p1", amount_cents: 5 }
    wait 1s
    expect record_webhook { state: succeeded }
}
"""


@pytest.fixture
def workspace(tmp_path: pathlib.Path):
    """A clean two-file program: declarations in one file, uses in the other."""
    root = tmp_path / "ws"
    root.mkdir()
    uris = write(root, {"defs.jadpo": DEFS, "subs.jadpo": SUBS})
    return root, uris
