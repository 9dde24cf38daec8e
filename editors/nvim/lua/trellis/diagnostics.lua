-- The trellis diagnostics of a buffer, as the server published them (LSP
-- ranges in the server's encoding, `data.cluster`). From 0.10 on they are
-- read from vim.diagnostic (user_data.lsp); before that the plugin keeps a
-- copy from its publishDiagnostics handler. Owns nothing else.

local compat = require("trellis.compat")
local state = require("trellis.state")

local M = {}

--- Handler for textDocument/publishDiagnostics on the trellis client.
function M.on_publish(err, result, ctx, handler_config)
  if not compat.diagnostics_keep_lsp() and result and result.uri then
    -- Keyed by buffer: the server may spell a URI differently from Neovim.
    state.diagnostics[vim.uri_to_bufnr(result.uri)] = result.diagnostics or {}
  end
  return vim.lsp.handlers["textDocument/publishDiagnostics"](err, result, ctx, handler_config)
end

local function published(bufnr, client)
  if not compat.diagnostics_keep_lsp() then
    return state.diagnostics[bufnr] or {}
  end
  if not client then
    return {}
  end
  local namespace = vim.lsp.diagnostic.get_namespace(client.id)
  local found = {}
  for _, diagnostic in ipairs(vim.diagnostic.get(bufnr, { namespace = namespace })) do
    local lsp = diagnostic.user_data and diagnostic.user_data.lsp
    if type(lsp) == "table" and lsp.range then
      table.insert(found, lsp)
    end
  end
  return found
end

--- The trellis diagnostics of `bufnr` from `client` (all, or those covering
--- 0-based `line`).
function M.get(bufnr, client, line)
  local found = {}
  for _, diagnostic in ipairs(published(bufnr, client)) do
    local range = diagnostic.range
    if line == nil or (range.start.line <= line and line <= range["end"].line) then
      table.insert(found, diagnostic)
    end
  end
  return found
end

return M
