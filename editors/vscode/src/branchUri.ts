// `trellis-branch:` URIs name one file of one repair's verified branch. VS Code
// opens them through a content provider that asks the server for the text
// (`trellis/branchFile`), so Preview can show a real side-by-side diff.
//
// Only URI *components* are handled here; `vscode.Uri.from` / `uri.path` /
// `uri.query` do the percent-encoding, which keeps this module free of VS Code.

import * as path from "node:path";

export const BRANCH_SCHEME = "trellis-branch";

/** One file in one repair's branch; `path` is workspace-relative with `/`. */
export interface BranchFile {
  repairId: string;
  path: string;
}

/** The components of a `trellis-branch:` URI (unencoded, as `vscode.Uri` holds them). */
export interface UriComponents {
  scheme: string;
  path: string;
  query: string;
}

/**
 * The path keeps the file's name last so VS Code picks the right language
 * mode for the diff's right-hand side.
 */
export function encodeBranchUri(file: BranchFile): UriComponents {
  checkRelative(file.path);
  const query = new URLSearchParams({ repair: file.repairId }).toString();
  return { scheme: BRANCH_SCHEME, path: `/${file.path}`, query };
}

/** Inverse of `encodeBranchUri`; an `Error` says what is wrong with the URI. */
export function decodeBranchUri(uri: UriComponents): BranchFile | Error {
  if (uri.scheme !== BRANCH_SCHEME) {
    return new Error(`not a ${BRANCH_SCHEME}: URI (scheme \`${uri.scheme}\`)`);
  }
  const repairId = new URLSearchParams(uri.query).get("repair");
  if (repairId === null || repairId === "") {
    return new Error(`${BRANCH_SCHEME}: URI \`${uri.path}\` has no \`repair\` query parameter`);
  }
  const relative = uri.path.replace(/^\/+/, "");
  try {
    checkRelative(relative);
  } catch (error) {
    return error as Error;
  }
  return { repairId, path: relative };
}

/**
 * The workspace-relative `/`-separated path of `filePath` under `root`, or
 * `undefined` when the file is outside the root (a branch never holds it).
 */
export function workspaceRelativePath(root: string, filePath: string): string | undefined {
  const relative = path.relative(root, filePath);
  if (relative === "" || relative.startsWith("..") || path.isAbsolute(relative)) {
    return undefined;
  }
  return relative.split(path.sep).join("/");
}

/** Title of the diff editor tab. */
export function diffTitle(relativePath: string): string {
  return `${path.posix.basename(relativePath)} (current ↔ verified repair)`;
}

function checkRelative(relative: string): void {
  const segments = relative.split("/");
  if (relative === "" || segments.some((segment) => segment === ".." || segment === "")) {
    throw new Error(`branch file path \`${relative}\` must be a non-empty workspace-relative path`);
  }
}
