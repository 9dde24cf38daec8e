// Settings → how to start the server. Pure: the extension passes a getter over
// `vscode.workspace.getConfiguration("trellis")`, tests pass a plain object.

/** The settings the extension reads, already validated. */
export interface TrellisSettings {
  /** Binary to run; a bare name is looked up on PATH. */
  serverPath: string;
  /** Extra arguments appended after `lsp`. */
  extraArgs: string[];
}

/** How to spawn the language server: `command args...` over stdio. */
export interface ServerExecutable {
  command: string;
  args: string[];
}

/** Reads one key of the `trellis` configuration section; `undefined` when unset. */
export type SettingGetter = (key: string) => unknown;

/** A setting that has the wrong shape; names the full key so the user can find it. */
export class SettingError extends Error {
  constructor(
    readonly key: string,
    detail: string,
  ) {
    super(`invalid setting \`trellis.${key}\`: ${detail}`);
    this.name = "SettingError";
  }
}

const DEFAULT_SERVER_PATH = "trellis";

/**
 * Validates the settings. A wrong type fails closed with a `SettingError`
 * instead of silently starting some other binary.
 */
export function readSettings(get: SettingGetter): TrellisSettings {
  const rawPath = get("server.path");
  let serverPath = DEFAULT_SERVER_PATH;
  if (rawPath !== undefined && rawPath !== null) {
    if (typeof rawPath !== "string") {
      throw new SettingError("server.path", `expected a string, got ${describe(rawPath)}`);
    }
    // An empty path is what the settings UI leaves after clearing the field:
    // treat it as "use the default", not as a binary named "".
    if (rawPath.trim() !== "") {
      serverPath = rawPath.trim();
    }
  }

  const rawArgs = get("server.extraArgs");
  let extraArgs: string[] = [];
  if (rawArgs !== undefined && rawArgs !== null) {
    if (!Array.isArray(rawArgs)) {
      throw new SettingError("server.extraArgs", `expected an array of strings, got ${describe(rawArgs)}`);
    }
    extraArgs = rawArgs.map((arg, index) => {
      if (typeof arg !== "string") {
        throw new SettingError("server.extraArgs", `item ${index} is ${describe(arg)}, expected a string`);
      }
      return arg;
    });
  }

  return { serverPath, extraArgs };
}

/** The server is always `<path> lsp [extraArgs...]`, speaking LSP on stdio. */
export function serverExecutable(settings: TrellisSettings): ServerExecutable {
  return { command: settings.serverPath, args: ["lsp", ...settings.extraArgs] };
}

/** Setting keys whose change requires restarting the server. */
export const RESTART_KEYS = ["trellis.server.path", "trellis.server.extraArgs"] as const;

function describe(value: unknown): string {
  if (Array.isArray(value)) {
    return "an array";
  }
  return value === null ? "null" : `a ${typeof value}`;
}
