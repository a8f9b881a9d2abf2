"""npm packages the slow tests run (the MCP conformance suite, the official
server-everything), installed once from a pinned ``package.json`` and
``package-lock.json`` into ``~/.cache/nous-tools/<name>-<digest>`` (the digest of
those files, so a new pin installs anew); concurrent runs wait on a lock file."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

FILES = ("package.json", "package-lock.json")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nous-tools"


def installed(name: str, pinned: Path, files: tuple[str, ...] = FILES) -> Path:
    """The folder where the packages ``pinned`` (a folder holding ``files``) pins are
    installed, with ``npm ci``, now when they are not yet. Raises ``RuntimeError``
    without npm (``.ci/run`` installs it)."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise RuntimeError(f"{name} needs node and npm (.ci/run installs them)")
    digest = hashlib.sha256(b"".join((pinned / f).read_bytes() for f in files)).hexdigest()
    root = cache_root()
    target = root / f"{name}-{digest[:16]}"
    marker = target / ".installed"
    if marker.exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run may be installing it
        if marker.exists():
            return target
        staging = root / f".{name}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        for f in files:
            shutil.copy(pinned / f, staging / f)
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
            cwd=staging,
            check=True,
            timeout=600,
        )
        (staging / ".installed").write_text("ok\n")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    return target
