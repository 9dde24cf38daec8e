import { test } from "node:test";
import * as assert from "node:assert/strict";

import { previewTarget } from "../preview";

test("the command's repair id and path win", () => {
  assert.deepEqual(previewTarget([{ repair_id: "r2", path: "src/lib.rs" }], "r1"), {
    repairId: "r2",
    path: "src/lib.rs",
  });
});

test("without a repair id the last reported repair is previewed", () => {
  assert.deepEqual(previewTarget([], "r1"), { repairId: "r1" });
  assert.deepEqual(previewTarget([{ cluster: "c1" }], "r1"), { repairId: "r1" });
});

test("with no repair known there is nothing to preview", () => {
  assert.equal(previewTarget([{ cluster: "c1" }], undefined), undefined);
});

test("numeric repair ids are accepted", () => {
  assert.deepEqual(previewTarget([{ repair_id: 4 }], undefined), { repairId: "4" });
});
