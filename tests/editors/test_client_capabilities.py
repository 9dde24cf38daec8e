"""Repair → Apply through `trellis lsp`, replaying the `initialize` capabilities
of real editors (see capabilities/README.md).

Needs TRELLIS_BIN (default: `trellis` on PATH). Each client gets a fresh copy of
a crate whose repair sits on a line with non-ASCII text, so a wrong position
encoding puts `mut ` in the wrong column and the test fails.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil

import pytest_asyncio
import pytest_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from lsp_session import EditorSession

HERE = pathlib.Path(__file__).resolve().parent
FIXTURE = HERE / "fixtures" / "missing_mut_unicode"
FIXED = HERE / "fixtures" / "missing_mut_unicode.fixed.rs"
TRELLIS_BIN = os.environ.get("TRELLIS_BIN", "trellis")


def recorded(name: str) -> types.ClientCapabilities:
    params = json.loads((HERE / "capabilities" / name).read_text(encoding="utf-8"))
    return default_converter().structure(params, types.InitializeParams).capabilities


def without_progress(capabilities: types.ClientCapabilities) -> types.ClientCapabilities:
    capabilities.window = types.WindowClientCapabilities(work_done_progress=False)
    return capabilities


def with_trellis_plugin(capabilities: types.ClientCapabilities) -> types.ClientCapabilities:
    """As editors/nvim's setup() sends them: it announces searches itself."""
    capabilities.experimental = {"trellis": {"announcesSearchStatus": True}}
    return capabilities


# name → (clientInfo.name, capabilities)
CLIENTS = {
    "vscode": ("Visual Studio Code", lambda: client_capabilities("visual-studio-code")),
    "neovim-0.7": ("Neovim", lambda: client_capabilities("neovim@v0.7.0")),
    "neovim-0.11": ("Neovim", lambda: client_capabilities("neovim@v0.11.0")),
    # 0.12 as vim.lsp.enable("trellis") starts it, and with the plugin.
    "neovim-0.12": ("Neovim", lambda: recorded("neovim-0.12.json")),
    "neovim-0.12-plugin": ("Neovim", lambda: with_trellis_plugin(recorded("neovim-0.12.json"))),
    "helix": ("helix", lambda: recorded("helix.json")),
    # Helix as recorded but without `window.workDoneProgress`: the server must
    # not create progress tokens for it.
    "helix-no-progress": ("helix", lambda: without_progress(recorded("helix.json"))),
}


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[TRELLIS_BIN, "lsp"]))
async def server(lsp_client: LanguageClient):
    """A fresh `trellis lsp` process with pytest-lsp's client attached."""
    yield
    await lsp_client.shutdown_session()


@pytest_asyncio.fixture(params=list(CLIENTS))
async def session(server: LanguageClient, request, tmp_path) -> EditorSession:
    """The server initialized by one replayed editor, on a fresh copy of the fixture crate."""
    client_name, capabilities = CLIENTS[request.param]
    root = tmp_path / "crate"
    shutil.copytree(FIXTURE, root)
    editor = EditorSession(client=server, capabilities=capabilities(), root=root)
    await editor.initialize(client_name)
    return editor


def offered_encodings(capabilities: types.ClientCapabilities) -> list[str]:
    general = capabilities.general
    return [str(e) for e in (general.position_encodings or [])] if general else []


async def test_position_encoding_is_negotiated(session: EditorSession):
    offered = offered_encodings(session.capabilities)
    expected = "utf-8" if "utf-8" in offered else "utf-16"
    assert session.encoding == expected, f"client offered {offered or 'nothing'}"


async def test_server_lists_the_repair_commands(session: EditorSession):
    provider = session.server_capabilities.execute_command_provider
    assert provider is not None
    for command in ("trellis.repair.start", "trellis.repair.preview", "trellis.repair.apply", "trellis.repair.cancel"):
        assert command in provider.commands


