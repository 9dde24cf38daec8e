-- :checkhealth trellis with the plugin set up as the README says and the
-- server attached to the fixture: the report names the binary, its
-- version, the attached server and the Rust sensor.

local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)")
local H = dofile(here .. "helpers.lua")

H.run("health", function()
  local t = H.open_fixture()
  H.wait_for_diagnostic(t)
  vim.cmd("checkhealth trellis")
  local report = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n")
  local version = vim.trim(vim.fn.system({ os.getenv("TRELLIS_BIN"), "--version" }))
  local expected = {
    "OK trellis binary: " .. vim.fn.exepath("trellis"),
    "OK version: " .. version,
    "OK sandbox: on: a branch's builds and tests write only the branch",
    "OK server attached: client ",
    "root " .. t.root .. ", 1 buffer(s)",
    "OK rust: sensor cargo (cargo check, cargo test), `cargo` at ",
  }
  for _, line in ipairs(expected) do
    if not report:find(line, 1, true) then
      error(("the report lacks %q:\n%s"):format(line, report))
    end
  end
  assert(not report:find("ERROR", 1, true), report)
end)
