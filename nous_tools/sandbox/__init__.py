"""SandboxPolicy: which paths a tool may read and write.

A policy is a frozen value with a ``mode`` and a ``workspace_root``. Tools ask it
before they touch the file system: :meth:`SandboxPolicy.check_write` and
:meth:`SandboxPolicy.check_read` return the canonical path to use, or raise
:class:`~nous_tools.errors.SandboxViolation` (a ``PermissionError``).

The three modes follow the Codex-style names:

* ``"read_only"``: no writes anywhere;
* ``"workspace_write"``: writes only to the workspace root and below;
* ``"danger_full_access"``: writes anywhere.

Reads pass in every mode unless the policy has ``confine_reads=True``, which
confines them to the root as well. Relative paths are taken against the root,
and every path is canonicalised first (symlinks followed, ``..`` folded), so
neither ``sub/../../x`` nor a symlink pointing out of the root gets past it:

>>> import tempfile
>>> workspace = tempfile.TemporaryDirectory()
>>> policy = SandboxPolicy.new("workspace_write", workspace_root=workspace.name)
>>> target = policy.check_write("notes/todo.txt")  # need not exist yet
>>> target.relative_to(policy.workspace_root).as_posix()
'notes/todo.txt'
>>> policy.allows_write("notes/../../escape.txt")
False
>>> policy.check_write("/etc/passwd")  # doctest: +ELLIPSIS
Traceback (most recent call last):
    ...
nous_tools.errors.SandboxViolation: Sandbox (workspace_write) refuses to write '/etc/passwd'...
>>> policy.check_read("/etc/hosts").name  # reads are free unless confine_reads=True
'hosts'
>>> SandboxPolicy.new("read_only", workspace_root=workspace.name).allows_write("notes/todo.txt")
False
>>> workspace.cleanup()

Inside a tool, :meth:`SandboxPolicy.resolve` finds the policy that applies to a
:class:`~nous_tools.run_context.RunContext`: explicit arguments first, then
``ctx.sandbox``, then ``ctx.deps["workspace_root"]`` / ``ctx.deps["session_id"]``,
then the ``NOUS_TOOLS_SANDBOX_MODE`` environment variable and the current
directory. With no mode configured anywhere the mode is ``"danger_full_access"``
and the ``nous_tools`` logger warns once per process.

A check is a statement about the file system at the moment it runs. A process
that can change symlinks inside the root between the check and the write can
still race it; the policy guards against a tool's arguments, not against a
concurrent attacker on the same machine.
"""

from __future__ import annotations

from nous_tools.sandbox._policy import SandboxPolicy
from nous_tools.sandbox._probe import SandboxProbe, probe

__all__ = ["SandboxPolicy", "SandboxProbe", "probe"]
