"""A subscriber's `where:` and `order_by:`, a connection's `rate:` and `burst:`, as
an editor meets them: their diagnostics, completion and hover."""

from __future__ import annotations

import json
import subprocess

from lsprotocol import types
from pytest_lsp import LanguageClient

from conftest import JADPOC, codes, diagnostics_until, open_doc, pos, start, write

PROGRAM = """\
event PaymentReceived {
    payment_id: string
    customer_id: string
    amount_cents: int
    currency: string?
    vip: bool
    ratio: float
}

connection ledger {
    url: "https://ledger.example.com"
    rate: 50/s
}

action record_payment(payment_id: string, amount_cents: int) {
    via: ledger
    idempotent: true
}

subscriber large_payments {
    on: PaymentReceived
    where: event.amount_cents >= 10000 and event.currency == "EUR"
    order_by: event.customer_id
    run: record_payment(event.payment_id, event.amount_cents)
}
"""


def ident(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


async def hover(client: LanguageClient, uri: str, text: str, needle: str, after: int = 1) -> str:
    result = await client.text_document_hover_async(
        types.HoverParams(text_document=ident(uri), position=pos(text, needle, after))
    )
    return result.contents.value if result else ""


async def completion(client: LanguageClient, uri: str, text: str, needle: str, after: int) -> list[types.CompletionItem]:
    open_doc(client, uri, text)
    result = await client.text_document_completion_async(
        types.CompletionParams(text_document=ident(uri), position=pos(text, needle, after))
    )
    return result.items if isinstance(result, types.CompletionList) else result


async def test_the_new_codes_arrive_as_jadpoc_check_reports_them(client: LanguageClient, tmp_path):
    root = tmp_path / "ws"
    wrong = (
        PROGRAM.replace('event.currency == "EUR"', "event.currency == 3")
        .replace("order_by: event.customer_id", "order_by: event.ratio")
        .replace("rate: 50/s", "rate: 50/week")
    )
    uris = write(root, {"app.jadpo": wrong})
    await start(client, root)
    found = await diagnostics_until(client, uris["app.jadpo"], lambda ds: len(ds) > 0)
    assert sorted(codes(found)) == ["connection.rate_invalid", "subscriber.order_by_invalid", "subscriber.where_invalid"]
    # The same codes, places and messages as `jadpoc check --format json`.
    checked = subprocess.run(
        [JADPOC, "check", "--format", "json", str(root / "app.jadpo")], capture_output=True, text=True
    )
    assert checked.returncode == 1, checked.stderr
    expected = json.loads(checked.stdout)["diagnostics"]
    by_code = {d.code: d for d in found}
    assert sorted(by_code) == sorted(d["code"] for d in expected)
    for d in expected:
        got = by_code[d["code"]]
        assert got.message.startswith(d["message"]), (got.message, d["message"])
        assert got.severity == types.DiagnosticSeverity.Error
    rate = by_code["connection.rate_invalid"]
    assert rate.range.start == pos(wrong, "50/week") and rate.range.end == pos(wrong, "50/week", 7)
    assert "`week` is not a rate's unit" in rate.message
    where = by_code["subscriber.where_invalid"]
    assert "is compared with an `int`" in where.message
    order = by_code["subscriber.order_by_invalid"]
    assert "`event.ratio` is `float`" in order.message

    # Fixed in the buffer: every diagnostic is cleared.
    open_doc(client, uris["app.jadpo"], PROGRAM)
    await diagnostics_until(client, uris["app.jadpo"], lambda ds: ds == [])


async def test_completion_of_fields_in_where_and_order_by_and_the_new_keys(client: LanguageClient, tmp_path):
    root = tmp_path / "ws"
    write(root, {"app.jadpo": PROGRAM})
    await start(client, root)
    uri = (root / "typing.jadpo").as_uri()
    fields = ["payment_id", "customer_id", "amount_cents", "currency", "vip", "ratio"]

    def sub(body: str) -> str:
        return f"subscriber s {{\n    on: PaymentReceived\n    {body}\n    run: record_payment(event.payment_id, 1)\n}}\n"

    text = sub("where: event.amount_cents > 5 and event.")
    items = await completion(client, uri, text, "and event.", 10)
    assert [i.label for i in items] == fields
    assert items[2].detail == "amount_cents: int"
    text = sub("where: (event.vip or event.)")
    assert [i.label for i in await completion(client, uri, text, "or event.", 9)] == fields
    # Where an operand starts, the whole path.
    text = sub("where: not ")
    items = await completion(client, uri, text, "not ", 4)
    assert [i.label for i in items] == [f"event.{f}" for f in fields]
    text = sub("order_by: event.")
    assert [i.label for i in await completion(client, uri, text, "order_by: event.", 16)] == fields
    text = sub("order_by: ")
    assert [i.label for i in await completion(client, uri, text, "order_by: ", 10)] == [f"event.{f}" for f in fields]
    # The new keys, where the checker takes them.
    text = "subscriber s {\n    on: PaymentReceived\n    \n}\n"
    labels = [i.label for i in await completion(client, uri, text, "    \n", 4)]
    assert labels == ["run", "retry", "timeout", "where", "order_by", "was"]
    text = 'connection c {\n    url: "https://x.example"\n    \n}\n'
    items = await completion(client, uri, text, "    \n", 4)
    assert [i.label for i in items] == ["timeout", "retry", "headers", "max_in_flight", "tls", "signing", "rate", "burst", "was"]
    assert items[6].text_edit.new_text == "rate: ${1:50/s}"
    assert "10000/s" in items[6].detail


async def test_hover_on_where_its_fields_and_rate(client: LanguageClient, tmp_path):
    root = tmp_path / "ws"
    uris = write(root, {"app.jadpo": PROGRAM})
    await start(client, root)
    uri = uris["app.jadpo"]
    await diagnostics_until(client, uri, lambda ds: ds == [])

    # On the key: what it means, then the filter's fields with their types.
    shown = await hover(client, uri, PROGRAM, "where:")
    assert shown.startswith("`where:` Which events the subscriber takes")
    assert "**Filter**: the `PaymentReceived` events this subscriber takes" in shown
    assert "| `event.amount_cents` | `int` |\n| `event.currency` | `string?` |\n" in shown
    assert "`event.vip`" not in shown
    # On an operator or a literal of the condition: the same filter.
    for needle in [">= 10000", "and event", '"EUR"']:
        assert "| `event.amount_cents` | `int` |" in await hover(client, uri, PROGRAM, needle), needle
    # On a field in the condition: the field, as anywhere else.
    shown = await hover(client, uri, PROGRAM, "amount_cents >=", 3)
    assert shown.startswith("```jadpo\namount_cents: int\n```")
    assert "field of event `PaymentReceived`" in shown
    # On `rate:` and its value: what it means for a backlog.
    for needle, after in [("rate:", 1), ("50/s", 2)]:
        shown = await hover(client, uri, PROGRAM, needle, after)
        assert "**Rate** `50/s`: 50 calls a second, one every 20ms" in shown, needle
        assert "- `50/s`: 10,000 events drain in 3m20s" in shown, needle
    # With a burst, the first calls start at once.
    burst = PROGRAM.replace("rate: 50/s", "rate: 50/s\n    burst: 100")
    open_doc(client, uri, burst)
    await diagnostics_until(client, uri, lambda ds: ds == [])
    shown = await hover(client, uri, burst, "burst:")
    assert "and up to 100 at once after a quiet spell" in shown
    assert "- `50/s`: 10,000 events drain in 3m18s" in shown
