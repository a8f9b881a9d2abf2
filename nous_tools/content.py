"""Rich tool results: text, images, audio and embedded resources.

A tool returns text or JSON by default. To return an image, a sound or a file,
return one of these frozen values, or a list of them mixed with plain strings:

>>> from nous_tools import Tool, execute
>>> from nous_tools.content import Image, Text
>>> PNG = bytes.fromhex("89504e470d0a1a0a")  # the first bytes of a PNG file
>>> def chart(city: str) -> list:
...     '''A chart of the week's weather.'''
...     return [f"The weather in {city}:", Image(PNG, "image/png")]
>>> result = execute(Tool.from_function(chart, timeout=None), {"city": "Oslo"})
>>> result.value
['The weather in Oslo:', Image(data=<8 bytes>, mime_type='image/png')]

Where a result goes decides how it is written (see ``docs/how-to/progress.md``):

- **MCP** (``nous-tools serve``): one content block each — ``text``, ``image`` and
  ``audio`` (the bytes in base64) and ``resource`` (an embedded resource);
- **Anthropic** ``tool_result`` blocks: ``text``, ``image`` (base64 source; JPEG,
  PNG, GIF and WebP) and ``document`` (a text resource, or a PDF);
- **OpenAI Responses** ``function_call_output``: ``input_text``, ``input_image``
  (a ``data:`` URL) and ``input_file`` parts;
- **OpenAI Chat Completions** tool messages carry text only, and so does
  :func:`~nous_tools.format_tool_result`: text parts as they are, and a placeholder
  in brackets naming each part left out:

>>> from nous_tools import format_tool_result
>>> print(format_tool_result(result))
The weather in Oslo:
[image/png image, 8 bytes: not shown, this message carries text only]

Bad values fail where they are made, inside the tool, so its author sees them:

>>> Image(PNG, "")
Traceback (most recent call last):
...
ValueError: Image needs a mime_type such as 'image/png', got ''
"""

from __future__ import annotations

import base64
import collections.abc as c
import re
import typing as t

import attrs

__all__ = [
    "Audio",
    "Content",
    "Image",
    "Resource",
    "ResourceLink",
    "Text",
    "as_content",
    "to_anthropic",
    "to_json",
    "to_responses",
    "to_text",
]


def _not_registered(value: object) -> str:
    raise RuntimeError(
        "nous_tools.content has no writer of a value as text: nous_tools._rendering "
        "registers it (import nous_tools)"
    )


#: How an item of a result that is not content is written (a value as a model sees
#: it: JSON, a dataclass as argument conversion writes it, ...): the writer of a
#: result as a model reads it, which ``nous_tools/_rendering.py`` registers here as
#: it is imported (a value imports no layer above it, so the arrow runs from there
#: down to here, where the contracts see it; ``docs/concepts/architecture.md``).
_value_text: c.Callable[[object], str] = _not_registered


def register_value_text(value_text: c.Callable[[object], str]) -> None:
    """Register how a value is written as text (called once, by
    ``nous_tools/_rendering.py`` as it is imported)."""
    global _value_text
    _value_text = value_text


_MIME = re.compile(r"[A-Za-z0-9][\w.+-]*/[A-Za-z0-9][\w.+-]*(\s*;.*)?\Z")

#: The image types Anthropic's ``image`` blocks accept.
ANTHROPIC_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def _bytes(value: object) -> bytes:
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value  # type: ignore[return-value]  # checked by the validator


def _check_bytes(instance: object, attribute: attrs.Attribute[t.Any], value: object) -> None:
    if not isinstance(value, bytes):
        raise ValueError(
            f"{type(instance).__name__} {attribute.name} must be bytes, got {type(value).__name__}"
        )


def _mime_check(kind: str | None) -> c.Callable[[object, attrs.Attribute[t.Any], object], None]:
    example = f"'{kind}/png'" if kind == "image" else f"'{kind}/wav'" if kind else "'text/plain'"

    def check(instance: object, attribute: attrs.Attribute[t.Any], value: object) -> None:
        owner = type(instance).__name__
        if not isinstance(value, str) or not value:
            raise ValueError(f"{owner} needs a mime_type such as {example}, got {value!r}")
        if not _MIME.match(value):
            raise ValueError(
                f"{owner} mime_type must be a MIME type such as {example}, got {value!r}"
            )
        if kind is not None and not value.lower().startswith(kind + "/"):
            raise ValueError(f"{owner} mime_type must be an {kind}/* type, got {value!r}")

    return check


def _shown_bytes(data: bytes) -> str:
    return f"<{len(data)} bytes>"


def _check_text(instance: object, attribute: attrs.Attribute[t.Any], value: object) -> None:
    if not isinstance(value, str):
        raise ValueError(
            f"{type(instance).__name__} {attribute.name} must be a str, got {type(value).__name__}"
        )


@attrs.frozen(slots=True)
class Text:
    """Text, as a part of a result that also holds other content."""

    text: str = attrs.field(validator=_check_text)


