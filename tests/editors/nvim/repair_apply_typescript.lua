-- A TypeScript project (tests/fixtures/ts-missing-import, its node_modules
-- linked) → trellis diagnostic from tsc → :TrellisRepair → verified →
-- :TrellisApply → :write: the import tsserver offers is in the file on disk
-- and the diagnostics clear.

local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)")
local H = dofile(here .. "helpers.lua")

H.run("repair_apply_typescript", function()
  local t = H.open_fixture("src/report.ts")
  H.assert_equal(vim.bo[t.bufnr].filetype, "typescript", "the file's filetype")
  local expected = H.read_file(here .. "../fixtures/ts_missing_import.fixed.ts")

  local diagnostic = H.wait_for_diagnostic(t)
  H.assert_equal(diagnostic.code, "TS2304", "the diagnostic's code")
  H.repair_until_verified(t, diagnostic)

  local outcome = H.apply(t)
  if outcome.status == "refused" or outcome.status == "not_offered" then
    error(("apply %s: %s"):format(outcome.status, tostring(outcome.message)))
  end
  H.wait("the verified import in the buffer", function()
    return H.buffer_text(t.bufnr) == expected
  end, 30000)

  vim.cmd("write")
  H.assert_equal(H.read_file(t.file), expected, "the saved file")

  H.wait("the trellis diagnostics to clear after saving", function()
    return #t.trellis.diagnostics(t.bufnr) == 0
  end)
end)
