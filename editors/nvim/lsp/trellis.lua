-- The trellis language server for Neovim 0.11+ without the plugin:
--   vim.opt.runtimepath:append("/path/to/trellis/editors/nvim")
--   vim.lsp.enable("trellis")
-- Diagnostics, Repair / Preview / Apply code actions, progress. The server
-- sees clientInfo "Neovim" and never sends a window/showMessageRequest
-- (Neovim's default handler for it is a modal prompt); it reports the end
-- of a search with window/showMessage. require("trellis").setup{} adds the
-- :Trellis command and one-line status messages on top of this.
return {
  cmd = { "trellis", "lsp" },
  filetypes = { "rust", "python", "typescript" },
  root_markers = { "Cargo.toml", "pyproject.toml", "tsconfig.json", ".git" },
}
