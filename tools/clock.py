"""``get_current_date``: the model cannot know today's date, nor count days from it; the application can.

Without arguments the tool returns today's date, the time, the weekday and the time zone. With arguments it
returns another day, worked out from today (or from a given ``date``, YYYY-MM-DD or MM-DD of this year) in
a fixed order: add ``years`` and ``months`` (the day of the month kept, or the month's last day when it is
shorter), set the ``day`` of the month if given, add ``weeks`` and ``days``, then, if a ``weekday`` is
given, move to that weekday of the same calendar week (weeks run Monday to Sunday, as ISO 8601 and Chinese usage have it: "下周三" is
``{"weeks": 1, "weekday": "wednesday"}``). The result says how many days that day is from today.

Every reading of the time goes through :func:`now`, so a test or a labelled run can pin it.
"""

from __future__ import annotations

import calendar
from datetime import date as Day
from datetime import datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tools.registry import ToolContext, ToolError

WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
WEEKDAYS_ZH = ["星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日"]
MAX_YEARS = 1000  # far enough for any calendar question, near enough that no sum overflows


def now(zone: tzinfo | None = None) -> datetime:
    """The current moment in ``zone`` (the machine's local zone when None): the one place the time is read."""
    return datetime.now(zone) if zone is not None else datetime.now().astimezone()


def _moment(tool_context: ToolContext | None, fixed: datetime | None) -> tuple[datetime, str]:
    """Now (or ``fixed``) in the run's time zone (the machine's when none is set), and that zone's name."""
    zone_name = tool_context.timezone if tool_context is not None else ""
    if not zone_name:
        moment = (fixed or now(None)).astimezone()
        return moment, moment.tzname() or "local"
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: 'Asia' is a tzdata folder
        raise ToolError(f"unknown time zone {zone_name!r}; set KB_AGENT_TIMEZONE to an IANA name") from None
    return (fixed or now(zone)).astimezone(zone), zone_name


def _outside() -> ToolError:
    return ToolError("that day is outside the calendar this tool covers (years 1 to 9999)")


def _shift_months(day: Day, months: int) -> Day:
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    if not 1 <= year <= 9999:
        raise _outside()
    return Day(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def _start(text: str, today: Day) -> Day:
    """The day ``date`` names: YYYY-MM-DD, or MM-DD of today's year."""
    text = text.strip()
    try:
        if len(text) <= 5:
            month, _, day = text.partition("-")
            return Day(today.year, int(month), int(day))
        return Day.fromisoformat(text)
    except ValueError:
        raise ToolError(
            f"date {text!r} is not a calendar date written YYYY-MM-DD or MM-DD (e.g. 2027-01-01, 12-25)"
        ) from None


def _asked_day(today: Day, *, on: str | None, years: int, months: int, day: int | None, weeks: int, days: int,
               weekday: str | None) -> Day:  # fmt: skip
    """The day the arguments name, worked out in the order the tool's description gives."""
    for name, value, limit in (("years", years, MAX_YEARS), ("months", months, 12 * MAX_YEARS),
                               ("weeks", weeks, 53 * MAX_YEARS), ("days", days, 366 * MAX_YEARS)):  # fmt: skip
        if abs(value) > limit:
            raise ToolError(f"{name} must be between -{limit} and {limit}")
    asked = _shift_months(_start(on, today) if on is not None else today, 12 * years + months)
    if day is not None:
        try:
            asked = asked.replace(day=day)
        except ValueError:
            raise ToolError(f"{asked.year}-{asked.month:02d} has no day {day}") from None
    try:
        asked = asked + timedelta(weeks=weeks, days=days)
        if weekday is not None:
            asked = asked + timedelta(days=WEEKDAYS.index(weekday) - asked.weekday())
    except OverflowError:
        raise _outside() from None
    return asked


def current_date(
    tool_context: ToolContext | None = None,
    now: datetime | None = None,
    *,
    date: str | None = None,
    years: int = 0,
    months: int = 0,
    day: int | None = None,
    weeks: int = 0,
    days: int = 0,
    weekday: str | None = None,
) -> dict[str, Any]:
    """Today's date and time in the run's time zone (the machine's when none is set); with arguments,
    the day they name, its weekday and how many days it is from today. ``now`` fixes the moment (tests)."""
    moment, zone_name = _moment(tool_context, now)
    if (date, day, weekday) == (None, None, None) and not any((years, months, weeks, days)):
        return {
            "date": moment.date().isoformat(),
            "time": moment.strftime("%H:%M:%S"),
            "weekday": moment.strftime("%A"),
            "weekday_zh": WEEKDAYS_ZH[moment.weekday()],
            "timezone": zone_name,
            "iso": moment.isoformat(timespec="seconds"),
        }
    today = moment.date()
    asked = _asked_day(
        today, on=date, years=years, months=months, day=day, weeks=weeks, days=days, weekday=weekday
    )
    return {
        "date": asked.isoformat(),
        "weekday": WEEKDAYS[asked.weekday()].capitalize(),
        "weekday_zh": WEEKDAYS_ZH[asked.weekday()],
        "days_from_today": (asked - today).days,
        "today": today.isoformat(),
        "timezone": zone_name,
    }


# Sent with every request that offers the tool, so kept short: the description says how to use it, and
# the handler checks the ranges (MAX_YEARS) with a message the model can act on.
DESCRIPTION = (
    "Today's date, time, weekday and time zone: call it whenever the answer depends on the date or time "
    "(今天, 几号, 星期几); never guess. Another day: days=1 tomorrow; weeks=1 weekday=friday: Friday of next "
    "week; months, years, day (of month); date=YYYY-MM-DD or MM-DD. Returns its date, weekday, days_from_today."
)
