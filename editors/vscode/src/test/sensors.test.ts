import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";

import { SENSORS, activationEvents, documentSelector } from "../sensors";

// out/test/ → the extension's directory.
const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8"));

test("package.json activates only where a sensor exists", () => {
  assert.deepEqual(manifest.activationEvents, activationEvents());
});

test("the extension attaches to files of the sensors' languages only", () => {
  assert.deepEqual(documentSelector(), [
    { scheme: "file", language: "rust" },
    { scheme: "file", language: "python" },
    { scheme: "file", language: "typescript" },
  ]);
  assert.deepEqual(
    SENSORS.map((sensor) => sensor.language),
    ["rust", "python", "typescript"],
  );
});

test("every palette command is declared in package.json", () => {
  const declared = manifest.contributes.commands.map((command: { command: string }) => command.command);
  assert.deepEqual(declared.sort(), [
    "trellis.apply",
    "trellis.cancel",
    "trellis.preview",
    "trellis.repairAtCursor",
    "trellis.restartServer",
    "trellis.showOutput",
  ]);
  // The server's own commands are registered by the language client; a
  // palette command of the same name would fail to register.
  for (const name of declared) {
    assert.ok(!name.startsWith("trellis.repair."), name);
  }
});
