-- Differences between Neovim versions, in one place: everything else calls
-- these instead of testing vim.fn.has() itself. Supports 0.7 and newer.

local M = {}

function M.has(feature)
  return vim.fn.has(feature) == 1
end

-- Client methods became colon calls in 0.11; the dot form is deprecated there.
function M.request(client, method, params, handler, bufnr)
  if M.has("nvim-0.11") then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

function M.clients()
  if vim.lsp.get_clients then
    return vim.lsp.get_clients()
  end
  return vim.lsp.get_active_clients()
end

--- vim.diagnostic keeps the LSP diagnostic in user_data.lsp (whole, with
--- its range and data) from 0.10 on; older versions get a private copy.
function M.diagnostics_keep_lsp()
  return M.has("nvim-0.10")
end

return M
