import { test } from "node:test";
import * as assert from "node:assert/strict";

import { commandOfAction, serverCommand } from "../palette";

test("Repair at cursor runs the command of trellis's Repair action", () => {
  const actions = [
    { title: "Add missing import", command: { command: "rust-analyzer.applyImport", arguments: [] } },
    { title: "Repair: E0384 in src/lib.rs", command: { command: "trellis.repair.start", arguments: [{ cluster: "c1" }] } },
  ];
  assert.deepEqual(commandOfAction(actions, "Repair:"), {
    command: "trellis.repair.start",
    arguments: [{ cluster: "c1" }],
  });
});

test("a bare Command counts, and nothing is run when no Repair is offered", () => {
  const bare = [{ title: "Repair: x", command: "trellis.repair.start", arguments: [{ cluster: "c2" }] }];
  assert.deepEqual(commandOfAction(bare, "Repair:"), { command: "trellis.repair.start", arguments: [{ cluster: "c2" }] });
  assert.equal(commandOfAction([{ title: "Organize imports" }], "Repair:"), undefined);
  assert.equal(commandOfAction([{ title: "Repair: without a command" }], "Repair:"), undefined);
});

test("Preview and Apply name the last repair, or let the server take its latest", () => {
  assert.deepEqual(serverCommand("apply", "7"), { command: "trellis.repair.apply", arguments: [{ repair_id: "7" }] });
  assert.deepEqual(serverCommand("preview", undefined), { command: "trellis.repair.preview", arguments: [] });
  assert.deepEqual(serverCommand("cancel", "7"), { command: "trellis.repair.cancel", arguments: [] });
});
