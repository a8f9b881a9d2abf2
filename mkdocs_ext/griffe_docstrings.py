"""A Griffe extension that lets mkdocstrings render this project's docstrings.

The docstrings are written for ``doctest`` and for readers of the source, in the
reStructuredText habits of the standard library: bare ``>>>`` examples, ``::``
literal blocks and Sphinx roles (``:class:`~nous_tools.Tool```). Markdown would
read a ``>>>`` line as a block quote and show the roles as they are, so before
mkdocstrings parses a docstring this extension rewrites, in the text it renders
(never in the source):

- each run of doctest lines (from a ``>>>`` line to the next blank line) into a
  fenced ``pycon`` block;
- each ``::`` literal block into a fenced block;
- each Sphinx role into a code span of the name it shows (``~a.b.C`` shows ``C``).

Loaded by ``mkdocs.yml`` (``extensions: [mkdocs_ext/griffe_docstrings.py]``).
"""

from __future__ import annotations

import re
import typing as t

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|mod|exc|data|obj|const):`~?([^`]+)`")
_DOCTEST = re.compile(r"^(\s*)>>>")


def _role(match: re.Match[str]) -> str:
    target = match.group(1)
    shown = target.rsplit(".", 1)[-1] if match.group(0).split("`", 1)[1].startswith("~") else target
    return f"`{shown}`"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def markdown_docstring(text: str) -> str:
    """``text`` with doctest runs and ``::`` literal blocks fenced and roles as code.

    >>> print(markdown_docstring("Use :class:`~nous_tools.Tool`::\\n\\n    x = 1\\n\\nDone."))
    Use `Tool`:
    <BLANKLINE>
    ```text
    x = 1
    ```
    <BLANKLINE>
    Done.
    >>> print(markdown_docstring(">>> 1 + 1\\n2\\n\\nAfter."))
    ```pycon
    >>> 1 + 1
    2
    ```
    <BLANKLINE>
    After.
    """
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        doctest = _DOCTEST.match(line)
        if doctest:
            pad = doctest.group(1)
            out.append(f"{pad}```pycon")
            while i < len(lines) and lines[i].strip():
                out.append(lines[i])
                i += 1
            out.append(f"{pad}```")
            continue
        if line.rstrip().endswith("::") and not line.lstrip().startswith(">>>"):
            base = _indent(line)
            head = line.rstrip()[:-2].rstrip()
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            block: list[str] = []
            while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > base):
                block.append(lines[j])
                j += 1
            while block and not block[-1].strip():
                block.pop()
            if block:
                depth = min(_indent(b) for b in block if b.strip())
                pad = " " * base
                if head.strip():
                    out.append(_ROLE.sub(_role, head) + ":")
                    out.append("")
                out.append(f"{pad}```text")
                out.extend(pad + b[depth:] if b.strip() else "" for b in block)
                out.append(f"{pad}```")
                out.append("")
                i = j
                continue
        out.append(_ROLE.sub(_role, line))
        i += 1
    return "\n".join(out)


class MarkdownDocstrings(griffe.Extension):
    """Rewrites every docstring with :func:`markdown_docstring` once it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: t.Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
