// The `trellis/searchStatus` notification and how the status-bar item shows it.
// Pure so it can be tested under plain Node.

/** Search states the server reports; anything else is shown verbatim. */
export type KnownSearchState =
  | "running"
  | "hard_pass"
  | "residuals_remain"
  | "no_eligible_candidate"
  | "bound_reached"
  | "cancelled"
  | "already_clean";

/** The fields of `trellis/searchStatus` the client relies on. */
export interface SearchStatus {
  repairId: string;
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
  const repairId = record["repair_id"];
  if (typeof repairId !== "string" && typeof repairId !== "number") {
    return new Error("trellis/searchStatus: `repair_id` must be a string or number");
  }
  const status = record["status"];
  if (typeof status !== "string" || status === "") {
    return new Error("trellis/searchStatus: `status` must be a non-empty string");
  }
  const summary = record["summary"];
  if (summary !== undefined && summary !== null && typeof summary !== "string") {
    return new Error("trellis/searchStatus: `summary` must be a string");
  }
  return { repairId: String(repairId), status, summary: summary ?? "" };
}

const LABELS: Record<KnownSearchState, { icon: string; label: string }> = {
  running: { icon: "$(sync~spin)", label: "searching" },
  hard_pass: { icon: "$(pass)", label: "verified repair ready" },
  residuals_remain: { icon: "$(warning)", label: "residuals remain" },
  no_eligible_candidate: { icon: "$(circle-slash)", label: "no candidate" },
  bound_reached: { icon: "$(warning)", label: "search bound reached" },
  cancelled: { icon: "$(close)", label: "cancelled" },
  already_clean: { icon: "$(check)", label: "already clean" },
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
  const tooltipLines = [`Trellis repair ${status.repairId}: ${label}`];
  if (status.summary !== "") {
    tooltipLines.push(status.summary);
  }
  const view: StatusView = { text: `${icon} Trellis: ${label}`, tooltip: tooltipLines.join("\n") };
  const args = [{ repair_id: status.repairId }];
  if (status.status === "running") {
    view.command = { name: CANCEL_COMMAND, arguments: args };
    view.tooltip += "\nClick to cancel.";
  } else if (status.status === "hard_pass") {
    view.command = { name: PREVIEW_COMMAND, arguments: args };
    view.tooltip += "\nClick to preview the verified repair.";
  }
  return view;
}
