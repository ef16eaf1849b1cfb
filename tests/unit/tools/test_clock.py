"""``get_current_date``: the right date in the run's time zone, a helpful refusal for a bad zone."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from tools import clock
from tools.builtin import CURRENT_DATE, builtin_registry
from tools.clock import WEEKDAYS_ZH, current_date
from tools.executor import ToolCallRequest, ToolExecutor
from tools.registry import ToolContext, ToolError

# 2024-01-01 20:30 UTC is already Tuesday 2 January 04:30 in Shanghai (UTC+8).
NOW = datetime(2024, 1, 1, 20, 30, 15, tzinfo=UTC)


@pytest.fixture
def local_tz() -> Iterator[str]:
    """Pin the process's local zone (TZ + tzset) to one that is neither UTC nor Shanghai, then restore it."""
    if not hasattr(time, "tzset"):
        pytest.skip("time.tzset is not available on this platform")
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        yield "America/New_York"
    finally:
        if saved is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved
        time.tzset()


def test_shanghai_date_and_chinese_weekday_for_a_fixed_moment() -> None:
    result = current_date(ToolContext(timezone="Asia/Shanghai"), now=NOW)
    assert result == {
        "date": "2024-01-02",
        "time": "04:30:15",
        "weekday": "Tuesday",
        "weekday_zh": "星期二",
        "timezone": "Asia/Shanghai",
        "iso": "2024-01-02T04:30:15+08:00",
    }


def test_the_same_moment_is_still_monday_in_utc() -> None:
    result = current_date(ToolContext(timezone="UTC"), now=NOW)
    assert (result["date"], result["weekday_zh"], result["timezone"]) == ("2024-01-01", "星期一", "UTC")


def test_a_moment_given_in_another_offset_is_converted_to_the_run_zone() -> None:
    moment = datetime(2024, 3, 10, 23, 0, tzinfo=timezone(timedelta(hours=-5)))  # 11 Mar 04:00 UTC
    result = current_date(ToolContext(timezone="Asia/Shanghai"), now=moment)
    assert result["date"] == "2024-03-11"
    assert result["time"] == "12:00:00"
    assert result["weekday_zh"] == "星期一"


@pytest.mark.parametrize(
    ("day", "weekday_zh"),
    [(1, "星期一"), (2, "星期二"), (3, "星期三"), (4, "星期四"), (5, "星期五"), (6, "星期六"), (7, "星期日")],
)
def test_every_weekday_has_its_chinese_name(day: int, weekday_zh: str) -> None:
    # 1 January 2024 (Shanghai) was a Monday.
    moment = datetime(2024, 1, day, 12, 0, tzinfo=UTC)
    assert current_date(ToolContext(timezone="Asia/Shanghai"), now=moment)["weekday_zh"] == weekday_zh
    assert len(WEEKDAYS_ZH) == 7


@pytest.mark.parametrize(
    "zone", ["Mars/Olympus_Mons", "asia/shanghai", "UTC+8", "../etc/passwd", "/etc/localtime"]
)
def test_an_unknown_zone_raises_a_tool_error_mentioning_the_setting(zone: str) -> None:
    with pytest.raises(ToolError) as info:
        current_date(ToolContext(timezone=zone), now=NOW)
    assert "KB_AGENT_TIMEZONE" in str(info.value)
    assert repr(zone) in str(info.value)


@pytest.mark.parametrize("zone", ["Asia", "America"])
def test_a_zone_naming_a_region_directory_raises_a_tool_error_mentioning_the_setting(zone: str) -> None:
    # Regression: IsADirectoryError (an OSError) escaped as a generic failure without the setting's name.
    try:
        ZoneInfo(zone)
    except OSError:
        pass  # the case in question: tzdata is installed and the key names one of its directories
    except Exception:
        pytest.skip(f"ZoneInfo({zone!r}) does not raise OSError here (no tzdata package)")
    with pytest.raises(ToolError, match="KB_AGENT_TIMEZONE"):
        current_date(ToolContext(timezone=zone), now=NOW)


def test_empty_timezone_uses_local_time(local_tz: str) -> None:
    result = current_date(ToolContext(timezone=""), now=NOW)
    # 20:30 UTC on 1 January is 15:30 EST the same day.
    assert result["date"] == "2024-01-01"
    assert result["time"] == "15:30:15"
    assert result["weekday_zh"] == "星期一"
    assert result["timezone"] == "EST"
    assert result["iso"] == "2024-01-01T15:30:15-05:00"


def test_no_context_at_all_uses_local_time(local_tz: str) -> None:
    assert current_date(now=NOW)["iso"] == "2024-01-01T15:30:15-05:00"


def test_without_a_fixed_moment_it_reports_the_current_date_in_the_zone() -> None:
    before = datetime.now(UTC)
    result = current_date(ToolContext(timezone="Asia/Shanghai"))
    after = datetime.now(UTC)
    reported = datetime.fromisoformat(result["iso"])
    assert reported.utcoffset() == timedelta(hours=8)
    assert before.replace(microsecond=0) <= reported <= after
    assert result["date"] in {d.astimezone(reported.tzinfo).date().isoformat() for d in (before, after)}


def test_the_tool_takes_no_arguments_from_the_model() -> None:
    assert clock.PARAMETERS == {"type": "object", "properties": {}, "additionalProperties": False}
    assert CURRENT_DATE.wants_context is True
    assert CURRENT_DATE.name == "get_current_date"


def test_through_the_executor_the_run_zone_comes_from_the_tool_context() -> None:
    executor = ToolExecutor(builtin_registry())
    [ok, refused] = executor.run(
        [
            ToolCallRequest("1", "get_current_date", {}),
            ToolCallRequest("2", "get_current_date", {"timezone": "UTC"}),
        ],
        ToolContext(timezone="Asia/Shanghai"),
    )
    assert ok.status == "success"
    payload = json.loads(ok.content)
    assert payload["timezone"] == "Asia/Shanghai"
    assert payload["iso"].endswith("+08:00")
    assert payload["weekday_zh"] in WEEKDAYS_ZH
    assert "星期" in ok.content  # non-ASCII kept for the model
    assert refused.status == "error"
    assert "unexpected argument(s) 'timezone'" in refused.content


def test_through_the_executor_an_unknown_zone_tells_the_model_about_the_setting() -> None:
    [outcome] = ToolExecutor(builtin_registry()).run(
        [ToolCallRequest("1", "get_current_date", {})], ToolContext(timezone="Nowhere/Special")
    )
    assert outcome.status == "error"
    assert outcome.content == (
        "Error: unknown time zone 'Nowhere/Special'; set KB_AGENT_TIMEZONE to an IANA name"
    )
