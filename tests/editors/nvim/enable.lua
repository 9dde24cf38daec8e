-- Neovim 0.11+ without the plugin: the runtimepath line and
-- vim.lsp.enable("trellis") (editors/nvim/lsp/trellis.lua) attach `trellis
-- lsp` from PATH to a Rust file at its Cargo root, and its diagnostics arrive
-- through vim.diagnostic. No plugin module is loaded.

local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)")
local H = dofile(here .. "helpers.lua")

H.run("enable", function()
  if vim.fn.has("nvim-0.11") == 0 then
    return H.log("SKIP vim.lsp.enable needs Neovim 0.11+")
  end
  vim.opt.runtimepath:append(os.getenv("TRELLIS_PLUGIN_DIR"))
  vim.lsp.enable("trellis")
  local root = vim.fn.tempname() .. "-trellis-enable"
  vim.fn.system({ "cp", "-R", os.getenv("TRELLIS_FIXTURE"), root })
  root = vim.fn.resolve(root)
  vim.cmd("edit " .. vim.fn.fnameescape(root .. "/src/main.rs"))
  local bufnr = vim.api.nvim_get_current_buf()
  H.assert_equal(vim.bo[bufnr].filetype, "rust", "the file's filetype")
  local client = H.wait("trellis to attach", function()
    return vim.lsp.get_clients({ bufnr = bufnr, name = "trellis" })[1]
  end, 30000)
  H.assert_equal(client.config.root_dir, root, "the client's root")
  H.wait("a trellis diagnostic", function()
    for _, diagnostic in ipairs(vim.diagnostic.get(bufnr)) do
      if diagnostic.source == "trellis" then
        return diagnostic
      end
    end
  end)
  assert(package.loaded["trellis"] == nil, "the plugin was not loaded")
end)