def titled(actions, prefix: str):
    return next((a for a in actions if a.title.startswith(prefix)), None)


def assert_nothing_modal_or_unsupported(session: EditorSession) -> None:
    """No request the client did not advertise; none that Neovim renders as a
    modal prompt; no announcement a plugin said it makes itself."""
    assert session.unsupported_requests() == [], session.server_requests
    if session.client_name == "Neovim":
        assert session.message_requests == [], "Neovim renders showMessageRequest as a modal prompt"
    experimental = session.capabilities.experimental or {}
    if experimental.get("trellis", {}).get("announcesSearchStatus"):
        assert session.message_requests == [], session.message_requests
        # The announcement ("Trellis: verified repair … ready for …"); refusals
        # and errors still arrive as messages.
        told = [m.message for m in session.client.messages if " ready for " in m.message]
        assert told == [], told


async def test_repair_then_apply_fixes_the_file(session: EditorSession):
    document = session.open("src/main.rs", "rust")
    diagnostics = await session.wait_for_diagnostics(document, "trellis diagnostics", lambda found: bool(found))
    assert all(isinstance(d.data, dict) and "cluster" in d.data for d in diagnostics), diagnostics

    actions = await session.code_actions(document, diagnostics)
    repair = titled(actions, "Repair:")
    assert repair is not None, [a.title for a in actions]
    outcome = await session.repair(repair)
    assert outcome["status"] == "hard_pass", outcome

    actions = await session.code_actions(document, session.trellis_diagnostics(document))
    assert titled(actions, "Preview verified repair") is not None, [a.title for a in actions]
    apply = titled(actions, "Apply verified repair")
    assert apply is not None, [a.title for a in actions]
    await session.run_code_action(apply)

    expected = FIXED.read_text(encoding="utf-8")
    assert not session.refused_edits, session.refused_edits
    await session.wait_for_text(document, expected)

    session.save(document)
    await session.wait_for_diagnostics(document, "the diagnostics to clear", lambda found: not found)

    if not (session.capabilities.window and session.capabilities.window.work_done_progress):
        assert session.client.progress_reports == {}, "progress created for a client that did not advertise it"
    assert_nothing_modal_or_unsupported(session)


async def test_stale_apply_is_refused_and_keeps_the_edit(session: EditorSession):
    document = session.open("src/main.rs", "rust")
    diagnostics = await session.wait_for_diagnostics(document, "trellis diagnostics", lambda found: bool(found))
    repair = titled(await session.code_actions(document, diagnostics), "Repair:")
    assert repair is not None
    assert (await session.repair(repair))["status"] == "hard_pass"

    # The Apply action as offered for the verified view, then the user types.
    apply = titled(await session.code_actions(document, session.trellis_diagnostics(document)), "Apply verified repair")
    assert apply is not None
    edited = "// typed after the repair was verified\n" + document.text
    session.change(document, edited)

    try:
        await session.run_code_action(apply)
    except Exception as error:  # a refusal may come back as an error response
        refusal = str(error)
    else:
        # ...or as an edit this client rejects for its stale version, or as a
        # warning or error message to the user (which the server's output may
        # deliver after its reply to the resolve).
        def warnings():
            return [
                m.message
                for m in session.client.messages
                if m.type in (types.MessageType.Error, types.MessageType.Warning)
            ]

        if not (session.refused_edits or warnings()):
            await session.wait_until(
                "a refusal message",
                warnings,
                lambda: session.client.wait_for_notification(types.WINDOW_SHOW_MESSAGE),
            )
        refusal = "; ".join(session.refused_edits + warnings())
    assert document.text == edited, "the stale apply changed the document"
    assert refusal, "the stale apply was neither refused by the server nor rejected as a stale edit"
    assert document.path.read_text(encoding="utf-8") == FIXTURE.joinpath("src/main.rs").read_text(encoding="utf-8")
    assert_nothing_modal_or_unsupported(session)
