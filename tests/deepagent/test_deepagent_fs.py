"""The filesystem layer: six tools over the in-memory and the sandboxed disk backend."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sleuth import create_deepagent, get_event_bus, run_context
from sleuth.deepagent import FilesystemBackend, SandboxError, StateBackend, filesystem_tools
from sleuth.models.scripted import ScriptedModel, text, tool_call
from sleuth.tools import Tool


def tools_by_name(backend: object) -> dict[str, Tool]:
    return {t.name: t for t in filesystem_tools(backend)}  # type: ignore[arg-type]


@pytest.fixture(params=["state", "disk"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> object:
    return StateBackend() if request.param == "state" else FilesystemBackend(tmp_path / "ws")


async def test_the_six_tools_work_on_both_backends(backend: object) -> None:
    fs = tools_by_name(backend)
    assert sorted(fs) == ["edit_file", "glob", "grep", "ls", "read_file", "write_file"]
    assert (await fs["write_file"].invoke({"path": "notes/a.md", "content": "alpha\nbeta\n"})).ok
    assert (await fs["write_file"].invoke({"path": "top.txt", "content": "beta beta"})).ok
    read = await fs["read_file"].invoke({"path": "notes/a.md", "offset": 1, "limit": 1})
    assert read.content == "beta\n"
    assert (await fs["ls"].invoke({})).content == '["notes/", "top.txt"]'
    assert (await fs["ls"].invoke({"path": "notes"})).content == '["notes/a.md"]'
    assert (await fs["glob"].invoke({"pattern": "**/*.md"})).content == '["notes/a.md"]'
    grep = await fs["grep"].invoke({"pattern": "^be", "glob": "*.md"})
    assert grep.content == '[{"path": "notes/a.md", "line": 2, "text": "beta"}]'

    twice = await fs["edit_file"].invoke(
        {"path": "top.txt", "old_string": "beta", "new_string": "gamma"}
    )
    assert not twice.ok and "occurs 2 times" in twice.content
    missing = await fs["edit_file"].invoke(
        {"path": "top.txt", "old_string": "zeta", "new_string": "x"}
    )
    assert not missing.ok and "not found" in missing.content
    edited = await fs["edit_file"].invoke(
        {"path": "top.txt", "old_string": "beta", "new_string": "gamma", "replace_all": True}
    )
    assert edited.ok
    assert (await fs["read_file"].invoke({"path": "top.txt"})).content == "gamma gamma"
    absent = await fs["read_file"].invoke({"path": "nope.md"})
    assert not absent.ok and "no file" in absent.content
    bad_regex = await fs["grep"].invoke({"pattern": "("})
    assert not bad_regex.ok and "invalid regular expression" in bad_regex.content


def test_state_backend_treats_a_leading_slash_as_the_workspace_root() -> None:
    backend = StateBackend()
    backend.write("/notes/a.md", "x")
    assert backend.paths() == ["notes/a.md"]
    with pytest.raises(SandboxError, match=r"'\.\.'"):
        backend.write("../a.md", "x")


@pytest.fixture
def sandbox(tmp_path: Path) -> tuple[FilesystemBackend, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    root = tmp_path / "ws"
    root.mkdir()
    (root / "inner.txt").write_text("inside")
    os.symlink(outside / "secret.txt", root / "leak.txt")
    os.symlink(outside, root / "escape")
    os.symlink(root / "inner.txt", root / "alias.txt")
    return FilesystemBackend(root), outside


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../outside/secret.txt", "'..' would leave the workspace"),
        ("notes/../../outside/secret.txt", "'..' would leave the workspace"),
        ("ATTACK", "absolute path"),
        ("leak.txt", "symlink"),
        ("escape/secret.txt", "symlink"),
        ("escape/new.txt", "symlink"),
    ],
)
async def test_disk_backend_refuses_every_escape(
    sandbox: tuple[FilesystemBackend, Path], path: str, reason: str
) -> None:
    backend, outside = sandbox
    if path == "ATTACK":
        path = str(outside / "secret.txt")
    fs = tools_by_name(backend)
    for name, arguments in [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "pwned"}),
        ("edit_file", {"path": path, "old_string": "top", "new_string": "pwned"}),
    ]:
        result = await fs[name].invoke(arguments)
        assert not result.ok, (name, path)
        assert "SandboxError" in result.content and reason in result.content
    assert (outside / "secret.txt").read_text() == "top secret"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_disk_backend_lists_only_real_files_and_follows_no_symlink(
    sandbox: tuple[FilesystemBackend, Path],
) -> None:
    backend, _ = sandbox
    assert backend.paths() == ["inner.txt"]
    with pytest.raises(SandboxError, match="'alias.txt' is a symlink"):
        backend.read("alias.txt")
    grep = await tools_by_name(backend)["grep"].invoke({"pattern": "secret"})
    assert grep.content == "[]"


async def test_disk_files_persist_between_runs(tmp_path: Path) -> None:
    model = ScriptedModel(
        [tool_call("write_file", path="report/draft.md", content="# Draft"), text("saved")]
    )
    agent = create_deepagent(
        model=model, backend=FilesystemBackend(tmp_path / "scratch"), grounding=False
    )
    await agent.arun("write a draft")
    assert (tmp_path / "scratch" / "report" / "draft.md").read_text() == "# Draft"
    assert "write_file" in model.calls[0].tool_names


async def test_files_round_trip_in_an_agent_run_and_publish_events() -> None:
    model = ScriptedModel(
        [
            tool_call("write_file", path="notes.md", content="CRM grew 12%"),
            tool_call("read_file", path="notes.md"),
            text("done"),
        ]
    )
    backend = StateBackend()
    agent = create_deepagent(model=model, enable_filesystem=True, backend=backend, grounding=False)
    events: list[tuple[str, dict]] = []
    async with run_context():
        remove = get_event_bus().add_listener(
            lambda e: (
                events.append((e.event_type, e.data))
                if e.event_type.startswith("deepagent.fs")
                else None
            )
        )
        try:
            result = await agent.arun("take notes")
        finally:
            remove()
    assert model.calls[2].messages[-1].content == "CRM grew 12%"
    assert backend.files == {"notes.md": "CRM grew 12%"}
    assert result.state.layers["filesystem"] == {"files": {"notes.md": "CRM grew 12%"}}
    assert [(t, d["path"]) for t, d in events] == [
        ("deepagent.fs.write", "notes.md"),
        ("deepagent.fs.read", "notes.md"),
    ]
    assert "private workspace" in model.calls[0].system_text


async def test_without_the_layer_there_are_no_file_tools() -> None:
    model = ScriptedModel([text("ok")])
    await create_deepagent(model=model, grounding=False).arun("hi")
    assert model.calls[0].tool_names == []
