-- Broken crate → trellis diagnostic → :TrellisRepair → verified → :TrellisApply
-- → :write: the file on disk is the fixed crate and the diagnostic clears.

local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)")
local H = dofile(here .. "helpers.lua")

H.run("repair_apply", function()
  local t = H.open_fixture()
  local expected = H.read_file(os.getenv("TRELLIS_FIXTURE") .. ".fixed.rs")

  local diagnostic = H.wait_for_diagnostic(t)
  H.repair_until_verified(t, diagnostic)

  -- Preview: the branch's version of the file opens beside it in diff mode.
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
