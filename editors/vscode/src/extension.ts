// VS Code entry point. Everything that can be decided without VS Code lives in
// settings.ts, status.ts, branchUri.ts, preview.ts, palette.ts and sensors.ts;
// this file wires those to the editor and to the language client. esbuild
// bundles it with vscode-languageclient into out/extension.js.

import * as vscode from "vscode";
import {
  ExecuteCommandSignature,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
} from "vscode-languageclient/node";

import { BRANCH_SCHEME, decodeBranchUri, diffTitle, encodeBranchUri, workspaceRelativePath } from "./branchUri";
import { PREVIEW_COMMAND, SearchStatus, parseSearchStatus, renderStatus } from "./status";
import { previewTarget } from "./preview";
import { ActionLike, CommandLike, PALETTE, commandOfAction, serverCommand } from "./palette";
import { documentSelector } from "./sensors";
import { RESTART_KEYS, readSettings, serverExecutable } from "./settings";

// Trellis's LSP extensions: documented in docs/lsp-extensions.md.
const SEARCH_STATUS_NOTIFICATION = "trellis/searchStatus";
const BRANCH_FILE_REQUEST = "trellis/branchFile";

/** The languages with a trellis sensor; trellis attaches beside each one's own server. */
const DOCUMENT_SELECTOR = documentSelector();

let client: LanguageClient | undefined;
/** The last repair the server reported an id for: what Preview shows by default. */
let lastRepairId: string | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel("Trellis");
  const statusItem = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 0);
  context.subscriptions.push(output, statusItem);
  showStatus(statusItem, undefined);
  statusItem.show();

  context.subscriptions.push(
    vscode.workspace.registerTextDocumentContentProvider(BRANCH_SCHEME, {
      provideTextDocumentContent: (uri) => branchFileText(uri),
    }),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (RESTART_KEYS.some((key) => event.affectsConfiguration(key))) {
        await stopClient();
        await startClient(output, statusItem);
      }
    }),
    { dispose: () => void stopClient() },
    vscode.commands.registerCommand(PALETTE.repairAtCursor, repairAtCursor),
    vscode.commands.registerCommand(PALETTE.preview, () => runServerCommand(serverCommand("preview", lastRepairId))),
    vscode.commands.registerCommand(PALETTE.apply, () => runServerCommand(serverCommand("apply", lastRepairId))),
    vscode.commands.registerCommand(PALETTE.cancel, () => runServerCommand(serverCommand("cancel", lastRepairId))),
    vscode.commands.registerCommand(PALETTE.restartServer, async () => {
      await stopClient();
      await startClient(output, statusItem);
    }),
    vscode.commands.registerCommand(PALETTE.showOutput, () => output.show(true)),
  );

  await startClient(output, statusItem);
}

/** Runs a server command through the language client's registration (and the Preview middleware). */
async function runServerCommand(command: CommandLike): Promise<void> {
  if (client === undefined || !client.isRunning()) {
    void vscode.window.showWarningMessage("Trellis: the language server is not running (Trellis: Restart server).");
    return;
  }
  await vscode.commands.executeCommand(command.command, ...(command.arguments ?? []));
}

/** Runs trellis's `Repair: …` code action for the diagnostic under the cursor. */
async function repairAtCursor(): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined) {
    void vscode.window.showInformationMessage("Trellis: open a file and put the cursor on a trellis diagnostic.");
    return;
  }
  const actions = await vscode.commands.executeCommand<ActionLike[]>(
    "vscode.executeCodeActionProvider",
    editor.document.uri,
    editor.selection,
  );
  const command = commandOfAction(actions ?? [], "Repair:");
  if (command === undefined) {
    void vscode.window.showInformationMessage("Trellis: no repair is offered at the cursor.");
    return;
  }
  await runServerCommand(command);
}

export async function deactivate(): Promise<void> {
  await stopClient();
}

