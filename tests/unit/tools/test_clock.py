"""``get_current_date``: the right date in the run's time zone, a helpful refusal for a bad zone."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.fixtures.tool_rounds import Call, Calls
from tools import clock
from tools.builtin import CURRENT_DATE, builtin_registry
from tools.clock import WEEKDAYS_ZH, current_date
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


def test_every_argument_is_optional_and_none_is_today_exactly_as_before() -> None:
    assert CURRENT_DATE.parameters.get("required", []) == []
    assert "tool_context" not in CURRENT_DATE.parameters["properties"]
    assert CURRENT_DATE.name == "get_current_date"
    assert set(current_date(ToolContext(timezone="UTC"), now=NOW)) == {
        "date", "time", "weekday", "weekday_zh", "timezone", "iso",
    }  # fmt: skip


# Sunday 6 December 2026, 10:00 in Shanghai.
SUNDAY = datetime(2026, 12, 6, 2, 0, tzinfo=UTC)
SHANGHAI = ToolContext(timezone="Asia/Shanghai")


@pytest.fixture
def pinned(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``clock.now`` pinned to SUNDAY, recording the zones it was asked for."""
    zones: list[Any] = []

    def fixed(zone: Any = None) -> datetime:
        zones.append(zone)
        return SUNDAY.astimezone(zone) if zone is not None else SUNDAY

    monkeypatch.setattr(clock, "now", fixed)
    return zones


def test_every_reading_of_the_time_goes_through_clock_now(pinned: list[Any]) -> None:
    assert current_date(SHANGHAI)["date"] == "2026-12-06"
    assert current_date(SHANGHAI, days=3)["date"] == "2026-12-09"
    assert current_date()["iso"].startswith("2026-12-06") or current_date()["iso"].startswith("2026-12-05")
    assert [str(z) for z in pinned[:2]] == ["Asia/Shanghai", "Asia/Shanghai"] and pinned[2] is None


@pytest.mark.parametrize(
    ("args", "day", "weekday_zh", "days_from_today"),
    [
        ({"days": 1}, "2026-12-07", "星期一", 1),
        ({"days": -2}, "2026-12-04", "星期五", -2),
        ({"weeks": 1, "weekday": "wednesday"}, "2026-12-09", "星期三", 3),  # 下周三, asked on a Sunday
        ({"weeks": 1, "weekday": "friday"}, "2026-12-11", "星期五", 5),
        ({"weeks": -1, "weekday": "monday"}, "2026-11-23", "星期一", -13),
        ({"weekday": "monday"}, "2026-11-30", "星期一", -6),  # this week began on Monday the 30th
        ({"weeks": 2}, "2026-12-20", "星期日", 14),
        ({"months": -1}, "2026-11-06", "星期五", -30),
        ({"months": 1, "day": 1}, "2027-01-01", "星期五", 26),
        ({"years": 1}, "2027-12-06", "星期一", 365),
        ({"date": "2027-03-14"}, "2027-03-14", "星期日", 98),
        ({"date": "12-25"}, "2026-12-25", "星期五", 19),
        ({"date": "03-05", "years": 1}, "2027-03-05", "星期五", 89),
        ({"date": "2027-01-31", "months": 1}, "2027-02-28", "星期日", 84),  # a shorter month: its last day
    ],
)
def test_another_day_is_counted_from_today_in_the_run_zone(
    pinned: list[Any], args: dict[str, Any], day: str, weekday_zh: str, days_from_today: int
) -> None:
    result = current_date(SHANGHAI, **args)
    assert (result["date"], result["weekday_zh"], result["days_from_today"]) == (
        day,
        weekday_zh,
        days_from_today,
    )
    assert result["today"] == "2026-12-06" and result["timezone"] == "Asia/Shanghai"
    assert result["weekday"] == datetime.fromisoformat(day).strftime("%A")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"date": "2027-02-30"}, "not a calendar date"),
        ({"date": "next friday"}, "YYYY-MM-DD"),
        ({"months": 2, "day": 31}, "2027-02 has no day 31"),
        ({"years": 5000}, "years must be between"),
        ({"date": "9999-12-31", "days": 1}, "outside the calendar"),
    ],
)
def test_a_day_that_cannot_be_worked_out_is_a_tool_error_saying_why(
    pinned: list[Any], args: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolError, match=message):
        current_date(SHANGHAI, **args)


def test_through_the_executor_the_arguments_are_validated_like_every_tool_s(pinned: list[Any]) -> None:
    executor = Calls(builtin_registry())
    ok, bad_weekday, bad_type, unknown = executor.run(
        [
            Call("1", "get_current_date", {"weeks": 1, "weekday": "wednesday"}),
            Call("2", "get_current_date", {"weekday": "someday"}),
            Call("3", "get_current_date", {"days": "three"}),
            Call("4", "get_current_date", {"hours": 3}),
        ],
        SHANGHAI,
    )
    assert ok.status == "success" and json.loads(ok.content)["date"] == "2026-12-09"
    assert bad_weekday.status == "error" and "weekday: Input should be 'monday'" in bad_weekday.content
    assert bad_type.status == "error" and "days: Input should be a valid integer" in bad_type.content
    assert unknown.status == "error" and "unexpected argument(s) 'hours'" in unknown.content


def test_through_the_executor_the_run_zone_comes_from_the_tool_context() -> None:
    executor = Calls(builtin_registry())
    [ok, refused] = executor.run(
        [
            Call("1", "get_current_date", {}),
            Call("2", "get_current_date", {"timezone": "UTC"}),
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
    [outcome] = Calls(builtin_registry()).run(
        [Call("1", "get_current_date", {})], ToolContext(timezone="Nowhere/Special")
    )
    assert outcome.status == "error"
    assert outcome.content == (
        "Error: unknown time zone 'Nowhere/Special'; set KB_AGENT_TIMEZONE to an IANA name"
    )