@attrs.frozen(slots=True)
class Image:
    """An image: its bytes (not base64) and its MIME type (``"image/png"``)."""

    data: bytes = attrs.field(converter=_bytes, validator=_check_bytes, repr=_shown_bytes)
    mime_type: str = attrs.field(validator=_mime_check("image"))


@attrs.frozen(slots=True)
class Audio:
    """A sound: its bytes (not base64) and its MIME type (``"audio/wav"``)."""

    data: bytes = attrs.field(converter=_bytes, validator=_check_bytes, repr=_shown_bytes)
    mime_type: str = attrs.field(validator=_mime_check("audio"))


def _optional_bytes(value: object) -> object:
    return None if value is None else _bytes(value)


def _check_resource_mime(
    instance: object, attribute: attrs.Attribute[t.Any], value: object
) -> None:
    if value is not None:
        _mime_check(None)(instance, attribute, value)


def _shown_blob(data: bytes | None) -> str:
    return "None" if data is None else _shown_bytes(data)


@attrs.frozen(slots=True)
class Resource:
    """An embedded resource (a file, a document): its ``uri``, its MIME type (or
    None), and its contents — ``text`` for text, or ``blob`` (bytes) for anything
    else; exactly one of the two."""

    uri: str = attrs.field(validator=_check_text)
    mime_type: str | None = attrs.field(validator=_check_resource_mime)
    text: str | None = attrs.field(default=None)
    blob: bytes | None = attrs.field(default=None, converter=_optional_bytes, repr=_shown_blob)

    def __attrs_post_init__(self) -> None:
        if not self.uri:
            raise ValueError("Resource needs a uri, got ''")
        if (self.text is None) == (self.blob is None):
            raise ValueError(
                "Resource needs its contents as exactly one of text= (a str) or blob= (bytes)"
            )
        if self.text is not None and not isinstance(self.text, str):
            raise ValueError(f"Resource text must be a str, got {type(self.text).__name__}")
        if self.blob is not None and not isinstance(self.blob, bytes):
            raise ValueError(f"Resource blob must be bytes, got {type(self.blob).__name__}")


def _optional_text(instance: object, attribute: attrs.Attribute[t.Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise ValueError(
            f"ResourceLink {attribute.name} must be a str or None, got {type(value).__name__}"
        )


@attrs.frozen(slots=True)
class ResourceLink:
    """A link to a resource the model may read elsewhere (MCP's ``resource_link``):
    its ``uri`` and ``name``, and what else the server said of it. Not its
    contents: those are a :class:`Resource`."""

    uri: str = attrs.field(validator=_check_text)
    name: str = attrs.field(validator=_check_text)
    mime_type: str | None = attrs.field(default=None, validator=_check_resource_mime)
    title: str | None = attrs.field(default=None, validator=_optional_text)
    description: str | None = attrs.field(default=None, validator=_optional_text)
    size: int | None = attrs.field(default=None)

    def __attrs_post_init__(self) -> None:
        if not self.uri:
            raise ValueError("ResourceLink needs a uri, got ''")
        if self.size is not None and (
            isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0
        ):
            raise ValueError(f"ResourceLink size must be an int >= 0 or None, got {self.size!r}")


def _link_text(link: ResourceLink) -> str:
    """How a model is shown a link: ``[resource link report.pdf: file:///r.pdf]``."""
    about = [
        x for x in (link.mime_type, f"{link.size} bytes" if link.size is not None else None) if x
    ]
    shown = f"[resource link {link.title or link.name}: {link.uri}"
    if about:
        shown += f" ({', '.join(about)})"
    shown += "]"
    return f"{shown}\n{link.description}" if link.description else shown


#: One part of a rich result.
Content = t.Union[Text, Image, Audio, Resource, ResourceLink]  # noqa: UP007  (a runtime alias)

_KINDS = (Text, Image, Audio, Resource, ResourceLink)
_KIND_SET = frozenset(_KINDS)


def as_content(value: object) -> list[Content] | None:
    """The parts of a tool's result when it holds content: a content value alone,
    or a list or tuple holding at least one (its strings become :class:`Text`, any
    other item the :class:`Text` of its JSON); None for any other value, which is
    plain text or JSON.

    >>> as_content(["see:", Text("this")])
    [Text(text='see:'), Text(text='this')]
    >>> as_content(["plain", "strings"]) is None
    True
    """
    kind = type(value)
    if kind in _KINDS:
        return [t.cast(Content, value)]
    if kind is not list and kind is not tuple:
        return None
    items = t.cast("list[object]", value)
    if _KIND_SET.isdisjoint(map(type, items)):  # in C: a big plain list is common
        return None
    parts: list[Content] = []
    for item in items:
        if type(item) in _KINDS:
            parts.append(t.cast(Content, item))
        elif isinstance(item, str):
            parts.append(Text(item))
        else:
            parts.append(Text(_value_text(item)))
    return parts


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def placeholder(part: Content, why: str) -> str:
    """A text that names a part left out, and why: ``[image/png image, 8 bytes: why]``
    (a link is text already: it is shown as it is)."""
    if isinstance(part, ResourceLink):
        return _link_text(part)
    if isinstance(part, Image):
        return f"[{part.mime_type} image, {len(part.data)} bytes: {why}]"
    if isinstance(part, Audio):
        return f"[{part.mime_type} audio, {len(part.data)} bytes: {why}]"
    if isinstance(part, Resource):
        size = len(part.blob) if part.blob is not None else len(part.text or "")
        unit = "bytes" if part.blob is not None else "characters"
        mime = f"{part.mime_type} " if part.mime_type else ""
        return f"[{mime}resource {part.uri}, {size} {unit}: {why}]"
    return part.text


_TEXT_ONLY = "not shown, this message carries text only"


def to_text(parts: c.Sequence[Content]) -> str:
    """The text of ``parts``, one part a line: text as it is, a text resource as its
    URI and text, and a placeholder for each image, sound or binary resource (what
    Chat Completions tool messages and :func:`~nous_tools.format_tool_result` show)."""
    lines: list[str] = []
    for part in parts:
        if isinstance(part, Text):
            lines.append(part.text)
        elif isinstance(part, Resource) and part.text is not None:
            lines.append(f"[resource {part.uri}]\n{part.text}")
        else:
            lines.append(placeholder(part, _TEXT_ONLY))
    return "\n".join(lines)


def to_anthropic(parts: c.Sequence[Content]) -> list[dict[str, t.Any]]:
    """Anthropic ``tool_result`` content blocks: ``text``; ``image`` with a base64
    source for JPEG, PNG, GIF and WebP; ``document`` for a text resource (plain
    text) or a PDF; a text placeholder for anything else (audio, other types)."""
    blocks: list[dict[str, t.Any]] = []
    for part in parts:
        if isinstance(part, Text):
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, Image) and part.mime_type.lower() in ANTHROPIC_IMAGE_TYPES:
            blocks.append(
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": part.mime_type.lower(),
                        "data": _b64(part.data),
                    },
                }
            )
        elif isinstance(part, Resource) and part.text is not None:
            blocks.append(
                {
                    "type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": part.text},
                    "title": part.uri,
                }
            )
        elif (
            isinstance(part, Resource)
            and part.blob is not None
            and (part.mime_type or "").lower() == "application/pdf"
        ):
            blocks.append(
                {
                    "type": "document",
                    "source": {
                        "type": "base64",
                        "media_type": "application/pdf",
                        "data": _b64(part.blob),
                    },
                    "title": part.uri,
                }
            )
        elif isinstance(part, ResourceLink):
            blocks.append({"type": "text", "text": _link_text(part)})
        else:
            blocks.append(
                {"type": "text", "text": placeholder(part, "not shown, Anthropic cannot take it")}
            )
    return blocks


