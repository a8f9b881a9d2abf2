"""Draw the layers of ``nous_tools`` from the import-linter contracts.

Reads the ``layers`` contract of ``pyproject.toml`` and writes
``docs/assets/architecture.svg`` (shown by ``docs/concepts/architecture.md``):
one row per layer, top to bottom, each a box per package or module. Run it after
changing the contracts (a test checks the picture is up to date):

    .venv/bin/python docs/architecture.py
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "assets" / "architecture.svg"

#: What each layer is, named by the first module in it.
LABELS = {
    "__main__": "entry point",
    "cli": "command line",
    "contrib": "surfaces",
    "providers": "providers",
    "registry": "registry",
    "advice": "advice, executor",
    "backend": "backends",
    "_engine": "engine",
    "journal": "journal",
    "approval": "approval",
    "schema": "schema",
    "signals": "signals",
    "tool": "values",
    "errors": "leaves",
}

ROW, GAP, LEFT, TOP, CHAR, PAD = 34, 12, 150, 46, 7.4, 14


def _box(name: str) -> float:
    return max(len(name) * CHAR + 2 * PAD, 64)


def _row_width(kind: str, names: list[str]) -> float:
    step = 18 if kind == "|" else 6
    return sum(_box(n) + step for n in names) + (110 if kind == "|" else 0)


def contract(config: dict[str, object], name: str) -> dict[str, object]:
    linter = config["tool"]["importlinter"]  # type: ignore[index]
    (found,) = [c for c in linter["contracts"] if c["id"] == name]
    return found  # type: ignore[no-any-return]


def load() -> dict[str, object]:
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as file:
        return tomllib.load(file)


def draw(config: dict[str, object]) -> str:
    """The SVG text of the layers contract of ``config`` (pyproject.toml, parsed)."""
    layers = contract(config, "layers")
    rows: list[tuple[str, list[str]]] = []
    for layer in layers["layers"]:  # type: ignore[attr-defined]
        text = str(layer)
        kind = "|" if "|" in text else ":"
        rows.append((kind, [n.strip() for n in text.replace("|", ":").split(":")]))
    ignored = [str(i) for i in layers.get("ignore_imports", [])]  # type: ignore[attr-defined]
    width = int(LEFT + max(_row_width(k, n) for k, n in rows) + 80)
    height = TOP + len(rows) * (ROW + GAP) + 40 + 18 * (len(ignored) + 1)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        '<text x="14" y="24" font-size="15" font-weight="bold">nous_tools: the layers '
        "(pyproject.toml, [tool.importlinter])</text>",
    ]
    y = TOP
    for kind, names in rows:
        label = LABELS.get(names[0], "")
        out.append(f'<text x="14" y="{y + ROW / 2 + 4}" fill="#555">{escape(label)}</text>')
        x = float(LEFT)
        for name in names:
            box = _box(name)
            fill = "#e8f0fe" if label != "values" else "#e6f4ea"
            out.append(
                f'<rect x="{x:.0f}" y="{y}" width="{box:.0f}" height="{ROW}" rx="5" '
                f'fill="{fill}" stroke="#3c4043"/>'
            )
            out.append(
                f'<text x="{x + box / 2:.0f}" y="{y + ROW / 2 + 4}" '
                f'text-anchor="middle">{escape(name)}</text>'
            )
            x += box + (18 if kind == "|" else 6)
        if kind == "|":
            out.append(
                f'<text x="{x + 4:.0f}" y="{y + ROW / 2 + 4}" fill="#b3261e">(independent)</text>'
            )
        y += ROW + GAP
    arrow_x = width - 40
    out.append(
        f'<line x1="{arrow_x}" y1="{TOP}" x2="{arrow_x}" y2="{y - GAP}" stroke="#3c4043" '
        'stroke-width="2" marker-end="url(#head)"/>'
    )
    out.insert(
        2,
        '<defs><marker id="head" markerWidth="10" markerHeight="10" refX="5" refY="5" '
        'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#3c4043"/></marker></defs>',
    )
    out.append(
        f'<text x="{arrow_x - 8}" y="{TOP - 8}" text-anchor="end" fill="#555">imports go down</text>'
    )
    y += 14
    out.append(
        f'<text x="14" y="{y}">Each row imports only the rows below it (inside functions and '
        "under TYPE_CHECKING too).</text>"
    )
    y += 18
    if not ignored:
        out.append(f'<text x="14" y="{y}">No exceptions: the contracts ignore no import.</text>')
    else:
        out.append(
            f'<text x="14" y="{y}" fill="#b3261e">Exceptions pending a move ({len(ignored)}):'
            "</text>"
        )
    for item in ignored:
        y += 18
        out.append(f'<text x="30" y="{y}" fill="#b3261e">{escape(item)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main() -> int:
    OUT.write_text(draw(load()), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
