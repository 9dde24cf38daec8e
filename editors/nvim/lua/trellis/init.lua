-- Trellis for Neovim: attaches `trellis lsp` beside each language's own server
-- and adds :TrellisRepair, :TrellisPreview, :TrellisApply and :TrellisStatus.
--
-- setup() needs Neovim 0.8+ (vim.lsp.config/enable on 0.11+, vim.lsp.start
-- from a FileType autocmd on 0.8-0.10). The action functions below only use
-- client requests and vim.lsp.util, so they also drive a client started by
-- hand with vim.lsp.start_client on 0.7 (see client_config()).

local M = {}

local SEARCH_STATUS = "trellis/searchStatus"
local BRANCH_FILE = "trellis/branchFile"
-- Statuses that end a search (`applied` comes later, after an Apply).
local TERMINAL = {
  failed = true,
  hard_pass = true,
  residuals_remain = true,
  no_eligible_candidate = true,
  bound_reached = true,
  cancelled = true,
  already_clean = true,
}

--- Defaults; setup{} merges the user's options over these.
M.defaults = {
  name = "trellis",
  cmd = { "trellis", "lsp" },
  filetypes = { "rust", "python", "typescript", "typescriptreact" },
  root_markers = { "Cargo.toml", "pyproject.toml", "package.json", ".git" },
  -- Passed to the server as initializationOptions (it overrides trellis.toml).
  init_options = nil,
  -- Extra or replacement handlers, merged over the plugin's.
  handlers = {},
  on_attach = nil,
  capabilities = nil,
  -- Called with every trellis/searchStatus payload.
  on_status = nil,
  -- Echo "verified repair ready" and the other search outcomes.
  notify = true,
}

M.config = vim.deepcopy(M.defaults)