def _file_name(uri: str) -> str:
    name = uri.rstrip("/").rsplit("/", 1)[-1]
    return name or "resource"


def to_responses(parts: c.Sequence[Content]) -> list[dict[str, t.Any]]:
    """OpenAI Responses ``function_call_output`` parts: ``input_text``;
    ``input_image`` with a ``data:`` URL; ``input_file`` (a ``data:`` URL and a file
    name) for a binary resource; a text resource as ``input_text``; a text
    placeholder for audio, which the output cannot carry."""
    items: list[dict[str, t.Any]] = []
    for part in parts:
        if isinstance(part, Text):
            items.append({"type": "input_text", "text": part.text})
        elif isinstance(part, Image):
            items.append(
                {
                    "type": "input_image",
                    "image_url": f"data:{part.mime_type};base64,{_b64(part.data)}",
                }
            )
        elif isinstance(part, Resource) and part.text is not None:
            items.append({"type": "input_text", "text": f"[resource {part.uri}]\n{part.text}"})
        elif isinstance(part, Resource) and part.blob is not None:
            mime = part.mime_type or "application/octet-stream"
            items.append(
                {
                    "type": "input_file",
                    "filename": _file_name(part.uri),
                    "file_data": f"data:{mime};base64,{_b64(part.blob)}",
                }
            )
        elif isinstance(part, ResourceLink):
            items.append({"type": "input_text", "text": _link_text(part)})
        else:
            items.append(
                {
                    "type": "input_text",
                    "text": placeholder(part, "not shown, a function call output cannot carry it"),
                }
            )
    return items


def to_json(part: Content) -> dict[str, t.Any]:
    """A part as plain JSON data, bytes in base64 (what ``nous-tools run --json``
    prints): ``{"type": "image", "mime_type": ..., "data": ...}`` and the like."""
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, Image):
        return {"type": "image", "mime_type": part.mime_type, "data": _b64(part.data)}
    if isinstance(part, Audio):
        return {"type": "audio", "mime_type": part.mime_type, "data": _b64(part.data)}
    if isinstance(part, ResourceLink):
        link = {"type": "resource_link", "uri": part.uri, "name": part.name}
        for key in ("mime_type", "title", "description", "size"):
            if getattr(part, key) is not None:
                link[key] = getattr(part, key)
        return link
    data: dict[str, t.Any] = {"type": "resource", "uri": part.uri, "mime_type": part.mime_type}
    if part.text is not None:
        data["text"] = part.text
    else:
        data["blob"] = _b64(t.cast(bytes, part.blob))
    return data
