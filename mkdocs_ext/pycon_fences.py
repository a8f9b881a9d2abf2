"""A MkDocs hook that shows the pages' ``>>>`` sessions as Python console sessions.

The pages fence their doctests as ``python`` (every ``>>>`` example runs as a test
with ``make test``, whatever its fence says). Highlighted as Python, ``>>>`` is an
operator and the output is code; fenced as ``pycon`` (Pygments' console lexer), the
prompts and the output are marked as such, and the site's stylesheet
(``docs/assets/copy.css``) leaves them out when the copy button copies a block:
what lands on the clipboard is the code alone, ready to paste.

Before MkDocs renders a page, this hook rewrites the opening fence of each block
whose first line is a ``>>>`` prompt from ```` ```python ```` to ```` ```pycon ````
(in the text it renders, never in the source), so a page written by anyone gets it.

Loaded by ``mkdocs.yml`` (``hooks: [mkdocs_ext/pycon_fences.py]``).
"""

from __future__ import annotations

import re
import typing as t

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,}|~{3,})[ \t]*(?:python|py)[ \t]*$")


def pycon_fences(markdown: str) -> str:
    """``markdown`` with each ``python`` fence that opens a ``>>>`` session made ``pycon``.

    >>> pycon_fences("```python\\n>>> 1 + 1\\n2\\n```").splitlines()[0]
    '```pycon'
    >>> pycon_fences("```python\\nx = 1\\n```")  # no session: left as it is
    '```python\\nx = 1\\n```'
    """
    lines = markdown.split("\n")
    for i, line in enumerate(lines[:-1]):
        opening = _FENCE.match(line)
        if opening and lines[i + 1].lstrip().startswith(">>>"):
            lines[i] = f"{opening['indent']}{opening['ticks']}pycon"
    return "\n".join(lines)


def on_page_markdown(markdown: str, **kwargs: t.Any) -> str:
    """MkDocs' hook: runs on each page's Markdown before it is rendered."""
    return pycon_fences(markdown)
