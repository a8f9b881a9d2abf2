"""``python -m nous_tools``: the command line.

Guarded, so that a process-isolated tool's child process (which re-imports the
main module) does not run the command line again.
"""

from __future__ import annotations

if __name__ == "__main__":
    import sys

    from nous_tools.cli._main import main

    sys.exit(main())
