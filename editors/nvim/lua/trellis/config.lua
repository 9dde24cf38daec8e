-- The plugin's options: the defaults and the user's, merged by setup().
-- Owns nothing else; every module reads M.current.

local M = {}

--- Defaults; setup{} merges the user's options over these.
M.defaults = {
  name = "trellis",
  cmd = { "trellis", "lsp" },
  -- Languages with a trellis sensor (see sensors.lua); others get nothing.
  filetypes = { "rust", "python", "typescript" },
  root_markers = { "Cargo.toml", "pyproject.toml", "tsconfig.json", ".git" },
  -- Passed to the server as initializationOptions (it overrides trellis.toml).
  init_options = nil,
  -- Extra or replacement handlers, merged over the plugin's.
  handlers = {},
  on_attach = nil,
  -- Merged over Neovim's own client capabilities and the plugin's.
  capabilities = nil,
  -- Called with every trellis/searchStatus payload.
  on_status = nil,
  -- One-line messages for the end of a search and the server's messages.
  notify = true,
}

M.current = vim.deepcopy(M.defaults)

function M.set(opts)
  M.current = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  return M.current
end

return M
