-- Messages that never take the keyboard. A message longer than the command
-- line, or two messages before a redraw, make Neovim stop at a "Press ENTER"
-- prompt that eats the next key the user types; so every message here is
-- one line cut to fit, drawn after a redraw, and the full text is kept in
-- state.messages. Must never prompt, block or wait.

local config = require("trellis.config")

local M = {}

local HIGHLIGHT = {
  [vim.log.levels.ERROR] = "ErrorMsg",
  [vim.log.levels.WARN] = "WarningMsg",
}

--- `text` as one line of at most `width` display cells.
function M.fit(text, width)
  local line = tostring(text):gsub("%s*\n%s*", " ")
  if width < 2 then
    return ""
  end
  if vim.fn.strdisplaywidth(line) <= width then
    return line
  end
  local cut = line
  while vim.fn.strdisplaywidth(cut) > width - 1 do
    cut = vim.fn.strcharpart(cut, 0, vim.fn.strchars(cut) - 1)
  end
  return cut .. "…"
end

local pending = nil

--- Shows `text` on the message line when Neovim is next idle; a newer
--- message replaces one not yet shown.
function M.show(text, level)
  if not config.current.notify then
    return
  end
  local first = pending == nil
  pending = { text = text, level = level }
  if not first then
    return
  end
  vim.schedule(function()
    local message = pending
    pending = nil
    -- The last column would scroll the message line.
    local width = math.max(vim.v.echospace or 0, 1) - 1
    vim.cmd("redraw")
    vim.api.nvim_echo({ { M.fit(message.text, width), HIGHLIGHT[message.level] } }, false, {})
  end)
end

return M
