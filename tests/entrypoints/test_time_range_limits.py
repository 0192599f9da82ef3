"""Moments at the edge of what a datetime can hold: a clear error for given timestamps, and a question's
impossible time phrase restricts nothing. None of them may reach the caller as an internal error."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from test_mcp_tools import connected, ok, refused
from typer.testing import CliRunner

from memory_orchestrator.domain.time_expressions import infer_time_window
from memory_orchestrator.entrypoints.cli.app import app
from memory_orchestrator.ports import InvalidRequest, ensure_utc, parse_timestamp

NOW = datetime(2026, 5, 20, 9, 0, tzinfo=UTC)
runner = CliRunner()


@pytest.mark.parametrize(
    "question",
    [
        "what changed in the last 3000 years?",
        "what happened on 9999-12-31?",
        "anything in the past 99999999 days",
        "before 0001-01-01",
        "after 9999-12-31",
    ],
)
def test_impossible_time_phrases_in_a_question_restrict_nothing_out_of_range(question: str) -> None:
    window = infer_time_window(question, NOW).window
    if window is not None:
        for side in (window.start, window.end):
            assert side is None or ensure_utc(side) == side


@pytest.mark.parametrize(
    "moment",
    [
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-14))),
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
        datetime(9999, 12, 31, tzinfo=UTC),
    ],
)
def test_moments_outside_the_supported_range_are_invalid_requests(moment: datetime) -> None:
    with pytest.raises(InvalidRequest, match="out of range"):
        ensure_utc(moment)
    with pytest.raises(ValueError, match="out of range"):
        parse_timestamp(moment.isoformat())


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["remember", "x", "--created-at", "9999-12-31T23:59:59Z"], "--created-at"),
        (["recall", "x", "--now", "9999-12-31T23:59:59-14:00"], "--now"),
        (["recall", "x", "--since", "0001-01-01T00:00:00+14:00"], "--since"),
    ],
)
def test_cli_out_of_range_timestamps_exit_2_with_one_line(
    isolated: object, args: list[str], option: str
) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and option in lines[0] and "out of range" in lines[0]
    assert "Traceback" not in result.output


def test_cli_search_with_an_impossible_time_phrase_answers(isolated: object) -> None:
    result = runner.invoke(app, ["search", "-q", "what changed in the last 3000 years?", "--json"])
    assert result.exit_code == 0, result.output


@pytest.mark.anyio
async def test_mcp_out_of_range_moments_are_tool_errors_not_internal_errors() -> None:
    async with connected() as (client, _):
        found = await ok(client, "memory_search", {"query": "what changed in the last 3000 years?"})
        changes = await refused(client, "memory_changes", {"since": "0001-01-01T00:00:00+14:00"})
        far = await refused(client, "memory_changes", {"since": "9999-12-31T23:59:59Z"})
        ages = await refused(client, "memory_changes", {"since": "99999999 days"})
    assert found["items"] == []
    assert "out of range" in changes and "internal" not in changes.lower()
    assert "out of range" in far and "out of range" in ages
