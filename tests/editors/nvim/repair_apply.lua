-- Broken project → trellis diagnostic → :TrellisRepair → verified →
-- :TrellisApply → :write: the file on disk is the repaired file and the
-- diagnostics clear. One script for every language: TRELLIS_LANGUAGE picks
-- the case below (rust when unset), TRELLIS_FIXTURE is its project.
--   rust:       tests/editors/fixtures/missing_mut (and its .fixed.rs); the
--               Preview diff is checked too
--   python:     tests/fixtures/py-missing-import, ty's import fix
--   typescript: tests/fixtures/ts-missing-import (node_modules linked),
--               tsserver's import fix

local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)")
local H = dofile(here .. "helpers.lua")

-- file: the file to open (the fixture's src/main.rs when nil); filetype and
-- code: what the buffer and its diagnostic must be (unchecked when nil);
-- expected(t): the repaired text; preview: whether to check Preview first.
local cases = {
  rust = {
    expected = function()
      return H.read_file(os.getenv("TRELLIS_FIXTURE") .. ".fixed.rs")
    end,
    preview = true,
  },
  python = {
    file = "clock/__init__.py",
    filetype = "python",
    code = "unresolved-reference",
    expected = function(t)
      return (t.original:gsub("\n\n\ndef here", "\nimport os\n\n\ndef here", 1))
    end,
  },
  typescript = {
    file = "src/report.ts",
    filetype = "typescript",
    code = "TS2304",
    expected = function()
      return H.read_file(here .. "../fixtures/ts_missing_import.fixed.ts")
    end,
  },
}

local language = os.getenv("TRELLIS_LANGUAGE") or "rust"
local case = cases[language]

--- Preview: the branch's version of the file opens beside it in diff mode.
local function check_preview(t, expected)
  local preview
  t.trellis.preview({
    bufnr = t.bufnr,
    on_done = function(err, buf)
      preview = { err = err, buf = buf }
    end,
  })
  H.wait("the preview", function()
    return preview
  end, 30000)
  if preview.buf == nil then
    error("Preview opened no diff: " .. tostring(preview.err))
  end
  H.assert_equal(H.buffer_text(preview.buf), expected, "the preview of the branch file")
  assert(vim.wo.diff, "the preview window is in diff mode")
  vim.cmd("close")
  vim.cmd("diffoff!")
  vim.api.nvim_set_current_buf(t.bufnr)
end

H.run("repair_apply " .. language, function()
  if case == nil then
    error("TRELLIS_LANGUAGE=" .. language .. " names no case of repair_apply.lua", 0)
  end
  local t = H.open_fixture(case.file)
  if case.filetype then
    H.assert_equal(vim.bo[t.bufnr].filetype, case.filetype, "the file's filetype")
  end
  local expected = case.expected(t)

  local diagnostic = H.wait_for_diagnostic(t)
  if case.code then
    H.assert_equal(diagnostic.code, case.code, "the diagnostic's code")
  end
  H.repair_until_verified(t, diagnostic)
  if case.preview then
    check_preview(t, expected)
  end

  local outcome = H.apply(t)
  if outcome.status == "refused" or outcome.status == "not_offered" then
    error(("apply %s: %s"):format(outcome.status, tostring(outcome.message)))
  end
  -- The edit may arrive through workspace/applyEdit after the command returns.
  H.wait("the verified edit in the buffer", function()
    return H.buffer_text(t.bufnr) == expected
  end, 30000)

  vim.cmd("write")
  H.assert_equal(H.read_file(t.file), expected, "the saved file")

  H.wait("the trellis diagnostics to clear after saving", function()
    return #t.trellis.diagnostics(t.bufnr) == 0
  end)
end)
