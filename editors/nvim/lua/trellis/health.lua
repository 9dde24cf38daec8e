-- :checkhealth trellis — is the binary there, which version, is a server
-- attached, and which configured languages have a sensor. Reads only.

local config = require("trellis.config")
local compat = require("trellis.compat")
local sensors = require("trellis.sensors")

local M = {}

-- vim.health.start/ok/... from 0.10; report_* before.
local health = vim.health or require("health")
local start = health.start or health.report_start
local ok = health.ok or health.report_ok
local warn = health.warn or health.report_warn
local fail = health.error or health.report_error
local info = health.info or health.report_info

local function check_binary()
  local cmd = config.current.cmd
  local binary = type(cmd) == "table" and cmd[1] or nil
  if type(binary) ~= "string" or vim.fn.executable(binary) ~= 1 then
    fail(("trellis binary not found: `%s` is not executable"):format(tostring(binary)), {
      "Install it with `cargo install --path lsp` from a checkout of trellis",
      "or set `cmd = { '/full/path/to/trellis', 'lsp' }` in require('trellis').setup{}",
    })
    return
  end
  ok(("trellis binary: %s"):format(vim.fn.exepath(binary)))
  local output = vim.fn.system({ binary, "--version" })
  if vim.v.shell_error ~= 0 then
    fail(("`%s --version` failed: %s"):format(binary, vim.trim(output)))
  else
    ok(("version: %s"):format(vim.trim(output)))
  end
end

-- What `trellis doctor` says of the sandbox a branch's builds and tests run in.
local function check_sandbox()
  local binary = type(config.current.cmd) == "table" and config.current.cmd[1] or nil
  if type(binary) ~= "string" or vim.fn.executable(binary) ~= 1 then
    return
  end
  local output = vim.fn.system({ binary, "doctor", "--format", "json" })
  local decoded, doc = pcall(vim.json and vim.json.decode or vim.fn.json_decode, output)
  if vim.v.shell_error ~= 0 or not decoded or type(doc) ~= "table" or type(doc.sandbox) ~= "table" then
    warn(("`%s doctor` said nothing readable: %s"):format(binary, vim.trim(output)))
    return
  end
  local sandbox = doc.sandbox
  if sandbox.files and sandbox.network then
    ok("sandbox: " .. sandbox.summary)
  else
    warn("sandbox: " .. sandbox.summary, {
      "Trellis needs Linux with Landlock and unprivileged user namespaces to confine a branch",
      "set `[sandbox] require = false` in trellis.toml only if you accept model-written code running as you",
    })
  end
end

local function check_attached()
  local attached = 0
  for _, client in pairs(compat.clients()) do
    if client.name == config.current.name then
      attached = attached + 1
      local buffers = vim.tbl_count(client.attached_buffers or {})
      ok(("server attached: client %d, root %s, %d buffer(s)"):format(
        client.id,
        tostring(client.config and client.config.root_dir),
        buffers
      ))
    end
  end
  if attached == 0 then
    warn("server not attached to any buffer", {
      ("open a file of type %s inside a project with one of %s"):format(
        table.concat(config.current.filetypes, ", "),
        table.concat(config.current.root_markers, ", ")
      ),
    })
  end
end

local function check_sensors()
  for _, filetype in ipairs(config.current.filetypes) do
    local sensor = sensors[filetype]
    if not sensor then
      warn(("%s: no trellis sensor for this language; trellis reports nothing there"):format(filetype))
    elseif vim.fn.executable(sensor.tool) == 1 then
      ok(("%s: sensor %s, `%s` at %s"):format(filetype, sensor.sensor, sensor.tool, vim.fn.exepath(sensor.tool)))
    else
      fail(("%s: sensor %s needs `%s`, which is not on PATH"):format(filetype, sensor.sensor, sensor.tool))
    end
  end
end

function M.check()
  start("trellis")
  if not compat.has("nvim-0.8") then
    warn("setup() needs Neovim 0.8+")
  end
  check_binary()
  check_sandbox()
  check_attached()
  start("trellis: sensors")
  check_sensors()
  info("messages never prompt: a finished search shows one line, Apply is in the code actions")
end

return M
