-- What setup() registers, without a server: the LSP configuration (0.11+) or
-- the FileType autocmd (0.8-0.10), :Trellis with its completion and the old
-- aliases, the capability telling the server the plugin announces searches,
-- and status rendering from a trellis/searchStatus payload. On 0.7, setup()
-- must refuse and define nothing.

local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)")
local H = dofile(here .. "helpers.lua")

H.run("setup", function()
  vim.opt.runtimepath:append(os.getenv("TRELLIS_PLUGIN_DIR"))
  local trellis = require("trellis")
  local commands = { "Trellis", "TrellisRepair", "TrellisPreview", "TrellisApply", "TrellisCancel", "TrellisStatus" }

  if vim.fn.has("nvim-0.8") == 0 then
    local errors = {}
    vim.notify = function(message, level)
      if level == vim.log.levels.ERROR then
        table.insert(errors, message)
      end
    end
    trellis.setup({})
    assert(#errors == 1 and errors[1]:find("0.8", 1, true), "setup() on 0.7 reports that it needs 0.8+")
    for _, name in ipairs(commands) do
      assert(vim.fn.exists(":" .. name) == 0, name .. " is not defined on 0.7")
    end
    return
  end

  trellis.setup({ cmd = { "/opt/trellis/bin/trellis", "lsp", "--verbose" }, notify = false })
  for _, name in ipairs(commands) do
    assert(vim.fn.exists(":" .. name) == 2, name .. " is defined")
  end
  H.assert_equal(
    table.concat(vim.fn.getcompletion("Trellis ", "cmdline"), " "),
    "repair preview apply cancel status",
    ":Trellis completion"
  )
  H.assert_equal(table.concat(vim.fn.getcompletion("Trellis c", "cmdline"), " "), "cancel", ":Trellis c completion")
  local capabilities = trellis.client_config(nil).capabilities
  assert(capabilities.experimental.trellis.announcesSearchStatus == true, vim.inspect(capabilities.experimental))
  assert(capabilities.textDocument.codeAction, "Neovim's own capabilities are kept")

  if vim.fn.has("nvim-0.11") == 1 then
    local config = vim.lsp.config.trellis
    assert(vim.deep_equal(config.cmd, { "/opt/trellis/bin/trellis", "lsp", "--verbose" }), vim.inspect(config.cmd))
    assert(vim.deep_equal(config.filetypes, { "rust", "python", "typescript" }), vim.inspect(config.filetypes))
    assert(vim.deep_equal(config.root_markers, { "Cargo.toml", "pyproject.toml", "tsconfig.json", ".git" }))
    assert(config.handlers["trellis/searchStatus"], "the searchStatus handler is installed")
    assert(config.handlers["window/showMessage"], "server messages are shown in one line")
    assert(config.handlers["window/showMessageRequest"] == nil, "Neovim's own prompt handler is left alone")
  else
    local autocmds = vim.api.nvim_get_autocmds({ group = "trellis.start", event = "FileType" })
    assert(#autocmds == 1, "one FileType autocmd starts trellis")
  end

  -- Root detection walks up to the nearest marker.
  local root = vim.fn.tempname()
  vim.fn.mkdir(root .. "/src/deep", "p")
  vim.fn.writefile({ "[package]" }, root .. "/Cargo.toml")
  vim.cmd("edit " .. root .. "/src/deep/lib.rs")
  H.assert_equal(trellis.root_dir(0), vim.fn.resolve(root), "the root directory")

  -- Status rendering from a notification payload.
  H.assert_equal(trellis.status_line(), "Trellis: no repair started", "status before any repair")
  local handler = trellis.handlers()["trellis/searchStatus"]
  handler(nil, { repair_id = vim.NIL, cluster = "c1", cluster_title = "E0384 in src/main.rs", status = "running" }, {})
  H.assert_equal(trellis.status_line(), "Trellis E0384 in src/main.rs: running", "status of a running search")
  handler(nil, { repair_id = 7, status = "residuals_remain", summary = "2 of 3 clusters fixed" }, { client_id = 1 })
  H.assert_equal(
    trellis.status_line(),
    "Trellis repair 7: residuals remain - 2 of 3 clusters fixed",
    "status after the search ended"
  )
  handler(nil, { repair_id = 8 }, { client_id = 1 })
  H.assert_equal(trellis.state.last_status.repair_id, "7", "a payload without a status is ignored")
  H.assert_equal(#trellis.state.statuses, 2, "both statuses are kept")
end)
