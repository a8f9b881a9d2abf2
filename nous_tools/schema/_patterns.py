"""Pattern safety: which regular expression engine matches a schema's ``pattern``
(and ``patternProperties`` keys), and the patterns a schema may not use.

An untrusted schema gets Rust's linear-time ``regex``, so a pattern that needs
backtracking (lookaround, a backreference) is refused; a trusted one gets
``fancy-regex``, with the backtracking of such a pattern bounded by
:data:`BACKTRACK_LIMIT`.
"""

from __future__ import annotations

import collections.abc as c
import functools
import typing as t

from nous_tools.schema._schema_walk import each_subschema_at

#: The most backtracking steps one match of a pattern that needs backtracking
#: (lookaround, a backreference) may take in a trusted schema: about a millisecond.
#: Past it the text does not match. Patterns without those features never backtrack.
BACKTRACK_LIMIT = 100_000


def pattern_options(trusted: bool) -> t.Any:
    """jsonschema-rs's ``pattern_options``: Rust's linear-time ``regex`` for an
    untrusted schema (a pattern that needs backtracking does not compile), and
    ``fancy-regex`` for a trusted one, which hands every pattern without lookaround
    or backreferences to ``regex`` too and bounds the backtracking of the others."""
    return _options()[0 if trusted else 1]


@functools.cache
def _options() -> tuple[t.Any, t.Any]:
    # Made when the first schema is compiled: jsonschema-rs is imported then, not
    # with the package.
    import jsonschema_rs

    trusted = jsonschema_rs.FancyRegexOptions(backtrack_limit=BACKTRACK_LIMIT)
    return trusted, jsonschema_rs.RegexOptions()


@functools.lru_cache(maxsize=1024)
def is_regex(pattern: str, trusted: bool) -> bool:
    """Whether ``pattern`` compiles with the engine that trust allows."""
    import jsonschema_rs

    try:
        jsonschema_rs.validator_for({"pattern": pattern}, pattern_options=pattern_options(trusted))
    except Exception:
        return False
    return True


def pattern_problems(
    plain: dict[str, t.Any], trusted: bool
) -> c.Iterator[tuple[str, tuple[object, ...]]]:
    """Every pattern (and ``patternProperties`` key) the engine trust allows cannot
    read, as ``(reason, path)``."""
    for node, where in each_subschema_at(plain):
        patterns: list[tuple[object, tuple[object, ...]]] = []
        if "pattern" in node:
            patterns.append((node["pattern"], (*where, "pattern")))
        keyed = node.get("patternProperties")
        if isinstance(keyed, dict):
            patterns.extend((key, (*where, "patternProperties", key)) for key in keyed)
        for pattern, path in patterns:
            if not isinstance(pattern, str) or is_regex(pattern, trusted):
                continue
            if not trusted and is_regex(pattern, True):
                yield (
                    f"{pattern!r} needs a backtracking regular expression engine "
                    "(lookaround or a backreference), which an untrusted schema may not "
                    "use: matching it can take exponential time on a crafted text",
                    path,
                )
            else:
                yield f"{pattern!r} is not a regular expression", path
