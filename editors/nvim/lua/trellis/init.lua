-- Trellis for Neovim: attaches `trellis lsp` beside each language's own
-- server and adds :Trellis {repair|preview|apply|cancel|status}.
--
-- This file is the public surface and the wiring; each part lives in its
-- own module: config (options), status (searchStatus, messages, progress),
-- notify (one-line messages that never prompt), diagnostics, actions (code
-- actions), commands (the verbs and :Trellis), health (:checkhealth).
--
-- setup() needs Neovim 0.8+ (vim.lsp.config/enable on 0.11+, vim.lsp.start
-- from a FileType autocmd on 0.8-0.10). The verbs only use client requests
-- and vim.lsp.util, so they also drive a client started by hand with
-- vim.lsp.start_client on 0.7 (see client_config()).

local actions = require("trellis.actions")
local commands = require("trellis.commands")
local compat = require("trellis.compat")
local config = require("trellis.config")
local diagnostics = require("trellis.diagnostics")
local status = require("trellis.status")

local M = {}

M.defaults = config.defaults
--- What the server told us; read by the commands and by tests.
M.state = require("trellis.state")

M.client = actions.client
M.repair = commands.repair
M.preview = commands.preview
M.apply = commands.apply
M.cancel = commands.cancel
M.status_line = status.line
M.create_commands = commands.create

--- The trellis diagnostics published for `bufnr` (all, or those covering 0-based `line`).
function M.diagnostics(bufnr, line)
  return diagnostics.get(bufnr, actions.client(bufnr), line)
end

--- The handlers the plugin installs on the trellis client.
function M.handlers()
  local handlers = {
    [status.METHOD] = status.on_status,
    ["window/showMessage"] = status.on_message,
    ["textDocument/publishDiagnostics"] = diagnostics.on_publish,
  }
  return vim.tbl_extend("force", handlers, config.current.handlers or {})
end

--- Neovim's client capabilities, plus the plugin's (it announces searches
--- itself), plus the user's.
function M.capabilities()
  return vim.tbl_deep_extend(
    "force",
    vim.lsp.protocol.make_client_capabilities(),
    status.capabilities,
    config.current.capabilities or {}
  )
end

--- A config for vim.lsp.start / vim.lsp.start_client (0.7+), given a root directory.
function M.client_config(root_dir)
  return {
    name = config.current.name,
    cmd = config.current.cmd,
    root_dir = root_dir,
    workspace_folders = root_dir and { { uri = vim.uri_from_fname(root_dir), name = root_dir } } or nil,
    init_options = config.current.init_options,
    capabilities = M.capabilities(),
    handlers = M.handlers(),
    on_attach = config.current.on_attach,
  }
end

--- Nearest ancestor directory of `bufnr`'s file holding a root marker.
function M.root_dir(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == "" then
    return nil
  end
  local found = vim.fs.find(config.current.root_markers, { upward = true, path = vim.fs.dirname(name) })[1]
  return found and vim.fs.dirname(found) or nil
end

--- Sets the options without starting anything (setup() calls it; on 0.7 use
--- it before vim.lsp.start_client(require("trellis").client_config(root))).
function M.configure(opts)
  M.config = config.set(opts)
end

M.config = config.current

--- Configures and enables the trellis language server.
function M.setup(opts)
  M.configure(opts)
  if not compat.has("nvim-0.8") then
    vim.notify(
      "trellis: setup() needs Neovim 0.8+; on older versions call configure() and start the "
        .. "server with vim.lsp.start_client(require('trellis').client_config(root))",
      vim.log.levels.ERROR
    )
    return
  end
  commands.create()
  if compat.has("nvim-0.10") then
    status.show_progress()
  end

  if compat.has("nvim-0.11") then
    -- Merged over lsp/trellis.lua from the runtimepath.
    local client = M.client_config(nil)
    client.root_dir = nil
    client.workspace_folders = nil
    client.filetypes = config.current.filetypes
    client.root_markers = config.current.root_markers
    vim.lsp.config(config.current.name, client)
    vim.lsp.enable(config.current.name)
    return
  end

  vim.api.nvim_create_autocmd("FileType", {
    group = vim.api.nvim_create_augroup("trellis.start", { clear = true }),
    pattern = config.current.filetypes,
    callback = function(event)
      local root = M.root_dir(event.buf)
      if root then
        vim.lsp.start(M.client_config(root), { bufnr = event.buf })
      end
    end,
  })
end

return M
