from __future__ import annotations

import logging
import os
import pathlib
import pickle
import typing as t

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nous_tools.errors import SandboxViolation
from nous_tools.run_context import RunContext
from nous_tools.sandbox import SandboxPolicy
from nous_tools.sandbox import _policy as sandbox_module

ENV = "NOUS_TOOLS_SANDBOX_MODE"


def real(path: str | os.PathLike[str]) -> pathlib.Path:
    return pathlib.Path(os.path.realpath(path))


@pytest.fixture(autouse=True)
def _no_env_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)


@pytest.fixture
def root(tmp_path: pathlib.Path) -> pathlib.Path:
    """A workspace root with a sibling `outside` directory and a sibling `rootX`."""
    workspace = tmp_path / "root"
    (workspace / "sub").mkdir(parents=True)
    (workspace / "sub" / "file.txt").write_text("inside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("outside")
    (tmp_path / "rootX").mkdir()
    return real(workspace)


def policy(mode: str, root: pathlib.Path, **kw: t.Any) -> SandboxPolicy:
    return SandboxPolicy.new(mode, workspace_root=root, **kw)


# -- the modes ------------------------------------------------------------------------


def test_read_only_refuses_every_write_and_allows_every_read(root: pathlib.Path) -> None:
    p = policy("read_only", root)
    for target in ("sub/file.txt", "new.txt", ".", str(root.parent / "outside" / "x")):
        with pytest.raises(SandboxViolation, match="read_only"):
            p.check_write(target)
        assert not p.allows_write(target)
    assert p.check_read("sub/file.txt") == root / "sub" / "file.txt"
    assert p.check_read(root.parent / "outside" / "secret.txt") == (
        root.parent / "outside" / "secret.txt"
    )


def test_workspace_write_allows_the_root_and_paths_under_it(root: pathlib.Path) -> None:
    p = policy("workspace_write", root)
    assert p.check_write("sub/file.txt") == root / "sub" / "file.txt"
    assert p.check_write("new/dir/not/yet/there.txt") == root / "new/dir/not/yet/there.txt"
    assert p.check_write(root / "sub") == root / "sub"
    assert p.check_write(".") == root
    assert p.check_write(root) == root
    assert p.allows_write("sub/./file.txt")


def test_workspace_write_refuses_outside_and_allows_reads_outside(root: pathlib.Path) -> None:
    p = policy("workspace_write", root)
    outside = root.parent / "outside" / "secret.txt"
    with pytest.raises(SandboxViolation, match="workspace_write"):
        p.check_write(outside)
    assert p.check_read(outside) == outside
    assert p.allows_read("../outside/secret.txt")


def test_danger_full_access_allows_writes_anywhere(root: pathlib.Path) -> None:
    p = policy("danger_full_access", root)
    outside = root.parent / "outside" / "secret.txt"
    assert p.check_write(outside) == outside
    assert p.check_write("../outside/new.txt") == root.parent / "outside" / "new.txt"
    assert p.check_write("sub/file.txt") == root / "sub" / "file.txt"
    assert p.allows_read(outside)


def test_violation_is_a_permission_error_naming_path_and_mode(root: pathlib.Path) -> None:
    p = policy("workspace_write", root)
    with pytest.raises(PermissionError) as info:
        p.check_write("../outside/secret.txt")
    assert isinstance(info.value, SandboxViolation)
    message = str(info.value)
    assert "'../outside/secret.txt'" in message
    assert str(root.parent / "outside" / "secret.txt") in message
    assert "workspace_write" in message
    assert str(root) in message


# -- escape attempts in workspace_write -----------------------------------------------


@pytest.mark.parametrize(
    "target",
    ["../outside", "../outside/secret.txt", "sub/../../outside", "sub/../../outside/new.txt"],
)
def test_dotdot_cannot_escape_the_root(root: pathlib.Path, target: str) -> None:
    p = policy("workspace_write", root)
    with pytest.raises(SandboxViolation):
        p.check_write(target)


def test_dotdot_that_stays_inside_is_allowed(root: pathlib.Path) -> None:
    p = policy("workspace_write", root)
    assert p.check_write("sub/../other.txt") == root / "other.txt"
    assert p.check_write("missing/../../root/x.txt") == root / "x.txt"


def test_absolute_path_outside_the_root_is_refused(root: pathlib.Path) -> None:
    p = policy("workspace_write", root)
    with pytest.raises(SandboxViolation):
        p.check_write(root.parent / "outside" / "secret.txt")
    with pytest.raises(SandboxViolation):
        p.check_write("/definitely/not/in/the/workspace.txt")


def test_symlink_inside_root_pointing_outside_is_refused(root: pathlib.Path) -> None:
    (root / "escape").symlink_to(root.parent / "outside", target_is_directory=True)
    p = policy("workspace_write", root)
    with pytest.raises(SandboxViolation):
        p.check_write("escape")
    with pytest.raises(SandboxViolation):
        p.check_write("escape/secret.txt")
    with pytest.raises(SandboxViolation):
        p.check_write("escape/new-file.txt")
    assert p.resolve_path("escape/secret.txt") == root.parent / "outside" / "secret.txt"


def test_dangling_symlink_pointing_outside_is_refused(root: pathlib.Path) -> None:
    (root / "dangling").symlink_to(root.parent / "outside" / "not-yet-created.txt")
    p = policy("workspace_write", root)
    with pytest.raises(SandboxViolation):
        p.check_write("dangling")


def test_symlink_inside_root_pointing_inside_is_allowed(root: pathlib.Path) -> None:
    (root / "alias").symlink_to(root / "sub", target_is_directory=True)
    p = policy("workspace_write", root)
    assert p.check_write("alias/file.txt") == root / "sub" / "file.txt"


def test_sibling_directory_sharing_the_prefix_is_not_under_the_root(root: pathlib.Path) -> None:
    sibling = root.parent / "rootX"
    assert str(sibling).startswith(str(root))  # the trap a string prefix check falls into
    p = policy("workspace_write", root)
    with pytest.raises(SandboxViolation):
        p.check_write(sibling / "file.txt")
    with pytest.raises(SandboxViolation):
        p.check_write("../rootX/file.txt")
    with pytest.raises(SandboxViolation):
        p.check_write(sibling)


def test_symlink_loop_is_a_violation_not_a_lexical_pass(root: pathlib.Path) -> None:
    (root / "loop").symlink_to("loop")
    p = policy("danger_full_access", root)
    with pytest.raises(SandboxViolation, match="loop"):
        p.resolve_path("loop/../../outside/x")
    with pytest.raises(SandboxViolation):
        policy("workspace_write", root).check_write("loop/../../outside/x")


@pytest.mark.parametrize("target", ["loop", "loop/x", "missing/../loop", "sub/../loop/x"])
def test_every_path_through_a_symlink_loop_is_refused(root: pathlib.Path, target: str) -> None:
    (root / "loop").symlink_to("loop")
    for mode in SandboxPolicy.MODES:
        with pytest.raises(SandboxViolation, match="symlink loop"):
            policy(mode, root).resolve_path(target)


def test_nul_byte_in_a_path_is_a_violation(root: pathlib.Path) -> None:
    for mode in SandboxPolicy.MODES:
        p = policy(mode, root)
        with pytest.raises(SandboxViolation, match="NUL"):
            p.check_write("sub/evil\x00.txt")
        with pytest.raises(SandboxViolation, match="NUL"):
            p.check_read("sub/evil\x00.txt")
        assert not p.allows_read("a\x00b")


def test_non_text_path_is_a_type_error(root: pathlib.Path) -> None:
    p = policy("workspace_write", root)
    with pytest.raises(TypeError, match="bytes"):
        p.check_write(b"sub/file.txt")  # type: ignore[arg-type]


# -- confine_reads --------------------------------------------------------------------


@pytest.mark.parametrize("mode", SandboxPolicy.MODES)
def test_confine_reads_limits_reads_to_the_root(root: pathlib.Path, mode: str) -> None:
    p = policy(mode, root, confine_reads=True)
    assert p.check_read("sub/file.txt") == root / "sub" / "file.txt"
    assert p.check_read(".") == root
    for target in ("../outside/secret.txt", "sub/../../outside", "../rootX"):
        with pytest.raises(SandboxViolation, match="confine_reads"):
            p.check_read(target)
        assert not p.allows_read(target)


def test_confine_reads_follows_symlinks(root: pathlib.Path) -> None:
    (root / "escape").symlink_to(root.parent / "outside", target_is_directory=True)
    p = policy("read_only", root, confine_reads=True)
    with pytest.raises(SandboxViolation):
        p.check_read("escape/secret.txt")


def test_confine_reads_is_off_by_default(root: pathlib.Path) -> None:
    assert policy("workspace_write", root).confine_reads is False


# -- construction and coercion --------------------------------------------------------


def test_new_returns_a_policy_as_is(root: pathlib.Path) -> None:
    p = SandboxPolicy("workspace_write", root)
    assert SandboxPolicy.new(p) is p


def test_new_with_keywords_on_a_policy_evolves_it(root: pathlib.Path) -> None:
    p = SandboxPolicy("workspace_write", root)
    q = SandboxPolicy.new(p, mode="read_only")
    assert (q.mode, q.workspace_root, p.mode) == ("read_only", root, "workspace_write")


def test_new_accepts_a_mode_string(root: pathlib.Path) -> None:
    for mode in SandboxPolicy.MODES:
        p = SandboxPolicy.new(mode, workspace_root=root)
        assert (p.mode, p.workspace_root) == (mode, root)


def test_new_accepts_a_mapping(root: pathlib.Path) -> None:
    p = SandboxPolicy.new(
        {
            "mode": "workspace_write",
            "workspace_root": str(root),
            "session_id": "s-1",
            "confine_reads": True,
        }
    )
    assert p == SandboxPolicy("workspace_write", root, "s-1", True)


def test_new_with_none_uses_the_default_mode_and_cwd(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV, "read_only")
    p = SandboxPolicy.new()
    assert (p.mode, p.workspace_root, p.session_id, p.confine_reads) == (
        "read_only",
        real(tmp_path),
        None,
        False,
    )
    assert SandboxPolicy.new({"workspace_root": tmp_path}).mode == "read_only"


def test_run_context_new_coerces_its_sandbox(root: pathlib.Path) -> None:
    ctx = RunContext.new({}, sandbox={"mode": "read_only", "workspace_root": root})
    assert ctx.sandbox == SandboxPolicy("read_only", root)


@pytest.mark.parametrize("bad", ["write_all", "READ_ONLY", "", "read-only"])
def test_unknown_mode_string_is_a_value_error_naming_the_valid_modes(
    root: pathlib.Path, bad: str
) -> None:
    with pytest.raises(ValueError, match=r"read_only.*workspace_write.*danger_full_access"):
        SandboxPolicy.new(bad, workspace_root=root)


def test_unknown_mode_hints_at_a_close_spelling(root: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="did you mean 'workspace_write'"):
        SandboxPolicy.new("workspace-write", workspace_root=root)


def test_unknown_mode_in_a_mapping_is_a_value_error(root: pathlib.Path) -> None:
    with pytest.raises(ValueError, match=r"'yolo'.*valid modes"):
        SandboxPolicy.new({"mode": "yolo", "workspace_root": root})
    with pytest.raises(ValueError, match="valid modes"):
        SandboxPolicy("yolo", root)


def test_unknown_mapping_key_is_a_value_error_naming_it(root: pathlib.Path) -> None:
    with pytest.raises(ValueError, match=r"'root'.*'workspace_root'") as info:
        SandboxPolicy.new({"mode": "read_only", "root": root, "extra": 1})
    assert "'extra'" in str(info.value)
    with pytest.raises(ValueError, match="'workspace'"):
        SandboxPolicy.new("read_only", workspace=root)


@pytest.mark.parametrize("bad", [3, ["read_only"], b"read_only", pathlib.Path("read_only")])
def test_new_refuses_other_types_with_a_type_error(bad: object) -> None:
    with pytest.raises(TypeError, match=type(bad).__name__):
        SandboxPolicy.new(bad)  # type: ignore[arg-type]


def test_field_types_are_checked_at_construction(root: pathlib.Path) -> None:
    with pytest.raises(TypeError):
        SandboxPolicy("read_only", root, session_id=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        SandboxPolicy("read_only", root, confine_reads="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        SandboxPolicy("read_only", 42)  # type: ignore[arg-type]


def test_relative_root_is_made_absolute_against_cwd(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path)
    p = SandboxPolicy.new("workspace_write", workspace_root="project")
    assert p.workspace_root.is_absolute()
    assert p.workspace_root == real(tmp_path) / "project"
    q = SandboxPolicy.new("workspace_write", workspace_root="./project/../project/")
    assert q.workspace_root == p.workspace_root


def test_root_given_through_a_symlink_is_the_real_path(tmp_path: pathlib.Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    p = SandboxPolicy.new("workspace_write", workspace_root=tmp_path / "link")
    assert p.workspace_root == real(tmp_path / "real")
    assert p.workspace_root != tmp_path / "link"
    assert p.check_write(tmp_path / "link" / "a.txt") == real(tmp_path / "real") / "a.txt"


def test_root_that_does_not_exist_yet_is_accepted(tmp_path: pathlib.Path) -> None:
    p = SandboxPolicy.new("workspace_write", workspace_root=tmp_path / "later")
    assert p.workspace_root == real(tmp_path) / "later"
    assert p.allows_write(tmp_path / "later" / "x")


@pytest.mark.parametrize("bad", ["/", "//", "/.", "/tmp/.."])
def test_filesystem_root_is_refused_as_workspace_root(bad: str) -> None:
    with pytest.raises(ValueError, match="file-system root"):
        SandboxPolicy("danger_full_access", bad)


def test_symlink_to_filesystem_root_is_refused(tmp_path: pathlib.Path) -> None:
    (tmp_path / "slash").symlink_to("/", target_is_directory=True)
    with pytest.raises(ValueError, match="file-system root"):
        SandboxPolicy("workspace_write", tmp_path / "slash")


def test_cwd_at_filesystem_root_is_refused_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")
    with pytest.raises(ValueError, match="current directory"):
        SandboxPolicy.new("read_only")


def test_nul_byte_in_root_is_refused(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="NUL"):
        SandboxPolicy("workspace_write", f"{tmp_path}/a\x00b")


def test_root_that_is_a_file_is_refused(root: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="not a directory"):
        SandboxPolicy("workspace_write", root / "sub" / "file.txt")


def test_policy_is_frozen_hashable_and_picklable(root: pathlib.Path) -> None:
    p = SandboxPolicy("workspace_write", root, "s-1")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        p.mode = "danger_full_access"  # type: ignore[misc]
    assert hash(p) == hash(SandboxPolicy("workspace_write", str(root), "s-1"))
    assert pickle.loads(pickle.dumps(p)) == p


def test_repr_is_readable_and_round_trips(root: pathlib.Path) -> None:
    p = SandboxPolicy("workspace_write", root)
    assert repr(p) == f"SandboxPolicy(mode='workspace_write', workspace_root={str(root)!r})"
    q = SandboxPolicy("read_only", root, session_id="s-1", confine_reads=True)
    assert repr(q) == (
        f"SandboxPolicy(mode='read_only', workspace_root={str(root)!r}, "
        "session_id='s-1', confine_reads=True)"
    )
    assert eval(repr(q), {"SandboxPolicy": SandboxPolicy}) == q


# -- the environment default ----------------------------------------------------------


@pytest.fixture
def fresh_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_module, "_warned_no_mode", False)


@pytest.mark.parametrize("mode", SandboxPolicy.MODES)
def test_default_mode_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fresh_warning: None,
    mode: str,
) -> None:
    monkeypatch.setenv(ENV, mode)
    with caplog.at_level(logging.WARNING, logger="nous_tools"):
        assert SandboxPolicy.default_mode() == mode
    assert caplog.records == []


def test_invalid_environment_mode_is_a_value_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, "sandboxed")
    with pytest.raises(ValueError, match=rf"{ENV}='sandboxed'.*read_only.*danger_full_access"):
        SandboxPolicy.default_mode()
    with pytest.raises(ValueError, match=ENV):
        SandboxPolicy.new()
    with pytest.raises(ValueError, match=ENV):
        SandboxPolicy.resolve(None)


def test_unset_environment_falls_back_to_full_access_and_warns_once(
    caplog: pytest.LogCaptureFixture, fresh_warning: None
) -> None:
    with caplog.at_level(logging.WARNING, logger="nous_tools"):
        assert SandboxPolicy.default_mode() == "danger_full_access"
        assert SandboxPolicy.default_mode() == "danger_full_access"
        assert SandboxPolicy.new().mode == "danger_full_access"
        SandboxPolicy.resolve(None)
    warnings = [r for r in caplog.records if r.name == "nous_tools"]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING
    text = warnings[0].getMessage()
    assert "No sandbox mode is configured" in text
    assert ENV in text
    assert "danger_full_access" in text


def test_empty_environment_value_counts_as_unset(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, fresh_warning: None
) -> None:
    monkeypatch.setenv(ENV, "  ")
    with caplog.at_level(logging.WARNING, logger="nous_tools"):
        assert SandboxPolicy.default_mode() == "danger_full_access"
    assert len(caplog.records) == 1


def test_configured_mode_never_warns(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, fresh_warning: None
) -> None:
    with caplog.at_level(logging.WARNING, logger="nous_tools"):
        SandboxPolicy.new("workspace_write")
        SandboxPolicy.resolve(None, mode="read_only")
        RunContext.new({}, sandbox="read_only")
    assert caplog.records == []


# -- resolve precedence ---------------------------------------------------------------


@attrs.define
class StandIn:
    """A context-like object: only `.sandbox` and `.deps`."""

    sandbox: SandboxPolicy | None = None
    deps: t.Any = None


@pytest.fixture
def dirs(tmp_path: pathlib.Path) -> dict[str, pathlib.Path]:
    out = {}
    for name in ("arg", "ctx", "deps", "cwd"):
        (tmp_path / name).mkdir()
        out[name] = real(tmp_path / name)
    return out


@pytest.fixture
def in_cwd(dirs: dict[str, pathlib.Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(dirs["cwd"])


def test_resolve_mode_argument_beats_ctx_sandbox(dirs: dict[str, pathlib.Path]) -> None:
    ctx = RunContext.new({}, sandbox=SandboxPolicy("read_only", dirs["ctx"]))
    assert SandboxPolicy.resolve(ctx, mode="workspace_write").mode == "workspace_write"


def test_resolve_mode_from_ctx_sandbox_beats_environment(
    dirs: dict[str, pathlib.Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "danger_full_access")
    ctx = RunContext.new({}, sandbox=SandboxPolicy("read_only", dirs["ctx"]))
    assert SandboxPolicy.resolve(ctx).mode == "read_only"
    assert SandboxPolicy.resolve(ctx, session_id="s").mode == "read_only"


def test_resolve_mode_falls_back_to_environment(
    dirs: dict[str, pathlib.Path], monkeypatch: pytest.MonkeyPatch, in_cwd: None
) -> None:
    monkeypatch.setenv(ENV, "workspace_write")
    assert SandboxPolicy.resolve(None).mode == "workspace_write"
    assert SandboxPolicy.resolve(StandIn(deps={"workspace_root": dirs["deps"]})).mode == (
        "workspace_write"
    )
    assert SandboxPolicy.resolve(RunContext.new({})).mode == "workspace_write"


def test_resolve_root_precedence(dirs: dict[str, pathlib.Path], in_cwd: None) -> None:
    deps = {"workspace_root": str(dirs["deps"])}
    with_sandbox = StandIn(SandboxPolicy("read_only", dirs["ctx"]), deps)
    without_sandbox = StandIn(None, deps)
    resolve = SandboxPolicy.resolve
    assert resolve(with_sandbox, workspace_root=dirs["arg"]).workspace_root == dirs["arg"]
    assert resolve(with_sandbox).workspace_root == dirs["ctx"]
    assert resolve(without_sandbox, mode="read_only").workspace_root == dirs["deps"]
    assert resolve(StandIn(None, {}), mode="read_only").workspace_root == dirs["cwd"]
    assert resolve(None, mode="read_only").workspace_root == dirs["cwd"]


def test_resolve_reads_deps_only_when_it_is_a_mapping(
    dirs: dict[str, pathlib.Path], in_cwd: None
) -> None:
    class Deps:
        workspace_root = dirs["deps"]

        def __getitem__(self, key: str) -> object:
            return dirs["deps"]

    for deps in (Deps(), [("workspace_root", dirs["deps"])], "workspace_root", None):
        resolved = SandboxPolicy.resolve(StandIn(None, deps), mode="read_only")
        assert resolved.workspace_root == dirs["cwd"]
        assert resolved.session_id is None


def test_resolve_session_id_precedence(dirs: dict[str, pathlib.Path], in_cwd: None) -> None:
    deps = {"session_id": "from-deps"}
    with_sandbox = StandIn(SandboxPolicy("read_only", dirs["ctx"], "from-ctx"), deps)
    resolve = SandboxPolicy.resolve
    assert resolve(with_sandbox, session_id="from-arg").session_id == "from-arg"
    assert resolve(with_sandbox).session_id == "from-ctx"
    assert resolve(StandIn(None, deps), mode="read_only").session_id == "from-deps"
    assert resolve(StandIn(None, {}), mode="read_only").session_id is None
    assert resolve(None, mode="read_only").session_id is None


def test_resolve_with_a_run_context(dirs: dict[str, pathlib.Path], in_cwd: None) -> None:
    ctx = RunContext.new({"workspace_root": dirs["deps"], "session_id": "s-9"})
    resolved = SandboxPolicy.resolve(ctx, mode="workspace_write")
    assert resolved == SandboxPolicy("workspace_write", dirs["deps"], "s-9")
    assert resolved.allows_write(dirs["deps"] / "x")
    assert not resolved.allows_write(dirs["cwd"] / "x")


def test_resolve_returns_ctx_sandbox_as_is_without_arguments(
    dirs: dict[str, pathlib.Path],
) -> None:
    p = SandboxPolicy("workspace_write", dirs["ctx"], "s", confine_reads=True)
    assert SandboxPolicy.resolve(StandIn(p, {"workspace_root": dirs["deps"]})) is p


def test_resolve_carries_confine_reads_from_ctx_sandbox(dirs: dict[str, pathlib.Path]) -> None:
    p = SandboxPolicy("workspace_write", dirs["ctx"], confine_reads=True)
    resolved = SandboxPolicy.resolve(StandIn(p), mode="read_only", workspace_root=dirs["arg"])
    assert (resolved.mode, resolved.workspace_root, resolved.confine_reads) == (
        "read_only",
        dirs["arg"],
        True,
    )
    assert SandboxPolicy.resolve(None, mode="read_only").confine_reads is False


def test_resolve_coerces_a_raw_sandbox_on_the_context(dirs: dict[str, pathlib.Path]) -> None:
    ctx = StandIn(t.cast(SandboxPolicy, {"mode": "read_only", "workspace_root": dirs["ctx"]}), None)
    assert SandboxPolicy.resolve(ctx) == SandboxPolicy("read_only", dirs["ctx"])


def test_resolve_relative_root_argument_is_taken_against_cwd(
    dirs: dict[str, pathlib.Path], in_cwd: None
) -> None:
    (dirs["cwd"] / "nested").mkdir()
    resolved = SandboxPolicy.resolve(None, mode="read_only", workspace_root="nested")
    assert resolved.workspace_root == dirs["cwd"] / "nested"


# -- property: workspace_write never lets a path out ----------------------------------


@pytest.fixture(scope="module")
def maze(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A root full of symlinks: into the root, out of it, up a level, and a loop."""
    base = tmp_path_factory.mktemp("maze")
    root = base / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "file.txt").write_text("x")
    (base / "outside" / "deep").mkdir(parents=True)
    (base / "rootX").mkdir()
    (root / "in_link").symlink_to(root / "a", target_is_directory=True)
    (root / "a" / "rel_in").symlink_to("b", target_is_directory=True)
    (root / "out_link").symlink_to(base / "outside", target_is_directory=True)
    (root / "a" / "up_link").symlink_to("../..", target_is_directory=True)
    (root / "sibling_link").symlink_to(base / "rootX", target_is_directory=True)
    (root / "dangling_out").symlink_to(base / "outside" / "nope")
    (root / "loop").symlink_to("loop")
    return real(root)


SAFE = ["a", "b", "file.txt", "new", ".", "in_link", "rel_in", "rootX"]
RISKY = ["..", "out_link", "up_link", "sibling_link", "dangling_out", "loop"]
segments = st.lists(st.sampled_from(SAFE + RISKY), max_size=8)


@settings(max_examples=300, deadline=None)
@given(parts=segments, absolute=st.booleans())
def test_workspace_write_result_is_always_under_the_root(
    maze: pathlib.Path, parts: list[str], absolute: bool
) -> None:
    p = SandboxPolicy("workspace_write", maze)
    target = os.path.join(str(maze) if absolute else "", *parts) if parts else "."
    try:
        resolved = p.check_write(target)
    except SandboxViolation:
        # Refusing is only acceptable when the path has a way out.
        assert any(part in RISKY for part in parts)
        return
    assert resolved.is_absolute()
    assert resolved == maze or resolved.is_relative_to(maze)
    assert p.resolve_path(resolved) == resolved  # canonical: resolving again changes nothing
    # Independent oracle: the deepest existing ancestor, as the OS resolves it, is inside.
    existing = resolved
    while not existing.exists():
        existing = existing.parent
    assert pathlib.Path(existing).resolve(strict=True).is_relative_to(maze)


@settings(max_examples=100, deadline=None)
@given(parts=st.lists(st.sampled_from(SAFE), max_size=8))
def test_workspace_write_never_refuses_a_plainly_inside_path(
    maze: pathlib.Path, parts: list[str]
) -> None:
    p = SandboxPolicy("workspace_write", maze)
    resolved = p.check_write(os.path.join(".", *parts))
    assert resolved.is_relative_to(maze)


def test_a_link_after_a_loop_the_os_never_reaches_is_refused(maze: pathlib.Path) -> None:
    """``missing/../loop/../out_link``: realpath folds the loop lexically and leaves
    ``out_link`` unresolved; the check must not hand back a path that points outside."""
    p = SandboxPolicy("workspace_write", maze)
    with pytest.raises(SandboxViolation):
        p.check_write(os.path.join("b", "..", "loop", "..", "out_link"))
    assert not p.allows_write(os.path.join("new", "..", "loop", "..", "out_link"))
