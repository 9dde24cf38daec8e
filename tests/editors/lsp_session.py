"""An editor's side of an LSP session with `trellis lsp`, for the replay tests.

`EditorSession` keeps the documents the "editor" has open, applies workspace
edits to them in the negotiated position encoding (refusing an edit computed for
another document version, as VS Code and Helix do), answers the server's
requests the way a client with the replayed capabilities would, and records
`trellis/searchStatus` notifications.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from lsprotocol import types
from pytest_lsp import LanguageClient

# Helix gives up on a request after 20 s and never cancels one; every replayed
# client is held to that, so a slow request fails here as it would there.
REQUEST_TIMEOUT_S = 20.0

# How long one server-side step (a check, a whole repair search) may take.
STEP_TIMEOUT_S = float(os.environ.get("TRELLIS_TEST_STEP_TIMEOUT_S", "240"))

TERMINAL_STATES = {
    "failed",
    "hard_pass",
    "residuals_remain",
    "no_eligible_candidate",
    "bound_reached",
    "cancelled",
    "already_clean",
}

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _window(caps: types.ClientCapabilities) -> types.WindowClientCapabilities:
    return caps.window or types.WindowClientCapabilities()


def _workspace(caps: types.ClientCapabilities) -> types.WorkspaceClientCapabilities:
    return caps.workspace or types.WorkspaceClientCapabilities()


# Server-to-client requests and the client capability that allows each.
CLIENT_REQUEST_SUPPORT: dict[str, Callable[[types.ClientCapabilities], bool]] = {
    types.WINDOW_WORK_DONE_PROGRESS_CREATE: lambda c: bool(_window(c).work_done_progress),
    types.WINDOW_SHOW_MESSAGE_REQUEST: lambda c: _window(c).show_message is not None,
    types.WINDOW_SHOW_DOCUMENT: lambda c: bool(_window(c).show_document and _window(c).show_document.support),
    types.WORKSPACE_APPLY_EDIT: lambda c: bool(_workspace(c).apply_edit),
    types.WORKSPACE_CONFIGURATION: lambda c: bool(_workspace(c).configuration),
    types.WORKSPACE_WORKSPACE_FOLDERS: lambda c: bool(_workspace(c).workspace_folders),
}


def _units(char: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(char.encode("utf-8"))
    if encoding == "utf-16":
        return 2 if ord(char) > 0xFFFF else 1
    if encoding == "utf-32":
        return 1
    raise ValueError(f"unknown position encoding {encoding!r}")


def position_to_index(text: str, position: types.Position, encoding: str) -> int:
    """The string index of an LSP position; past the end of a line clamps to it."""
    line_start = 0
    for _ in range(position.line):
        match = _LINE_BREAK.search(text, line_start)
        if match is None:
            return len(text)
        line_start = match.end()
    match = _LINE_BREAK.search(text, line_start)
    line_end = match.start() if match else len(text)
    index, units = line_start, 0
    while index < line_end and units < position.character:
        units += _units(text[index], encoding)
        index += 1
    if units > position.character:
        raise ValueError(f"position {position} falls inside a character ({encoding})")
    return index


def apply_text_edits(text: str, edits: list[types.TextEdit | types.AnnotatedTextEdit], encoding: str) -> str:
    """Applies non-overlapping edits, all relative to the original text."""
    spans = sorted(
        (
            (position_to_index(text, edit.range.start, encoding), position_to_index(text, edit.range.end, encoding), n)
            for n, edit in enumerate(edits)
        ),
        reverse=True,
    )
    for start, end, n in spans:
        text = text[:start] + edits[n].new_text + text[end:]
    return text


@dataclass
class OpenDocument:
    path: pathlib.Path
    uri: str
    version: int
    text: str


@dataclass
class EditorSession:
    client: LanguageClient
    capabilities: types.ClientCapabilities
    root: pathlib.Path
    encoding: str = "utf-16"
    client_name: str = ""
    documents: dict[str, OpenDocument] = field(default_factory=dict)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    message_requests: list[Any] = field(default_factory=list)
    # The method of every request the server sent, in arrival order.
    server_requests: list[str] = field(default_factory=list)
    refused_edits: list[str] = field(default_factory=list)
    server_capabilities: types.ServerCapabilities | None = None
    _status_event: asyncio.Event = field(default_factory=asyncio.Event)
    _change_event: asyncio.Event = field(default_factory=asyncio.Event)

    # -- session ------------------------------------------------------------

    async def initialize(self, client_name: str) -> types.InitializeResult:
        self.client_name = client_name
        # pygls wants plain functions (it tags them); a first parameter named `ls`
        # receives the client.
        def on_search_status(ls: LanguageClient, params: Any) -> None:
            self._on_search_status(params)

        def on_apply_edit(ls: LanguageClient, params: types.ApplyWorkspaceEditParams):
            return self._on_apply_edit(params)

        def on_show_message_request(ls: LanguageClient, params: types.ShowMessageRequestParams):
            return self._on_show_message_request(params)

        _structure_code_actions_by_shape(self.client)
        self._record_server_requests()
        self.client.feature("trellis/searchStatus")(on_search_status)
        self.client.feature(types.WORKSPACE_APPLY_EDIT)(on_apply_edit)
        self.client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)(on_show_message_request)
        root_uri = self.root.as_uri()
        result = await self.request(
            self.client.initialize_session(
                types.InitializeParams(
                    capabilities=self.capabilities,
                    client_info=types.ClientInfo(name=client_name),
                    root_uri=root_uri,
                    root_path=str(self.root),
                    workspace_folders=[types.WorkspaceFolder(uri=root_uri, name=self.root.name)],
                )
            )
        )
        self.server_capabilities = result.capabilities
        self.encoding = str(result.capabilities.position_encoding or "utf-16")
        return result

    def _record_server_requests(self) -> None:
        protocol = self.client.protocol
        handle = protocol._handle_request

        def recording(msg_id, method_name, params):
            self.server_requests.append(method_name)
            return handle(msg_id, method_name, params)

        protocol._handle_request = recording

    def unsupported_requests(self) -> list[str]:
        """The server's requests that the replayed capabilities do not allow
        (a method missing from `CLIENT_REQUEST_SUPPORT` counts as not allowed)."""
        return [
            method
            for method in self.server_requests
            if not CLIENT_REQUEST_SUPPORT.get(method, lambda _: False)(self.capabilities)
        ]

    async def request(self, awaitable):
        return await asyncio.wait_for(awaitable, REQUEST_TIMEOUT_S)

    async def wait_until(self, what: str, predicate: Callable[[], Any], wake: Callable[[], Any]):
        """Waits for `predicate()` to hold, re-checking whenever `wake()` completes."""

        async def loop():
            while True:
                value = predicate()
                if value:
                    return value
                await wake()

        try:
            return await asyncio.wait_for(loop(), STEP_TIMEOUT_S)
        except TimeoutError:
            # What the server told the user is usually why nothing arrived.
            told = "; ".join(f"{m.type.name}: {m.message}" for m in self.client.messages)
            raise AssertionError(
                f"timed out after {STEP_TIMEOUT_S:.0f} s waiting for {what}"
                + (f" (server messages: {told})" if told else "")
            ) from None

    # -- documents ----------------------------------------------------------

    def open(self, relative: str, language_id: str) -> OpenDocument:
        path = self.root / relative
        document = OpenDocument(path=path, uri=path.as_uri(), version=1, text=path.read_text(encoding="utf-8"))
        self.documents[document.uri] = document
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=document.uri, language_id=language_id, version=document.version, text=document.text
                )
            )
        )
        return document

    def change(self, document: OpenDocument, text: str) -> None:
        document.version += 1
        document.text = text
        self._change_event.set()
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=document.uri, version=document.version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    async def wait_for_text(self, document: OpenDocument, text: str) -> None:
        """Waits for the document to read `text` (an applyEdit may follow a command's reply)."""

        async def wake():
            self._change_event.clear()
            await self._change_event.wait()

        await self.wait_until("the verified edit in the document", lambda: document.text == text, wake)

    def save(self, document: OpenDocument) -> None:
        document.path.write_text(document.text, encoding="utf-8")
        self.client.text_document_did_save(
            types.DidSaveTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=document.uri), text=document.text
            )
        )

    def document_for(self, uri: str) -> OpenDocument | None:
        """The open document a URI names; servers may percent-encode differently."""
        path = pathlib.Path(urllib.parse.unquote(urllib.parse.urlparse(uri).path))
        return next((d for d in self.documents.values() if d.path == path), None)

    def published(self, document: OpenDocument) -> list[types.Diagnostic] | None:
        """The diagnostics last published for the document; None before any."""
        for uri, diagnostics in self.client.diagnostics.items():
            if self.document_for(uri) is document:
                return list(diagnostics)
        return None

    def trellis_diagnostics(self, document: OpenDocument) -> list[types.Diagnostic]:
        return [d for d in self.published(document) or [] if d.source == "trellis"]

    async def wait_for_diagnostics(self, document: OpenDocument, what: str, predicate) -> list[types.Diagnostic]:
        def check():
            if self.published(document) is None:
                return None
            found = self.trellis_diagnostics(document)
            return (found or True) if predicate(found) else None

        await self.wait_until(
            what, check, lambda: self.client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        )
        return self.trellis_diagnostics(document)

    # -- workspace edits ----------------------------------------------------

    def apply_workspace_edit(self, edit: types.WorkspaceEdit) -> tuple[bool, str | None]:
        """Applies an edit to open documents atomically; refuses stale versions."""
        planned: dict[str, str] = {}
        if edit.document_changes:
            for change in edit.document_changes:
                if not isinstance(change, types.TextDocumentEdit):
                    return False, f"unsupported resource operation {type(change).__name__}"
                document = self.document_for(change.text_document.uri)
                if document is None:
                    return False, f"{change.text_document.uri} is not open"
                version = change.text_document.version
                if version is not None and version != document.version:
                    return False, f"{document.uri}: edit for version {version}, document is at {document.version}"
                base = planned.get(document.uri, document.text)
                annotated = [e for e in change.edits if isinstance(e, types.AnnotatedTextEdit)]
                if annotated and not self.supports_change_annotations():
                    return False, "annotated text edits sent to a client without change-annotation support"
                unknown = [e.annotation_id for e in annotated if e.annotation_id not in (edit.change_annotations or {})]
                if unknown:
                    return False, f"text edits name undeclared change annotations {unknown}"
                # A client with annotation support shows them (VS Code: a
                # refactor preview); the person here accepts every change.
                planned[document.uri] = apply_text_edits(base, list(change.edits), self.encoding)
        for uri, edits in (edit.changes or {}).items():
            document = self.document_for(uri)
            if document is None:
                return False, f"{uri} is not open"
            planned[document.uri] = apply_text_edits(
                planned.get(document.uri, document.text), list(edits), self.encoding
            )
        for uri, text in planned.items():
            self.change(self.documents[uri], text)
        return True, None

    def supports_change_annotations(self) -> bool:
        workspace = self.capabilities.workspace
        edits = workspace.workspace_edit if workspace else None
        return bool(edits and edits.change_annotation_support)

    def _on_apply_edit(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        applied, reason = self.apply_workspace_edit(params.edit)
        if not applied:
            self.refused_edits.append(reason or "")
        return types.ApplyWorkspaceEditResult(applied=applied, failure_reason=reason)

    def _on_show_message_request(self, params: types.ShowMessageRequestParams):
        # A person who closes the prompt: the tests drive Preview/Apply themselves.
        self.message_requests.append(params)
        return None

    # -- trellis ------------------------------------------------------------

    def _on_search_status(self, params: Any) -> None:
        self.statuses.append(_plain(params))
        self._status_event.set()

    async def repair(self, action: types.CodeAction | types.Command) -> dict[str, Any]:
        """Runs a `Repair:` action and waits for the search it started to end."""
        seen = len(self.statuses)
        await self.run_code_action(action)
        return await self.wait_for_search_end(seen)

    async def wait_for_search_end(self, seen: int) -> dict[str, Any]:
        """The first terminal trellis/searchStatus after the first `seen` ones."""

        def finished():
            return next((s for s in self.statuses[seen:] if s.get("status") in TERMINAL_STATES), None)

        async def wake():
            self._status_event.clear()
            await self._status_event.wait()

        return await self.wait_until("trellis/searchStatus to report the end of the search", finished, wake)

    async def code_actions(self, document: OpenDocument, diagnostics: list[types.Diagnostic]):
        if diagnostics:
            start = min((d.range.start for d in diagnostics), key=lambda p: (p.line, p.character))
            end = max((d.range.end for d in diagnostics), key=lambda p: (p.line, p.character))
            span = types.Range(start=start, end=end)
        else:
            span = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0))
        actions = await self.request(
            self.client.text_document_code_action_async(
                types.CodeActionParams(
                    text_document=types.TextDocumentIdentifier(uri=document.uri),
                    range=span,
                    context=types.CodeActionContext(diagnostics=diagnostics),
                )
            )
        )
        return actions or []

    async def run_code_action(self, action: types.CodeAction | types.Command) -> Any:
        """Runs an action as an LSP client does: resolve, apply the edit, execute the command."""
        if isinstance(action, types.Command):
            return await self.execute(action)
        resolve = self.capabilities.text_document and self.capabilities.text_document.code_action
        resolvable = resolve and resolve.resolve_support and "edit" in resolve.resolve_support.properties
        provider = self.server_capabilities.code_action_provider if self.server_capabilities else None
        server_resolves = isinstance(provider, types.CodeActionOptions) and provider.resolve_provider
        if action.edit is None and resolvable and server_resolves and (action.data is not None or action.command is None):
            action = await self.request(self.client.code_action_resolve_async(action))
        if action.edit is not None:
            applied, reason = self.apply_workspace_edit(action.edit)
            if not applied:
                self.refused_edits.append(reason or "")
        if action.command is not None:
            return await self.execute(action.command)
        return None

    async def execute(self, command: types.Command) -> Any:
        return await self.request(
            self.client.workspace_execute_command_async(
                types.ExecuteCommandParams(command=command.command, arguments=command.arguments)
            )
        )


def _structure_code_actions_by_shape(client: LanguageClient) -> None:
    """lsprotocol reads any code-action result item with a `command` key as a
    bare `Command`, dropping the `edit`, `kind` and `data` of a `CodeAction`
    that carries a command. A `Command`'s `command` is a string; a
    `CodeAction`'s is an object: tell them apart by that."""
    converter = client.protocol._converter

    def structure(value: Any, _: type) -> types.Command | types.CodeAction:
        if isinstance(value.get("command"), str):
            return converter.structure(value, types.Command)
        return converter.structure(value, types.CodeAction)

    converter.register_structure_hook(Union[types.Command, types.CodeAction], structure)


def _plain(value: Any) -> Any:
    """Custom notifications arrive as attribute objects; tests want dicts."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return [_plain(v) for v in value]
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return {k: _plain(v) for k, v in vars(value).items()}
    return value
