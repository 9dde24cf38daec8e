// The `trellis/searchStatus` notification and how the status-bar item shows it.
// Pure so it can be tested under plain Node.

/** Search states the server reports (docs/lsp-extensions.md, "States"); anything else is shown verbatim. */
export type KnownSearchState =
  | "running"
  | "failed"
  | "hard_pass"
  | "residuals_remain"
  | "no_eligible_candidate"
  | "bound_reached"
  | "cancelled"
  | "already_clean"
  | "applied";

/** The fields of `trellis/searchStatus` the client relies on. */
export interface SearchStatus {
  /** The engine's repair id; the server sends it once the search has ended. */
  repairId?: string;
  /** The cluster being repaired (what `trellis.repair.cancel` takes). */
  cluster?: string;
  clusterTitle?: string;
  status: string;
  summary: string;
}

/** What the status-bar item shows, and what clicking it runs. */
export interface StatusView {
  text: string;
  tooltip: string;
  /** Server command to run on click, with its arguments. */
  command?: { name: string; arguments: unknown[] };
}

export const PREVIEW_COMMAND = "trellis.repair.preview";
export const CANCEL_COMMAND = "trellis.repair.cancel";

/**
 * Validates a notification payload. Returns an `Error` naming the bad field
 * rather than throwing, so the caller can log it and keep the last good state.
 */
export function parseSearchStatus(params: unknown): SearchStatus | Error {
  if (typeof params !== "object" || params === null) {
    return new Error("trellis/searchStatus: params must be an object");
  }
  const record = params as Record<string, unknown>;
  const status = record["status"];
  if (typeof status !== "string" || status === "") {
    return new Error("trellis/searchStatus: `status` must be a non-empty string");
  }
  const parsed: SearchStatus = { status, summary: "" };
  const repairId = record["repair_id"];
  if (typeof repairId === "string" || typeof repairId === "number") {
    parsed.repairId = String(repairId);
  } else if (repairId !== undefined && repairId !== null) {
    return new Error("trellis/searchStatus: `repair_id` must be a string, a number or null");
  }
  for (const [field, key] of [
    ["cluster", "cluster"],
    ["cluster_title", "clusterTitle"],
    ["summary", "summary"],
  ] as const) {
    const value = record[field];
    if (typeof value === "string") {
      parsed[key] = value;
    } else if (value !== undefined && value !== null) {
      return new Error(`trellis/searchStatus: \`${field}\` must be a string`);
    }
  }
  return parsed;
}

const LABELS: Record<KnownSearchState, { icon: string; label: string }> = {
  running: { icon: "$(sync~spin)", label: "searching" },
  failed: { icon: "$(error)", label: "search failed" },
  hard_pass: { icon: "$(pass)", label: "verified repair ready" },
  residuals_remain: { icon: "$(warning)", label: "residuals remain" },
  no_eligible_candidate: { icon: "$(circle-slash)", label: "no candidate" },
  bound_reached: { icon: "$(warning)", label: "search bound reached" },
  cancelled: { icon: "$(close)", label: "cancelled" },
  already_clean: { icon: "$(check)", label: "already clean" },
  applied: { icon: "$(check)", label: "repair applied" },
};

function isKnown(state: string): state is KnownSearchState {
  return Object.prototype.hasOwnProperty.call(LABELS, state);
}

/** Renders the status-bar item; `undefined` means no repair has run yet. */
export function renderStatus(status: SearchStatus | undefined): StatusView {
  if (status === undefined) {
    return { text: "$(tools) Trellis", tooltip: "Trellis: no repair started" };
  }
  const { icon, label } = isKnown(status.status)
    ? LABELS[status.status]
    : { icon: "$(question)", label: status.status.replace(/_/g, " ") };
  const subject = status.clusterTitle ?? (status.repairId === undefined ? undefined : `repair ${status.repairId}`);
  const tooltipLines = [subject === undefined ? `Trellis: ${label}` : `Trellis: ${label} (${subject})`];
  if (status.summary !== "") {
    tooltipLines.push(status.summary);
  }
  const view: StatusView = { text: `${icon} Trellis: ${label}`, tooltip: tooltipLines.join("\n") };
  if (status.status === "running" && status.cluster !== undefined) {
    view.command = { name: CANCEL_COMMAND, arguments: [{ cluster: status.cluster }] };
    view.tooltip += "\nClick to cancel.";
  } else if (status.status === "hard_pass" && status.repairId !== undefined) {
    view.command = { name: PREVIEW_COMMAND, arguments: [{ repair_id: status.repairId }] };
    view.tooltip += "\nClick to preview the verified repair.";
  }
  return view;
}
