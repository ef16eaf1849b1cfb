"""``get_current_date``: the model cannot know today's date; the application can."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tools.registry import ToolContext, ToolError

WEEKDAYS_ZH = ["星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日"]


def current_date(tool_context: ToolContext | None = None, now: datetime | None = None) -> dict[str, Any]:
    """Today's date and time in the run's time zone (the machine's when none is set)."""
    zone_name = tool_context.timezone if tool_context is not None else ""
    if zone_name:
        try:
            zone = ZoneInfo(zone_name)
        except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: 'Asia' is a tzdata folder
            raise ToolError(
                f"unknown time zone {zone_name!r}; set KB_AGENT_TIMEZONE to an IANA name"
            ) from None
        moment = (now or datetime.now(zone)).astimezone(zone)
    else:
        moment = (now or datetime.now()).astimezone()
        zone_name = moment.tzname() or "local"
    return {
        "date": moment.date().isoformat(),
        "time": moment.strftime("%H:%M:%S"),
        "weekday": moment.strftime("%A"),
        "weekday_zh": WEEKDAYS_ZH[moment.weekday()],
        "timezone": zone_name,
        "iso": moment.isoformat(timespec="seconds"),
    }


PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
DESCRIPTION = (
    "Return today's date, the current time, weekday and time zone. Call it whenever the answer depends on "
    "the current date or time (today, now, 今天, 几号, 星期几); do not guess dates."
)
