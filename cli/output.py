"""Everything `pulsar-admin` writes to stdout.

Commands return one of the result types below; `write` renders it the way the Java tool's
`CliCommand.print` does (the default), or as `-o json|yaml|table`:

    JsonResult(value)   Jackson pretty JSON (DefaultPrettyPrinter, NON_NULL); `null` for 204
    TextResult(text)    the string verbatim; `null` for 204
    LinesResult(items)  one line per item: strings raw, objects as pretty JSON blocks
    MapResult(entries)  one line per entry: `key` + 4 spaces + the value's Java `toString`
    None                nothing (writes print nothing on success)

The Jackson layout is `javaformats.jackson_pretty`'s (no trailing newline of its own: println
adds it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any, NamedTuple, TextIO

from cli.javafmt import JavaType
from javaformats import jackson_pretty


class OutputFormat(StrEnum):
    """`-o/--output`: `pulsar` (upstream's format, the default), `json`, `yaml`, `table`."""

    pulsar = "pulsar"
    json = "json"
    yaml = "yaml"
    table = "table"


Rows = list[dict[str, Any]]


# Immutable records as NamedTuples, not dataclasses: building a dataclass at import costs
# more than the rest of this module (pulsar-admin's start-up is mostly imports).


class JsonResult(NamedTuple):
    value: Any
    table_rows: Callable[[Any], Rows] | None = None


class TextResult(NamedTuple):
    text: str | None


class LinesResult(NamedTuple):
    items: Sequence[Any]


class MapResult(NamedTuple):
    entries: Mapping[str, Any]
    value_type: JavaType
    table_rows: Callable[[Mapping[str, Any]], Rows] | None = None


Result = JsonResult | TextResult | LinesResult | MapResult | None


# -- upstream format ---------------------------------------------------------------------------


def _java_print(item: Any) -> str:
    """`CliCommand.print(T)`: a String verbatim, anything else as pretty JSON."""
    return item if isinstance(item, str) else jackson_pretty(item)


def render_pulsar(result: Result) -> str:
    if result is None:
        return ""
    if isinstance(result, JsonResult):
        return jackson_pretty(result.value) + "\n"
    if isinstance(result, TextResult):
        return ("null" if result.text is None else result.text) + "\n"
    if isinstance(result, LinesResult):
        return "".join(_java_print(item) + "\n" for item in result.items)
    lines = (f"{key}    {result.value_type.to_string(value)}\n"
             for key, value in result.entries.items())  # fmt: skip
    return "".join(lines)


# -- extension formats -------------------------------------------------------------------------


def _data(result: JsonResult | TextResult | LinesResult | MapResult) -> Any:
    if isinstance(result, JsonResult):
        return result.value
    if isinstance(result, TextResult):
        return result.text
    if isinstance(result, LinesResult):
        return list(result.items)
    return dict(result.entries)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(_cell(v) for v in value)
    if isinstance(value, Mapping):
        return ",".join(f"{k}={_cell(v)}" for k, v in value.items())
    return str(value)


def _rows(data: Any) -> Rows:
    if isinstance(data, Mapping):
        if data and all(isinstance(v, Mapping) for v in data.values()):
            return [{"name": k, **v} for k, v in data.items()]
        if len(data) == 1 and isinstance(next(iter(data.values())), list):
            return _rows(next(iter(data.values())))  # {"bookies": [...]} -> its list
        return [{"key": k, "value": v} for k, v in data.items()]
    if isinstance(data, list):
        if all(isinstance(item, Mapping) for item in data):
            return [dict(item) for item in data]
        return [{"value": item} for item in data]
    return [{"value": data}]


def render_table(rows: Rows) -> str:
    """Left-aligned columns under upper-case headers, two spaces apart."""
    if not rows:
        return ""
    columns: list[str] = list(dict.fromkeys(key for row in rows for key in row))
    cells = [[_cell(row.get(column)) for column in columns] for row in rows]
    headers = [column.upper() for column in columns]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in [headers, *cells]]  # fmt: skip
    return "\n".join(lines) + "\n"


def render(result: Result, fmt: OutputFormat) -> str:
    """The exact stdout text for `result` in format `fmt`."""
    if fmt is OutputFormat.pulsar or result is None:
        return render_pulsar(result)
    data = _data(result)
    if fmt is OutputFormat.json:
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if fmt is OutputFormat.yaml:
        import yaml

        return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True,
                                  default_flow_style=False))  # fmt: skip
    if isinstance(result, MapResult) and result.table_rows is not None:
        return render_table(result.table_rows(result.entries))
    if isinstance(result, JsonResult) and result.table_rows is not None:
        return render_table(result.table_rows(result.value))
    return render_table(_rows(data))


def write(result: Result, fmt: OutputFormat, out: TextIO) -> None:
    text = render(result, fmt)
    if text:
        out.write(text)
        out.flush()


__all__ = [
    "JsonResult",
    "LinesResult",
    "MapResult",
    "OutputFormat",
    "Result",
    "Rows",
    "TextResult",
    "render",
    "render_pulsar",
    "render_table",
    "write",
]
