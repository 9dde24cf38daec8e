// The command palette's Trellis commands, as pure decisions: which code
// action "Repair at cursor" runs, and which server command each palette
// entry becomes. extension.ts does the VS Code calls.

import { CANCEL_COMMAND, PREVIEW_COMMAND } from "./status";

// The trellis.repair.* commands and their arguments: docs/lsp-extensions.md.
export const APPLY_COMMAND = "trellis.repair.apply";

/** Palette command id → what it does. */
export const PALETTE = {
  repairAtCursor: "trellis.repairAtCursor",
  preview: "trellis.preview",
  apply: "trellis.apply",
  cancel: "trellis.cancel",
  restartServer: "trellis.restartServer",
  showOutput: "trellis.showOutput",
} as const;

/** A command as VS Code's code-action provider returns it. */
export interface CommandLike {
  command: string;
  arguments?: unknown[];
}

/** A code action or a bare command, as `vscode.executeCodeActionProvider` returns them. */
export interface ActionLike {
  title: string;
  command?: CommandLike | string;
  arguments?: unknown[];
}

/**
 * The server command of the first action titled `prefix…` (trellis's
 * `Repair: …` among every provider's actions), or undefined.
 */
export function commandOfAction(actions: readonly ActionLike[], prefix: string): CommandLike | undefined {
  const action = actions.find((candidate) => candidate.title.startsWith(prefix));
  if (action === undefined || action.command === undefined) {
    return undefined;
  }
  if (typeof action.command === "string") {
    return { command: action.command, arguments: action.arguments };
  }
  return action.command;
}

/** The server command for Preview, Apply or Cancel from the palette. */
export function serverCommand(
  which: "preview" | "apply" | "cancel",
  lastRepairId: string | undefined,
): CommandLike {
  // Without an id the server takes its latest verified repair; Cancel
  // without a cluster cancels every running search.
  const repair = lastRepairId === undefined ? [] : [{ repair_id: lastRepairId }];
  switch (which) {
    case "preview":
      return { command: PREVIEW_COMMAND, arguments: repair };
    case "apply":
      return { command: APPLY_COMMAND, arguments: repair };
    case "cancel":
      return { command: CANCEL_COMMAND, arguments: [] };
  }
}
