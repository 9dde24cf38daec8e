-- What the server told us, for the commands and for tests. Only the
-- handlers in status.lua and diagnostics.lua write here.

return {
  -- Raw LSP diagnostics by buffer number (Neovim before 0.10 only; newer
  -- versions read vim.diagnostic's user_data.lsp instead).
  diagnostics = {},
  -- Every trellis/searchStatus payload, oldest first, and the latest one.
  statuses = {},
  last_status = nil,
  -- The server's window/showMessage texts, oldest first (the screen shows
  -- them one line at a time; :Trellis status lists the last few).
  messages = {},
  -- Outcome of the last apply: { status = "applied"|"refused"|"unchanged"|"not_offered", message = ... }.
  last_apply = nil,
}
