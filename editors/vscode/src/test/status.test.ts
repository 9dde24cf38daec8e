import { test } from "node:test";
import * as assert from "node:assert/strict";

import { CANCEL_COMMAND, PREVIEW_COMMAND, parseSearchStatus, renderStatus } from "../status";

test("a finished search parses, numeric repair ids become strings", () => {
  assert.deepEqual(
    parseSearchStatus({
      repair_id: 7,
      job: "j1",
      cluster: "c1",
      cluster_title: "E0384 in src/main.rs",
      status: "hard_pass",
      summary: "1 file changed",
      steps: 1,
      forest: [],
    }),
    { repairId: "7", cluster: "c1", clusterTitle: "E0384 in src/main.rs", status: "hard_pass", summary: "1 file changed" },
  );
});

test("a running search has no repair id yet", () => {
  assert.deepEqual(parseSearchStatus({ repair_id: null, job: "j1", cluster: "c1", status: "running", summary: "" }), {
    cluster: "c1",
    status: "running",
    summary: "",
  });
});

test("malformed notifications are errors naming the field", () => {
  assert.match(String(parseSearchStatus(null)), /must be an object/);
  assert.match(String(parseSearchStatus({ repair_id: "r" })), /`status`/);
  assert.match(String(parseSearchStatus({ repair_id: "r", status: "" })), /`status`/);
  assert.match(String(parseSearchStatus({ repair_id: {}, status: "running" })), /`repair_id`/);
  assert.match(String(parseSearchStatus({ status: "running", summary: 3 })), /`summary`/);
  assert.match(String(parseSearchStatus({ status: "running", cluster: 3 })), /`cluster`/);
});

test("before any repair the item is a plain label without a command", () => {
  const view = renderStatus(undefined);
  assert.equal(view.text, "$(tools) Trellis");
  assert.equal(view.command, undefined);
});

test("a running search spins and clicking cancels that cluster's search", () => {
  const view = renderStatus({ cluster: "c1", clusterTitle: "E0384", status: "running", summary: "branch 2 of 3" });
  assert.equal(view.text, "$(sync~spin) Trellis: searching");
  assert.match(view.tooltip, /searching \(E0384\)/);
  assert.match(view.tooltip, /branch 2 of 3/);
  assert.deepEqual(view.command, { name: CANCEL_COMMAND, arguments: [{ cluster: "c1" }] });
});

test("a hard pass offers the preview of that repair", () => {
  const view = renderStatus({ repairId: "r9", cluster: "c1", status: "hard_pass", summary: "1 file changed" });
  assert.equal(view.text, "$(pass) Trellis: verified repair ready");
  assert.deepEqual(view.command, { name: PREVIEW_COMMAND, arguments: [{ repair_id: "r9" }] });
});

test("every other state has a label and no command", () => {
  const expected: Record<string, string> = {
    failed: "search failed",
    residuals_remain: "residuals remain",
    no_eligible_candidate: "no candidate",
    bound_reached: "search bound reached",
    cancelled: "cancelled",
    already_clean: "already clean",
    applied: "repair applied",
  };
  for (const [status, label] of Object.entries(expected)) {
    const view = renderStatus({ repairId: "r", cluster: "c", status, summary: "" });
    assert.ok(view.text.endsWith(`Trellis: ${label}`), `${status} renders as ${view.text}`);
    assert.equal(view.command, undefined, status);
  }
});

test("a state this client does not know is shown readably rather than dropped", () => {
  const view = renderStatus({ status: "waiting_for_model", summary: "" });
  assert.equal(view.text, "$(question) Trellis: waiting for model");
});
