"""ISO 8601 text ↔ ``datetime`` values: the one reading of dates, times and durations.

Argument conversion (``_convert``) and the ``format`` checks of validation use these
same functions, so a text that passes validation as a ``date-time`` always converts
to a ``datetime``, and one that does not convert never passes.

>>> parse_datetime("2024-05-01T09:30:00Z")
datetime.datetime(2024, 5, 1, 9, 30, tzinfo=datetime.timezone.utc)
>>> parse_datetime("2024-05-01 09:30")  # no offset: a naive datetime
datetime.datetime(2024, 5, 1, 9, 30)
>>> parse_duration("P1DT2H30M")
datetime.timedelta(days=1, seconds=9000)
>>> format_duration(dt.timedelta(days=1, seconds=9000.5))
'P1DT2H30M0.5S'

What is accepted, a superset of RFC 3339 (what JSON Schema's formats name) and a
subset of ISO 8601 (what models write):

- ``date``: ``YYYY-MM-DD``.
- ``time``: ``HH:MM[:SS[.fraction]][offset]``; the offset is ``Z`` or ``±HH[:MM]``
  and may be left out (the time is then naive). Digits past microseconds are cut.
- ``date-time``: a date and a time joined by ``T`` (or ``t`` or a space).
- ``duration``: ``[-]P[nY][nM][nW][nD][T[nH][nM][nS]]``, each number may have a
  fraction. A year counts as 365 days and a month as 30 days (a ``timedelta`` has no
  calendar), as pydantic counts them.

Everything else (``24:00``, leap seconds, week dates, ordinal dates) is refused with
``ValueError``.
"""

from __future__ import annotations

import collections.abc as c
import datetime as dt
import functools
import re

__all__ = [
    "format_duration",
    "is_date",
    "is_datetime",
    "is_duration",
    "is_time",
    "parse_date",
    "parse_datetime",
    "parse_duration",
    "parse_time",
]

_DATE = r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})"
_TIME = (
    r"(?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:[.,](?P<fraction>\d+))?)?"
    r"(?P<offset>[Zz]|[+-]\d{2}(?::?\d{2})?)?"
)
_DATE_RE = re.compile(rf"{_DATE}\Z", re.ASCII)
_TIME_RE = re.compile(rf"{_TIME}\Z", re.ASCII)
_DATETIME_RE = re.compile(rf"{_DATE}[Tt ]{_TIME}\Z", re.ASCII)

_NUMBER = r"\d+(?:[.,]\d+)?"
_DURATION_RE = re.compile(
    rf"(?P<sign>[+-])?P(?!\Z)(?:(?P<years>{_NUMBER})Y)?(?:(?P<months>{_NUMBER})M)?"
    rf"(?:(?P<weeks>{_NUMBER})W)?(?:(?P<days>{_NUMBER})D)?"
    rf"(?:T(?!\Z)(?:(?P<hours>{_NUMBER})H)?(?:(?P<minutes>{_NUMBER})M)?"
    rf"(?:(?P<seconds>{_NUMBER})S)?)?\Z",
    re.ASCII,
)
_DAYS_PER = {"years": 365.0, "months": 30.0, "weeks": 7.0, "days": 1.0}
_SECONDS_PER = {"hours": 3600.0, "minutes": 60.0, "seconds": 1.0}


def parse_date(text: str) -> dt.date:
    """``YYYY-MM-DD`` as a ``date``; ``ValueError`` for anything else."""
    match = _DATE_RE.match(text)
    if match is None:
        raise ValueError(f"not an ISO 8601 date: {text!r}")
    return dt.date(int(match["year"]), int(match["month"]), int(match["day"]))


def parse_time(text: str) -> dt.time:
    """``HH:MM[:SS[.f]][offset]`` as a ``time`` (aware when an offset is given)."""
    match = _TIME_RE.match(text)
    if match is None:
        raise ValueError(f"not an ISO 8601 time: {text!r}")
    hour, minute, second, fraction, offset = match.groups()
    return dt.time(
        int(hour), int(minute), int(second or 0), _micro(fraction), tzinfo=_offset(offset)
    )


def parse_datetime(text: str) -> dt.datetime:
    """A date and a time as a ``datetime`` (aware when an offset is given)."""
    match = _DATETIME_RE.match(text)
    if match is None:
        raise ValueError(f"not an ISO 8601 date-time: {text!r}")
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    return dt.datetime(
        int(year),
        int(month),
        int(day),
        int(hour),
        int(minute),
        int(second or 0),
        _micro(fraction),
        tzinfo=_offset(offset),
    )


def parse_duration(text: str) -> dt.timedelta:
    """An ISO 8601 duration as a ``timedelta`` (a year is 365 days, a month 30)."""
    match = _DURATION_RE.match(text)
    if match is None:
        raise ValueError(f"not an ISO 8601 duration: {text!r}")
    days = sum(
        float(match[unit].replace(",", ".")) * per
        for unit, per in _DAYS_PER.items()
        if match[unit] is not None
    )
    seconds = sum(
        float(match[unit].replace(",", ".")) * per
        for unit, per in _SECONDS_PER.items()
        if match[unit] is not None
    )
    try:
        value = dt.timedelta(days=days, seconds=seconds)
    except OverflowError:
        raise ValueError(f"duration out of range: {text!r}") from None
    return -value if match["sign"] == "-" else value


def format_duration(value: dt.timedelta) -> str:
    """``value`` as an ISO 8601 duration that :func:`parse_duration` reads back exactly."""
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    days, micros = divmod(micros, 86_400_000_000)
    hours, micros = divmod(micros, 3_600_000_000)
    minutes, micros = divmod(micros, 60_000_000)
    seconds, micros = divmod(micros, 1_000_000)
    text = f"{sign}P{days}D" if days else f"{sign}P"
    if hours or minutes or seconds or micros or not days:
        text += "T"
        if hours:
            text += f"{hours}H"
        if minutes:
            text += f"{minutes}M"
        if seconds or micros or not (hours or minutes):
            fraction = f".{micros:06d}".rstrip("0") if micros else ""
            text += f"{seconds}{fraction}S"
    return text


def is_date(value: object) -> bool:
    """The ``date`` format check: True for a non-string (formats apply to strings only)."""
    return _readable(value, parse_date)


def is_time(value: object) -> bool:
    """The ``time`` format check (see :func:`parse_time`)."""
    return _readable(value, parse_time)


def is_datetime(value: object) -> bool:
    """The ``date-time`` format check (see :func:`parse_datetime`)."""
    return _readable(value, parse_datetime)


def is_duration(value: object) -> bool:
    """The ``duration`` format check (see :func:`parse_duration`)."""
    return _readable(value, parse_duration)


def _readable(value: object, parse: c.Callable[[str], object]) -> bool:
    if not isinstance(value, str):
        return True
    try:
        parse(value)
    except ValueError:
        return False
    return True


def _micro(fraction: str | None) -> int:
    """Microseconds of a decimal fraction of a second (digits past the sixth cut)."""
    if not fraction:
        return 0
    return int((fraction + "00000")[:6])


@functools.lru_cache(maxsize=128)
def _offset(text: str | None) -> dt.tzinfo | None:
    if text is None:
        return None
    if text in ("Z", "z"):
        return dt.timezone.utc
    digits = text[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:] or 0)
    if hours > 23 or minutes > 59:
        raise ValueError(f"UTC offset out of range: {text!r}")
    delta = dt.timedelta(hours=hours, minutes=minutes)
    return dt.timezone(-delta if text[0] == "-" else delta)
