-- Code actions of the trellis client: finding one by title near the cursor
-- and running it as the LSP spec says (resolve, apply the edit, execute the
-- command). Uses client requests and vim.lsp.util only, so it also drives a
-- client started by hand on 0.7. Never decides anything: the server offers.

local compat = require("trellis.compat")
local config = require("trellis.config")
local diagnostics = require("trellis.diagnostics")

local M = {}

--- The trellis client attached to `bufnr`, or nil.
function M.client(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  for _, client in pairs(compat.clients()) do
    if client.name == config.current.name and vim.lsp.buf_is_attached(bufnr, client.id) then
      return client
    end
  end
  return nil
end

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

--- Asks for code actions on the cursor line; when none has the wanted title
--- there, asks again over the whole buffer (the actions of a cluster may sit
--- on its root line only). Calls back with (client, action) or (nil, message).
function M.find(bufnr, title_prefix, callback)
  local client = M.client(bufnr)
  if not client then
    return callback(nil, "no trellis language server attached to this buffer")
  end
  local line = vim.api.nvim_win_get_cursor(0)[1] - 1
  if vim.api.nvim_get_current_buf() ~= bufnr then
    line = 0
  end
  local attempts = {
    { range = line_range(bufnr, line), diagnostics = diagnostics.get(bufnr, client, line) },
    { range = whole_buffer_range(bufnr), diagnostics = diagnostics.get(bufnr, client, nil) },
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
    compat.request(client, "textDocument/codeAction", params, function(err, result)
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

--- workspace/executeCommand; calls back with an error message or nil.
function M.execute(client, command, bufnr, callback)
  compat.request(client, "workspace/executeCommand", {
    command = command.command,
    arguments = command.arguments,
  }, function(err)
    callback(err and (err.message or vim.inspect(err)) or nil)
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

--- Runs a code action: resolves it when it arrives without its edit, applies
--- the edit, then executes its command. Calls back with nil, or a message
--- saying why nothing (more) was done.
function M.run(client, action, bufnr, callback)
  -- A bare Command rather than a CodeAction.
  if type(action.command) == "string" then
    return M.execute(client, action, bufnr, callback)
  end
  local provider = client.server_capabilities and client.server_capabilities.codeActionProvider
  local resolvable = type(provider) == "table" and provider.resolveProvider
  -- An action that arrives without its edit is resolved when it carries
  -- `data` for the server (or has nothing else to run); a plain command
  -- action runs as it is.
  local incomplete = action.edit == nil and (action.data ~= nil or action.command == nil)
  if incomplete and resolvable and not action._trellis_resolved then
    return compat.request(client, "codeAction/resolve", action, function(err, resolved)
      if err then
        return callback("resolving the action failed: " .. (err.message or vim.inspect(err)))
      end
      resolved._trellis_resolved = true
      M.run(client, resolved, bufnr, callback)
    end, bufnr)
  end
  if action.edit then
    local version = edit_version(action.edit, bufnr)
    local current = vim.lsp.util.buf_versions[bufnr]
    if type(version) == "number" and type(current) == "number" and current > version then
      -- Neovim would skip this edit silently; say so instead.
      return callback(
        ("the buffer changed since the repair was verified (version %d, edit for %d)"):format(current, version)
      )
    end
    vim.lsp.util.apply_workspace_edit(action.edit, client.offset_encoding)
  end
  if type(action.command) == "table" then
    return M.execute(client, action.command, bufnr, callback)
  end
  callback(nil)
end

return M
