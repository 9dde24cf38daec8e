import { test } from "node:test";
import * as assert from "node:assert/strict";

import { CANCEL_COMMAND, PREVIEW_COMMAND, parseSearchStatus, renderStatus } from "../status";

test("a well-formed notification parses, numeric ids become strings", () => {
  assert.deepEqual(parseSearchStatus({ repair_id: 7, status: "running", summary: "branch 1 of 3" }), {
    repairId: "7",
    status: "running",
    summary: "branch 1 of 3",
  });
});

test("a missing summary is an empty summary", () => {
  const status = parseSearchStatus({ repair_id: "r1", status: "hard_pass" });
  assert.ok(!(status instanceof Error));
  assert.equal(status.summary, "");
});

test("malformed notifications are errors naming the field", () => {
  assert.match(String(parseSearchStatus(null)), /must be an object/);
  assert.match(String(parseSearchStatus({ status: "running" })), /repair_id/);
  assert.match(String(parseSearchStatus({ repair_id: "r", status: "" })), /status/);
  assert.match(String(parseSearchStatus({ repair_id: "r", status: "running", summary: 3 })), /summary/);
});

test("before any repair the item is a plain label without a command", () => {
  const view = renderStatus(undefined);
  assert.equal(view.text, "$(tools) Trellis");
  assert.equal(view.command, undefined);
});

test("a running search spins and clicking cancels that repair", () => {
  const view = renderStatus({ repairId: "r1", status: "running", summary: "branch 2 of 3" });
  assert.equal(view.text, "$(sync~spin) Trellis: searching");
  assert.match(view.tooltip, /branch 2 of 3/);
  assert.deepEqual(view.command, { name: CANCEL_COMMAND, arguments: [{ repair_id: "r1" }] });
});

test("a hard pass offers the preview of that repair", () => {
  const view = renderStatus({ repairId: "r9", status: "hard_pass", summary: "1 file changed" });
  assert.equal(view.text, "$(pass) Trellis: verified repair ready");
  assert.deepEqual(view.command, { name: PREVIEW_COMMAND, arguments: [{ repair_id: "r9" }] });
});

test("every terminal state other than hard pass has a label and no command", () => {
  const expected: Record<string, string> = {
    residuals_remain: "residuals remain",
    no_eligible_candidate: "no candidate",
    bound_reached: "search bound reached",
    cancelled: "cancelled",
    already_clean: "already clean",
  };
  for (const [status, label] of Object.entries(expected)) {
    const view = renderStatus({ repairId: "r", status, summary: "" });
    assert.ok(view.text.endsWith(`Trellis: ${label}`), `${status} renders as ${view.text}`);
    assert.equal(view.command, undefined, status);
  }
});

test("a state this client does not know is shown readably rather than dropped", () => {
  const view = renderStatus({ repairId: "r", status: "waiting_for_model", summary: "" });
  assert.equal(view.text, "$(question) Trellis: waiting for model");
});
