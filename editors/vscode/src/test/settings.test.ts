import { test } from "node:test";
import * as assert from "node:assert/strict";

import { SettingError, readSettings, serverExecutable } from "../settings";

function getter(values: Record<string, unknown>) {
  return (key: string) => values[key];
}

test("unset settings start `trellis lsp` from PATH", () => {
  const settings = readSettings(getter({}));
  assert.deepEqual(serverExecutable(settings), { command: "trellis", args: ["lsp"] });
});

test("server path and extra args are passed after `lsp`", () => {
  const settings = readSettings(
    getter({ "server.path": "/opt/trellis/bin/trellis", "server.extraArgs": ["--log", "debug"] }),
  );
  assert.deepEqual(serverExecutable(settings), {
    command: "/opt/trellis/bin/trellis",
    args: ["lsp", "--log", "debug"],
  });
});

test("a cleared server path falls back to the default", () => {
  const settings = readSettings(getter({ "server.path": "   " }));
  assert.equal(settings.serverPath, "trellis");
});

test("a server path that is not a string is refused naming the key", () => {
  assert.throws(
    () => readSettings(getter({ "server.path": 42 })),
    (error: unknown) =>
      error instanceof SettingError &&
      error.key === "server.path" &&
      error.message.includes("trellis.server.path") &&
      error.message.includes("a number"),
  );
});

test("extra args with a non-string item are refused naming the item", () => {
  assert.throws(
    () => readSettings(getter({ "server.extraArgs": ["--ok", 3] })),
    (error: unknown) =>
      error instanceof SettingError && error.key === "server.extraArgs" && error.message.includes("item 1"),
  );
});

test("extra args given as a single string are refused", () => {
  assert.throws(
    () => readSettings(getter({ "server.extraArgs": "--log debug" })),
    /trellis\.server\.extraArgs.*array of strings/,
  );
});