async function startClient(output: vscode.OutputChannel, statusItem: vscode.StatusBarItem): Promise<void> {
  let settings;
  try {
    settings = readSettings((key) => vscode.workspace.getConfiguration("trellis").get(key));
  } catch (error) {
    void vscode.window.showErrorMessage(`Trellis not started: ${(error as Error).message}`);
    return;
  }
  const executable = serverExecutable(settings);
  const serverOptions: ServerOptions = { command: executable.command, args: executable.args };
  const clientOptions: LanguageClientOptions = {
    documentSelector: DOCUMENT_SELECTOR,
    outputChannel: output,
    // The client registers every command the server lists in
    // `executeCommandProvider`; the extension registers none of them itself
    // (doing so would fail with "command already exists"). Preview is only
    // intercepted on its way to the server, to open a diff editor.
    middleware: { executeCommand: interceptPreview },
  };
  // The id "trellis" makes the client read `trellis.trace.server` itself.
  const started = new LanguageClient("trellis", "Trellis", serverOptions, clientOptions);
  started.onNotification(SEARCH_STATUS_NOTIFICATION, (params: unknown) => {
    const status = parseSearchStatus(params);
    if (status instanceof Error) {
      output.appendLine(status.message);
      return;
    }
    lastRepairId = status.repairId ?? lastRepairId;
    showStatus(statusItem, status);
  });
  client = started;
  try {
    await started.start();
  } catch (error) {
    client = undefined;
    void vscode.window.showErrorMessage(
      `Trellis: could not start \`${executable.command} ${executable.args.join(" ")}\`: ${(error as Error).message}. ` +
        "Set `trellis.server.path` to the trellis binary.",
    );
  }
}

async function stopClient(): Promise<void> {
  const running = client;
  client = undefined;
  if (running !== undefined) {
    await running.stop();
  }
}

function showStatus(item: vscode.StatusBarItem, status: SearchStatus | undefined): void {
  const view = renderStatus(status);
  item.text = view.text;
  item.tooltip = view.tooltip;
  item.command =
    view.command === undefined
      ? undefined
      : { title: view.text, command: view.command.name, arguments: view.command.arguments };
}

/**
 * Preview opens `vscode.diff` of the current file against the branch's version.
 * When the file cannot be determined the command goes to the server unchanged,
 * which answers with `window/showDocument` or a message.
 */
async function interceptPreview(command: string, args: unknown[], next: ExecuteCommandSignature): Promise<unknown> {
  if (command !== PREVIEW_COMMAND) {
    return next(command, args);
  }
  const target = previewTarget(args, lastRepairId);
  const fileUri = target === undefined ? undefined : previewFileUri(target.path);
  if (target === undefined || fileUri === undefined) {
    return next(command, args);
  }
  const folder = vscode.workspace.getWorkspaceFolder(fileUri);
  const relative = folder === undefined ? undefined : workspaceRelativePath(folder.uri.fsPath, fileUri.fsPath);
  if (relative === undefined) {
    return next(command, args);
  }
  const branchUri = vscode.Uri.from(encodeBranchUri({ repairId: target.repairId, path: relative }));
  await vscode.commands.executeCommand("vscode.diff", fileUri, branchUri, diffTitle(relative));
  return undefined;
}

/** The file to diff: the command's path (workspace-relative) or the active editor's file. */
function previewFileUri(relativePath: string | undefined): vscode.Uri | undefined {
  if (relativePath !== undefined) {
    const folder = vscode.workspace.workspaceFolders?.[0];
    return folder === undefined ? undefined : vscode.Uri.joinPath(folder.uri, relativePath);
  }
  const active = vscode.window.activeTextEditor?.document.uri;
  return active?.scheme === "file" ? active : undefined;
}

async function branchFileText(uri: vscode.Uri): Promise<string> {
  const file = decodeBranchUri({ scheme: uri.scheme, path: uri.path, query: uri.query });
  if (file instanceof Error) {
    throw file;
  }
  if (client === undefined) {
    throw new Error("Trellis: the language server is not running");
  }
  const reply = await client.sendRequest<{ text: string }>(BRANCH_FILE_REQUEST, {
    repair_id: file.repairId,
    path: file.path,
  });
  return reply.text;
}
