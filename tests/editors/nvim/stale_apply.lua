-- The user edits the buffer after the repair was verified: :TrellisApply must
-- be refused and leave the user's edit (and the file on disk) untouched.

local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)")
local H = dofile(here .. "helpers.lua")

H.run("stale_apply", function()
  local t = H.open_fixture()

  local diagnostic = H.wait_for_diagnostic(t)
  H.repair_until_verified(t, diagnostic)

  vim.api.nvim_buf_set_lines(t.bufnr, 0, 0, false, { "// an edit made after the repair was verified" })
  local edited = H.buffer_text(t.bufnr)

  local outcome = H.apply(t)
  H.log(("apply outcome: %s (%s)"):format(outcome.status, tostring(outcome.message)))
  if outcome.status == "applied" then
    error("the stale apply changed the buffer:\n" .. H.buffer_text(t.bufnr))
  end
  -- Give a late workspace/applyEdit the chance to (wrongly) land.
  vim.wait(2000)
  H.assert_equal(H.buffer_text(t.bufnr), edited, "the buffer after the refused apply")
  H.assert_equal(H.read_file(t.file), t.original, "the file on disk")
end)
