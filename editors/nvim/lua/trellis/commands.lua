-- The user's verbs: repair, preview, apply, cancel, status, each a function
-- taking { bufnr?, on_done? }, and the :Trellis command (with completion)
-- that dispatches to them, plus the older :TrellisRepair-style aliases.
-- Reports through notify.lua only: nothing here prompts.

local actions = require("trellis.actions")
local compat = require("trellis.compat")
local diagnostics = require("trellis.diagnostics")
local notify = require("trellis.notify")
local state = require("trellis.state")
local status = require("trellis.status")

local M = {}

-- trellis/branchFile and the trellis.repair.* commands: docs/lsp-extensions.md.
local BRANCH_FILE = "trellis/branchFile"

local function target(opts)
  opts = opts or {}
  return opts.bufnr or vim.api.nvim_get_current_buf(), opts.on_done or function() end
end

--- Starts a repair of the trellis diagnostic under the cursor: runs the
--- server's `Repair:` code action, or `trellis.repair.start` for the cluster.
function M.repair(opts)
  local bufnr, done = target(opts)
  actions.find(bufnr, "Repair:", function(client, action)
    local function started(err)
      if err then
        notify.show("Trellis: repair failed to start: " .. err, vim.log.levels.ERROR)
      end
      done(err)
    end
    if client then
      return actions.run(client, action, bufnr, started)
    end
    client = actions.client(bufnr)
    local line = vim.api.nvim_win_get_cursor(0)[1] - 1
    local diagnostic = diagnostics.get(bufnr, client, line)[1] or diagnostics.get(bufnr, client, nil)[1]
    local cluster = diagnostic and type(diagnostic.data) == "table" and diagnostic.data.cluster
    if not (client and cluster) then
      notify.show("Trellis: " .. action, vim.log.levels.WARN)
      return done(action)
    end
    actions.execute(client, { command = "trellis.repair.start", arguments = { { cluster = cluster } } }, bufnr, started)
  end)
end

--- Cancels the running repair of the cluster under the cursor, or every
--- running repair when none is offered here.
function M.cancel(opts)
  local bufnr, done = target(opts)
  actions.find(bufnr, "Cancel repair:", function(client, action)
    if client then
      return actions.run(client, action, bufnr, done)
    end
    client = actions.client(bufnr)
    if not client then
      notify.show("Trellis: " .. action, vim.log.levels.WARN)
      return done(action)
    end
    actions.execute(client, { command = "trellis.repair.cancel", arguments = {} }, bufnr, done)
  end)
end

--- Applies the verified repair offered for this buffer. Records the outcome
--- in state.last_apply; a change the server or the version check refuses
--- leaves the buffer as the user left it.
function M.apply(opts)
  local bufnr, done = target(opts)
  local function finish(outcome)
    state.last_apply = outcome
    if outcome.status ~= "applied" then
      notify.show("Trellis: apply " .. outcome.status .. ": " .. (outcome.message or ""), vim.log.levels.WARN)
    end
    done(outcome)
  end
  actions.find(bufnr, "Apply verified repair", function(client, action)
    if not client then
      return finish({ status = "not_offered", message = action })
    end
    local before = vim.api.nvim_buf_get_changedtick(bufnr)
    actions.run(client, action, bufnr, function(err)
      if err then
        return finish({ status = "refused", message = err })
      end
      -- Neovim before 0.12 may report an edit as applied that it skipped, so
      -- the buffer itself is the evidence that the edit landed.
      local changed = vim.api.nvim_buf_get_changedtick(bufnr) ~= before
      finish({ status = changed and "applied" or "unchanged", message = action.title })
    end)
  end)
end

