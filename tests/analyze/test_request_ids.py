"""The request-id check of `validate`: kept (echoed or inside the server's id), lost, none."""

from __future__ import annotations

from infertriage.analyze.golive.request_ids import honours_request_id, request_id_check
from infertriage.schemas import CheckStatus, ErrorKind, RequestRecord


def _record(i: int, server_id: str, ok: bool = True) -> RequestRecord:
    kind = ErrorKind.NONE if ok else ErrorKind.HTTP
    return RequestRecord(id=f"run-{i}", scheduled_ts=0.0, sent_ts=0.0, error_kind=kind,
                         server_request_id=server_id)  # fmt: skip


def test_an_id_echoed_or_inside_the_servers_is_kept() -> None:
    assert honours_request_id(_record(1, "run-1"))
    assert honours_request_id(_record(1, "chatcmpl-run-1"))  # vLLM's name for it
    assert not honours_request_id(_record(1, "chatcmpl-5f2c9a"))
    assert not honours_request_id(_record(1, ""))


def test_all_kept_passes_and_a_lost_id_is_a_warning_with_the_fix() -> None:
    kept = request_id_check([_record(i, f"chatcmpl-run-{i}") for i in range(4)])
    assert kept.status is CheckStatus.PASS
    lost = request_id_check([_record(0, "chatcmpl-run-0"), _record(1, "chatcmpl-9d1e")])
    assert lost.status is CheckStatus.WARN
    assert "1 of 2 requests kept their X-Request-Id" in lost.detail
    assert "'chatcmpl-9d1e'" in lost.detail and "proxy_set_header X-Request-Id" in lost.detail
    assert request_id_check([_record(0, "", ok=False)]).status is CheckStatus.SKIP
