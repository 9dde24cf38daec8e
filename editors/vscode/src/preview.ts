// Working out which branch file a Preview should diff, from the arguments the
// server put on its `trellis.repair.preview` command.

/** Which repair to preview and, when known, which workspace-relative file. */
export interface PreviewTarget {
  repairId: string;
  path?: string;
}

/**
 * Reads `[{ repair_id, path? }]`. When the command carries no repair id (an
 * older server, or a status-bar click before any status), the last repair the
 * client heard about is used; `undefined` means there is nothing to preview.
 */
export function previewTarget(args: unknown[], lastRepairId: string | undefined): PreviewTarget | undefined {
  const first = args[0];
  const record = typeof first === "object" && first !== null ? (first as Record<string, unknown>) : {};
  const rawId = record["repair_id"];
  const repairId = typeof rawId === "string" || typeof rawId === "number" ? String(rawId) : lastRepairId;
  if (repairId === undefined) {
    return undefined;
  }
  const rawPath = record["path"];
  return typeof rawPath === "string" && rawPath !== "" ? { repairId, path: rawPath } : { repairId };
}
