-- Shared steps of the headless Neovim tests. Each test script is run as
--   nvim --headless --clean -c "luafile <script>"
-- with TRELLIS_BIN (the trellis binary, whose directory is first on PATH so
-- the default `cmd` finds it), TRELLIS_PLUGIN_DIR (editors/nvim) and
-- TRELLIS_FIXTURE (a crate to copy) in the environment; it exits 0 when
-- every assertion held and 1 otherwise (:cquit), printing why on stderr.
--
-- The plugin runs as shipped: loaded as the README says, with none of its
-- handlers replaced (a prompt would hang these tests, as it would a user).

local H = {}

local function env(name)
  local value = os.getenv(name)
  if value == nil or value == "" then
    error("environment variable " .. name .. " is not set", 0)
  end
  return value
end

--- Milliseconds to wait for one server step (a whole repair search included).
H.timeout = tonumber(os.getenv("TRELLIS_TEST_STEP_TIMEOUT_MS") or "") or 240000

function H.log(message)
  -- Neovim writes its own messages to stderr without a newline; start clean.
  io.stderr:write("\n" .. message .. "\n")
end

--- Waits until `predicate()` is truthy, processing events meanwhile; raises
--- an error naming `what` on timeout.
function H.wait(what, predicate, timeout)
  local value
  local ok = vim.wait(timeout or H.timeout, function()
    value = predicate()
    return value
  end, 50)
  if not ok then
    -- What the server told the user is usually why nothing arrived.
    local told = package.loaded["trellis.state"] and package.loaded["trellis.state"].messages or {}
    local suffix = #told > 0 and (" (server messages: " .. table.concat(told, "; ") .. ")") or ""
    error("timed out waiting for " .. what .. suffix, 2)
  end
  return value
end

function H.read_file(path)
  local file = assert(io.open(path, "rb"))
  local text = file:read("*a")
  file:close()
  return text
end

function H.buffer_text(bufnr)
  return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n") .. "\n"
end

function H.assert_equal(actual, expected, what)
  if actual ~= expected then
    error(("%s:\n--- expected\n%s\n--- actual\n%s"):format(what, tostring(expected), tostring(actual)), 2)
  end
end

--- Runs `body` and exits Neovim with its verdict.
function H.run(name, body)
  local ok, err = xpcall(body, debug.traceback)
  if ok then
    H.log(("PASS %s (Neovim %s)"):format(name, H.version()))
    vim.cmd("qall!")
  else
    H.log(("FAIL %s (Neovim %s): %s"):format(name, H.version(), tostring(err)))
    vim.cmd("cquit 1")
  end
end

function H.version()
  local v = vim.version()
  return ("%d.%d.%d"):format(v.major, v.minor, v.patch)
end

-- Copies the fixture crate into a fresh temporary directory.
local function copy_fixture()
  local root = vim.fn.tempname() .. "-trellis-nvim"
  local output = vim.fn.system({ "cp", "-R", env("TRELLIS_FIXTURE"), root })
  if vim.v.shell_error ~= 0 then
    error("copying the fixture failed: " .. output, 0)
  end
  return vim.fn.resolve(root)
end

--- Opens the fixture's `rel` (src/main.rs by default) with the plugin
--- attached to trellis: as the README's init.lua does on 0.8+ (runtimepath,
--- setup{}), through vim.lsp.start_client on 0.7. Returns
--- { root, file, bufnr, trellis, original }.
function H.open_fixture(rel)
  env("TRELLIS_BIN")
  vim.opt.runtimepath:append(env("TRELLIS_PLUGIN_DIR"))
  local trellis = require("trellis")
  local root = copy_fixture()
  local file = root .. "/" .. (rel or "src/main.rs")
  if vim.fn.has("nvim-0.8") == 1 then
    trellis.setup({})
    vim.cmd("edit " .. vim.fn.fnameescape(file))
  else
    trellis.configure({})
    trellis.create_commands()
    vim.cmd("edit " .. vim.fn.fnameescape(file))
    local client_id = vim.lsp.start_client(trellis.client_config(root))
    if not client_id then
      error("vim.lsp.start_client failed for " .. env("TRELLIS_BIN"), 0)
    end
    vim.lsp.buf_attach_client(vim.api.nvim_get_current_buf(), client_id)
  end
  local bufnr = vim.api.nvim_get_current_buf()
  H.wait("the trellis client to attach", function()
    return trellis.client(bufnr)
  end, 30000)
  return { root = root, file = file, bufnr = bufnr, trellis = trellis, original = H.read_file(file) }
end

--- The first trellis error diagnostic of the buffer, once published.
function H.wait_for_diagnostic(t)
  return H.wait("trellis diagnostics", function()
    for _, diagnostic in ipairs(t.trellis.diagnostics(t.bufnr)) do
      if diagnostic.source == "trellis" and type(diagnostic.data) == "table" and diagnostic.data.cluster ~= nil then
        return diagnostic
      end
    end
  end)
end

--- :Trellis repair on the diagnostic's line, then waits for the search to end.
function H.repair_until_verified(t, diagnostic)
  vim.api.nvim_win_set_cursor(0, { diagnostic.range.start.line + 1, 0 })
  local before = t.trellis.state.last_status
  vim.cmd("Trellis repair")
  local status = H.wait("the repair search to finish", function()
    local status = t.trellis.state.last_status
    if status and status ~= before and status.status ~= "running" then
      return status
    end
  end)
  if status.status ~= "hard_pass" then
    error(("the search ended with %s, not hard_pass: %s"):format(status.status, tostring(status.summary)), 2)
  end
  return status
end

--- :Trellis apply, then waits for its recorded outcome.
function H.apply(t)
  t.trellis.state.last_apply = nil
  vim.cmd("Trellis apply")
  return H.wait("the apply to finish", function()
    return t.trellis.state.last_apply
  end)
end

return H