--- What the server told us; read by the commands and by tests.
M.state = {
  -- Raw LSP diagnostics by buffer number, as published (server's encoding).
  diagnostics = {},
  -- Every trellis/searchStatus payload, oldest first, and the latest one.
  statuses = {},
  last_status = nil,
  -- Outcome of the last :TrellisApply: { status = "applied"|"refused"|"unchanged"|"not_offered", message = ... }.
  last_apply = nil,
}

local has = function(feature)
  return vim.fn.has(feature) == 1
end

local function notify(message, level)
  if M.config.notify then
    vim.notify("Trellis: " .. message, level or vim.log.levels.INFO)
  end
end

-- Client methods became colon calls in 0.11; the dot form is deprecated there.
local function request(client, method, params, handler, bufnr)
  if has("nvim-0.11") then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function list_clients()
  if vim.lsp.get_clients then
    return vim.lsp.get_clients()
  end
  return vim.lsp.get_active_clients()
end

--- The trellis client attached to `bufnr`, or nil.
function M.client(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  for _, client in pairs(list_clients()) do
    if client.name == M.config.name and vim.lsp.buf_is_attached(bufnr, client.id) then
      return client
    end
  end
  return nil
end

local function record_status(_, result, ctx)
  if type(result) ~= "table" or type(result.status) ~= "string" then
    return vim.NIL
  end
  -- The server names the repair only once the search has ended.
  if result.repair_id ~= nil and result.repair_id ~= vim.NIL then
    result.repair_id = tostring(result.repair_id)
  else
    result.repair_id = nil
  end
  result.client_id = ctx and ctx.client_id
  table.insert(M.state.statuses, result)
  M.state.last_status = result
  if M.config.on_status then
    M.config.on_status(result)
  end
  local summary = type(result.summary) == "string" and result.summary ~= "" and (": " .. result.summary) or ""
  if result.status == "hard_pass" then
    notify("verified repair ready" .. summary .. " (:TrellisPreview, :TrellisApply)")
  elseif result.status == "failed" then
    notify("search failed" .. summary, vim.log.levels.ERROR)
  elseif TERMINAL[result.status] then
    notify((result.status:gsub("_", " ")) .. summary)
  end
  return vim.NIL
end

local function record_diagnostics(err, result, ctx, config)
  if result and result.uri then
    -- Keyed by buffer: the server may spell a URI differently from Neovim.
    M.state.diagnostics[vim.uri_to_bufnr(result.uri)] = result.diagnostics or {}
  end
  return vim.lsp.handlers["textDocument/publishDiagnostics"](err, result, ctx, config)
end

--- The handlers the plugin installs on the trellis client.
function M.handlers()
  local handlers = {
    [SEARCH_STATUS] = record_status,
    ["textDocument/publishDiagnostics"] = record_diagnostics,
  }
  return vim.tbl_extend("force", handlers, M.config.handlers or {})
end

--- A config for vim.lsp.start / vim.lsp.start_client (0.7+), given a root directory.
function M.client_config(root_dir)
  return {
    name = M.config.name,
    cmd = M.config.cmd,
    root_dir = root_dir,
    workspace_folders = root_dir and { { uri = vim.uri_from_fname(root_dir), name = root_dir } } or nil,
    init_options = M.config.init_options,
    capabilities = M.config.capabilities,
    handlers = M.handlers(),
    on_attach = M.config.on_attach,
  }
end

--- Nearest ancestor directory of `bufnr`'s file holding a root marker.
function M.root_dir(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == "" then
    return nil
  end
  local found = vim.fs.find(M.config.root_markers, { upward = true, path = vim.fs.dirname(name) })[1]
  return found and vim.fs.dirname(found) or nil
end

-- ---------------------------------------------------------------------------
-- Code actions

local function trellis_diagnostics(bufnr, line)
  local found = {}
  for _, diagnostic in ipairs(M.state.diagnostics[bufnr] or {}) do
    local range = diagnostic.range
    if line == nil or (range.start.line <= line and line <= range["end"].line) then
      table.insert(found, diagnostic)
    end
  end
  return found
end

--- The trellis diagnostics published for `bufnr` (all, or those covering 0-based `line`).
M.diagnostics = trellis_diagnostics

local function line_range(bufnr, line)
  local last = vim.api.nvim_buf_line_count(bufnr)
  if line + 1 < last then
    return { start = { line = line, character = 0 }, ["end"] = { line = line + 1, character = 0 } }
  end
  local text = vim.api.nvim_buf_get_lines(bufnr, line, line + 1, false)[1] or ""
  -- Columns in UTF-16 units are never more than bytes, so #text is a safe end
  -- for any encoding: servers clamp a character past the end of the line.
  return { start = { line = line, character = 0 }, ["end"] = { line = line, character = #text } }
end

local function whole_buffer_range(bufnr)
  local last = vim.api.nvim_buf_line_count(bufnr) - 1
  local text = vim.api.nvim_buf_get_lines(bufnr, last, last + 1, false)[1] or ""
  return { start = { line = 0, character = 0 }, ["end"] = { line = last, character = #text } }
end

-- Asks for code actions on the cursor line; when none has the wanted title
-- there, asks again over the whole buffer (the actions of a cluster may sit on
-- its root line only). Calls back with (client, action) or (nil, message).
local function find_action(bufnr, title_prefix, callback)
  local client = M.client(bufnr)
  if not client then
    return callback(nil, "no trellis language server attached to this buffer")
  end
  local line = vim.api.nvim_win_get_cursor(0)[1] - 1
  if vim.api.nvim_get_current_buf() ~= bufnr then
    line = 0
  end
  local attempts = {
    { range = line_range(bufnr, line), diagnostics = trellis_diagnostics(bufnr, line) },
    { range = whole_buffer_range(bufnr), diagnostics = trellis_diagnostics(bufnr, nil) },
  }
  local function attempt(index)
    local scope = attempts[index]
    if scope == nil then
      return callback(nil, "no `" .. title_prefix .. "` action offered here")
    end
    local params = {
      textDocument = { uri = vim.uri_from_bufnr(bufnr) },
      range = scope.range,
      context = { diagnostics = scope.diagnostics },
    }
    request(client, "textDocument/codeAction", params, function(err, result)
      if err then
        return callback(nil, "code action request failed: " .. (err.message or vim.inspect(err)))
      end
      for _, action in ipairs(result or {}) do
        if type(action.title) == "string" and action.title:sub(1, #title_prefix) == title_prefix then
          return callback(client, action)
        end
      end
      attempt(index + 1)
    end, bufnr)
  end
  attempt(1)
end

local function execute_command(client, command, bufnr, callback)
  request(client, "workspace/executeCommand", {
    command = command.command,
    arguments = command.arguments,
  }, function(err, result)
    callback(err, result)
  end, bufnr)
end

-- The document version an edit was computed against, if it names one for bufnr.
local function edit_version(edit, bufnr)
  for _, change in ipairs(edit.documentChanges or {}) do
    if change.textDocument and vim.uri_to_bufnr(change.textDocument.uri) == bufnr then
      return change.textDocument.version
    end
  end
  return nil
end

-- Runs a code action the way the LSP spec says: resolve it when it arrives
-- without its edit, apply the edit, then execute its command. Calls back with
-- (err) where err is nil, or a message saying why nothing (more) was done.
local function run_action(client, action, bufnr, callback)
  -- A bare Command rather than a CodeAction.
  if type(action.command) == "string" then
    return execute_command(client, action, bufnr, function(err)
      callback(err and (err.message or vim.inspect(err)) or nil)
    end)
  end
  local provider = client.server_capabilities and client.server_capabilities.codeActionProvider
  local resolvable = type(provider) == "table" and provider.resolveProvider
  -- An action that arrives without its edit is resolved when it carries
  -- `data` for the server (or has nothing else to run); a plain command
  -- action runs as it is.
  local incomplete = action.edit == nil and (action.data ~= nil or action.command == nil)
  if incomplete and resolvable and not action._trellis_resolved then
    return request(client, "codeAction/resolve", action, function(err, resolved)
      if err then
        return callback("resolving the action failed: " .. (err.message or vim.inspect(err)))
      end
      resolved._trellis_resolved = true
      run_action(client, resolved, bufnr, callback)
    end, bufnr)
  end
  if action.edit then
    local version = edit_version(action.edit, bufnr)
    local current = vim.lsp.util.buf_versions[bufnr]
    if type(version) == "number" and type(current) == "number" and current > version then
      -- Neovim would skip this edit silently; say so instead.
      return callback(("the buffer changed since the repair was verified (version %d, edit for %d)"):format(current, version))
    end
    vim.lsp.util.apply_workspace_edit(action.edit, client.offset_encoding)
  end
  if type(action.command) == "table" then
    return execute_command(client, action.command, bufnr, function(err)
      callback(err and (err.message or vim.inspect(err)) or nil)
    end)
  end
  callback(nil)
end

-- ---------------------------------------------------------------------------
-- Commands

--- Starts a repair of the trellis diagnostic under the cursor: runs the
--- server's `Repair:` code action, or `trellis.repair.start` for the cluster.
function M.repair(opts)
  opts = opts or {}
  local bufnr = opts.bufnr or vim.api.nvim_get_current_buf()
  local done = opts.on_done or function() end
  find_action(bufnr, "Repair:", function(client, action)
    if client then
      return run_action(client, action, bufnr, function(err)
        if err then
          notify("repair failed to start: " .. err, vim.log.levels.ERROR)
        end
        done(err)
      end)
    end
    local line = vim.api.nvim_win_get_cursor(0)[1] - 1
    local diagnostic = trellis_diagnostics(bufnr, line)[1] or trellis_diagnostics(bufnr, nil)[1]
    client = M.client(bufnr)
    local cluster = diagnostic and type(diagnostic.data) == "table" and diagnostic.data.cluster
    if not (client and cluster) then
      notify(action, vim.log.levels.WARN)
      return done(action)
    end
    execute_command(client, { command = "trellis.repair.start", arguments = { { cluster = cluster } } }, bufnr, function(err)
      local message = err and (err.message or vim.inspect(err)) or nil
      if message then
        notify("repair failed to start: " .. message, vim.log.levels.ERROR)
      end
      done(message)
    end)
  end)
end

--- Applies the verified repair offered for this buffer. Records the outcome
--- in M.state.last_apply; a change the server or the version check refuses
--- leaves the buffer as the user left it.
function M.apply(opts)
  opts = opts or {}
  local bufnr = opts.bufnr or vim.api.nvim_get_current_buf()
  local done = opts.on_done or function() end
  local function finish(outcome)
    M.state.last_apply = outcome
    if outcome.status ~= "applied" then
      notify("apply " .. outcome.status .. ": " .. (outcome.message or ""), vim.log.levels.WARN)
    end
    done(outcome)
  end
  find_action(bufnr, "Apply verified repair", function(client, action)
    if not client then
      return finish({ status = "not_offered", message = action })
    end
    local before = vim.api.nvim_buf_get_changedtick(bufnr)
    run_action(client, action, bufnr, function(err)
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
  return M.state.last_status and M.state.last_status.repair_id
end

--- Opens the branch's version of this file beside it in diff mode. Falls back
--- to the server's own Preview command when the branch file is unavailable.
function M.preview(opts)
  opts = opts or {}
  local bufnr = opts.bufnr or vim.api.nvim_get_current_buf()
  local done = opts.on_done or function() end
  find_action(bufnr, "Preview verified repair", function(client, action)
    if not client then
      notify(action, vim.log.levels.WARN)
      return done(action)
    end
    local path = relative_path(client, bufnr)
    local repair_id = repair_id_of(action)
    local function fallback(reason)
      run_action(client, action, bufnr, function(err)
        done(err or reason)
      end)
    end
    if not (path and repair_id) then
      return fallback(nil)
    end
    request(client, BRANCH_FILE, { repair_id = repair_id, path = path }, function(err, result)
      if err or type(result) ~= "table" or type(result.text) ~= "string" then
        return fallback(nil)
      end
      local filetype = vim.bo[bufnr].filetype
      vim.api.nvim_set_current_buf(bufnr)
      vim.cmd("diffthis")
      vim.cmd("rightbelow vnew")
      local preview = vim.api.nvim_get_current_buf()
      local lines = vim.split(result.text, "\n", { plain = true })
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
      done(nil, preview)
    end, bufnr)
  end)
end

--- The last trellis/searchStatus as one line.
function M.status_line()
  local status = M.state.last_status
  if not status then
    return "Trellis: no repair started"
  end
  local subject = type(status.cluster_title) == "string" and status.cluster_title
    or (status.repair_id and ("repair " .. status.repair_id))
    or "search"
  local line = ("Trellis %s: %s"):format(subject, (status.status:gsub("_", " ")))
  if type(status.summary) == "string" and status.summary ~= "" then
    line = line .. " - " .. status.summary
  end
  return line
end

--- Defines :TrellisRepair, :TrellisPreview, :TrellisApply and :TrellisStatus.
function M.create_commands()
  local create = vim.api.nvim_create_user_command
  create("TrellisRepair", function()
    M.repair()
  end, { desc = "Trellis: repair the diagnostic under the cursor" })
  create("TrellisPreview", function()
    M.preview()
  end, { desc = "Trellis: diff the verified repair against this buffer" })
  create("TrellisApply", function()
    M.apply()
  end, { desc = "Trellis: apply the verified repair" })
  create("TrellisStatus", function()
    vim.api.nvim_echo({ { M.status_line() } }, false, {})
  end, { desc = "Trellis: show the last search status" })
end

local function show_progress()
  vim.api.nvim_create_autocmd("LspProgress", {
    group = vim.api.nvim_create_augroup("trellis.progress", { clear = true }),
    callback = function(event)
      local client = vim.lsp.get_client_by_id(event.data.client_id)
      local value = event.data.params and event.data.params.value
      if not (client and client.name == M.config.name and type(value) == "table") then
        return
      end
      local text = table.concat(vim.tbl_filter(function(part)
        return type(part) == "string" and part ~= ""
      end, { value.title, value.message }), ": ")
      if value.percentage then
        text = ("%s (%d%%)"):format(text, value.percentage)
      end
      if text:sub(1, #"Trellis") ~= "Trellis" then
        text = "Trellis: " .. text
      end
      vim.api.nvim_echo({ { text } }, false, {})
    end,
  })
end

--- Sets the options without starting anything (setup() calls it; on 0.7 use
--- it before vim.lsp.start_client(require("trellis").client_config(root))).
function M.configure(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
end

--- Configures and enables the trellis language server.
function M.setup(opts)
  M.configure(opts)
  if not has("nvim-0.8") then
    vim.notify(
      "trellis: setup() needs Neovim 0.8+; on older versions call configure() and start the "
        .. "server with vim.lsp.start_client(require('trellis').client_config(root))",
      vim.log.levels.ERROR
    )
    return
  end
  M.create_commands()
  if has("nvim-0.10") then
    show_progress()
  end

  if has("nvim-0.11") then
    local config = M.client_config(nil)
    config.root_dir = nil
    config.workspace_folders = nil
    config.filetypes = M.config.filetypes
    config.root_markers = M.config.root_markers
    vim.lsp.config(M.config.name, config)
    vim.lsp.enable(M.config.name)
    return
  end

  vim.api.nvim_create_autocmd("FileType", {
    group = vim.api.nvim_create_augroup("trellis.start", { clear = true }),
    pattern = M.config.filetypes,
    callback = function(event)
      local root = M.root_dir(event.buf)
      if root then
        vim.lsp.start(M.client_config(root), { bufnr = event.buf })
      end
    end,
  })
end

return M