local function relative_path(client, bufnr)
  local root = client.config and client.config.root_dir
  local name = vim.api.nvim_buf_get_name(bufnr)
  if not root or name:sub(1, #root + 1) ~= root .. "/" then
    return nil
  end
  return name:sub(#root + 2)
end

local function repair_id_of(action)
  local command = type(action.command) == "table" and action.command or action
  local argument = type(command.arguments) == "table" and command.arguments[1]
  if type(argument) == "table" and argument.repair_id ~= nil then
    return tostring(argument.repair_id)
  end
  return state.last_status and state.last_status.repair_id
end

local function open_diff(bufnr, repair_id, path, text)
  local filetype = vim.bo[bufnr].filetype
  vim.api.nvim_set_current_buf(bufnr)
  vim.cmd("diffthis")
  vim.cmd("rightbelow vnew")
  local preview = vim.api.nvim_get_current_buf()
  local lines = vim.split(text, "\n", { plain = true })
  if lines[#lines] == "" then
    table.remove(lines)
  end
  vim.api.nvim_buf_set_lines(preview, 0, -1, false, lines)
  vim.bo[preview].buftype = "nofile"
  vim.bo[preview].bufhidden = "wipe"
  vim.bo[preview].modifiable = false
  vim.bo[preview].filetype = filetype
  pcall(vim.api.nvim_buf_set_name, preview, ("trellis://%s/%s"):format(repair_id, path))
  vim.cmd("diffthis")
  return preview
end

--- Opens the branch's version of this file beside it in diff mode. Falls back
--- to the server's own Preview command when the branch file is unavailable.
function M.preview(opts)
  local bufnr, done = target(opts)
  actions.find(bufnr, "Preview verified repair", function(client, action)
    if not client then
      notify.show("Trellis: " .. action, vim.log.levels.WARN)
      return done(action)
    end
    local path = relative_path(client, bufnr)
    local repair_id = repair_id_of(action)
    local function fallback()
      actions.run(client, action, bufnr, function(err)
        done(err)
      end)
    end
    if not (path and repair_id) then
      return fallback()
    end
    compat.request(client, BRANCH_FILE, { repair_id = repair_id, path = path }, function(err, result)
      if err or type(result) ~= "table" or type(result.text) ~= "string" then
        return fallback()
      end
      done(nil, open_diff(bufnr, repair_id, path, result.text))
    end, bufnr)
  end)
end

--- Echoes the last search status in one line (the server's messages are
--- in require("trellis").state.messages).
function M.status()
  local width = math.max(vim.v.echospace or 0, 2) - 1
  vim.api.nvim_echo({ { notify.fit(status.line(), width) } }, false, {})
end

M.SUBCOMMANDS = { "repair", "preview", "apply", "cancel", "status" }

-- The commands of earlier versions, kept as aliases.
local ALIASES = {
  TrellisRepair = "repair",
  TrellisPreview = "preview",
  TrellisApply = "apply",
  TrellisCancel = "cancel",
  TrellisStatus = "status",
}

--- Completion for :Trellis.
function M.complete(lead)
  return vim.tbl_filter(function(name)
    return name:sub(1, #lead) == lead
  end, M.SUBCOMMANDS)
end

function M.dispatch(name)
  if not vim.tbl_contains(M.SUBCOMMANDS, name) then
    vim.api.nvim_echo({
      { ("Trellis: unknown subcommand `%s`; use one of: %s"):format(name, table.concat(M.SUBCOMMANDS, ", ")), "ErrorMsg" },
    }, true, {})
    return
  end
  M[name]()
end

--- Defines :Trellis {repair|preview|apply|cancel|status} and the aliases.
function M.create()
  local create = vim.api.nvim_create_user_command
  create("Trellis", function(command)
    M.dispatch(command.fargs[1] or "status")
  end, {
    nargs = "?",
    complete = M.complete,
    desc = "Trellis: repair, preview, apply, cancel or status",
  })
  for alias, name in pairs(ALIASES) do
    create(alias, function()
      M.dispatch(name)
    end, { desc = "Trellis: " .. name .. " (alias of :Trellis " .. name .. ")" })
  end
end

return M
