import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as path from "node:path";

import { BRANCH_SCHEME, decodeBranchUri, diffTitle, encodeBranchUri, workspaceRelativePath } from "../branchUri";

test("branch URIs round-trip, including spaces, non-ASCII and URI metacharacters", () => {
  for (const file of [
    { repairId: "r1", path: "src/main.rs" },
    { repairId: "repair 2&x=y", path: "src/dir with space/ünïcödé.py" },
    { repairId: "3", path: "a/b?c#d.ts" },
  ]) {
    const uri = encodeBranchUri(file);
    assert.equal(uri.scheme, BRANCH_SCHEME);
    assert.deepEqual(decodeBranchUri(uri), file);
  }
});

test("the file name stays last in the path so the diff gets the right language", () => {
  assert.ok(encodeBranchUri({ repairId: "r", path: "src/lib.rs" }).path.endsWith("/lib.rs"));
});

test("paths that escape the workspace are refused both ways", () => {
  assert.throws(() => encodeBranchUri({ repairId: "r", path: "../etc/passwd" }), /workspace-relative/);
  assert.throws(() => encodeBranchUri({ repairId: "r", path: "" }), /workspace-relative/);
  const decoded = decodeBranchUri({ scheme: BRANCH_SCHEME, path: "/src/../../x", query: "repair=r" });
  assert.ok(decoded instanceof Error);
});

test("decoding names what is missing", () => {
  assert.match(String(decodeBranchUri({ scheme: "file", path: "/a", query: "" })), /scheme `file`/);
  assert.match(String(decodeBranchUri({ scheme: BRANCH_SCHEME, path: "/a", query: "" })), /repair/);
});

test("workspace-relative paths use `/` and exclude files outside the root", () => {
  const root = path.resolve("/work/crate");
  assert.equal(workspaceRelativePath(root, path.join(root, "src", "main.rs")), "src/main.rs");
  assert.equal(workspaceRelativePath(root, path.resolve("/work/other/main.rs")), undefined);
  assert.equal(workspaceRelativePath(root, root), undefined);
});

test("the diff title names the file", () => {
  assert.equal(diffTitle("src/main.rs"), "main.rs (current ↔ verified repair)");
});
