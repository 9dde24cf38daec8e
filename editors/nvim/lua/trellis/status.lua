-- The server's notifications to the user: trellis/searchStatus (recorded,
-- announced in one line, rendered by status_line()) and window/showMessage
-- for the trellis client. Because the plugin announces searches itself it
-- tells the server so (capabilities.experimental.trellis), and the server
-- then sends no message of its own and never a window/showMessageRequest.
-- Never prompts or waits.

local config = require("trellis.config")
local notify = require("trellis.notify")
local state = require("trellis.state")

local M = {}

-- The method, its states and the capability below are Trellis extensions,
-- documented in docs/lsp-extensions.md.
M.METHOD = "trellis/searchStatus"

-- Statuses that end a search (`applied` comes later, after an Apply).
M.TERMINAL = {
  failed = true,
  hard_pass = true,
  residuals_remain = true,
  no_eligible_candidate = true,
  bound_reached = true,
  cancelled = true,
  already_clean = true,
}

--- The client capabilities the plugin adds to Neovim's own.
M.capabilities = { experimental = { trellis = { announcesSearchStatus = true } } }

-- Kept for :Trellis status.
local KEPT_MESSAGES = 20

local function summary_of(status)
  return type(status.summary) == "string" and status.summary ~= "" and status.summary or nil
end

--- Handler for trellis/searchStatus.
function M.on_status(_, result, ctx)
  if type(result) ~= "table" or type(result.status) ~= "string" then
    return vim.NIL
  end
  -- The server names the repair only once the search has ended.
  if result.repair_id ~= nil and result.repair_id ~= vim.NIL then
    result.repair_id = tostring(result.repair_id)
  else
    result.repair_id = nil
  end
  result.client_id = ctx and ctx.client_id
  table.insert(state.statuses, result)
  state.last_status = result
  if config.current.on_status then
    config.current.on_status(result)
  end
  local summary = summary_of(result)
  local suffix = summary and (": " .. summary) or ""
  if result.status == "hard_pass" then
    notify.show("Trellis: verified repair ready (:Trellis apply, :Trellis preview)" .. suffix)
  elseif result.status == "failed" then
    notify.show("Trellis: search failed" .. suffix, vim.log.levels.ERROR)
  elseif M.TERMINAL[result.status] then
    notify.show("Trellis: " .. (result.status:gsub("_", " ")) .. suffix)
  end
  return vim.NIL
end

local LEVELS = { vim.log.levels.ERROR, vim.log.levels.WARN, vim.log.levels.INFO, vim.log.levels.DEBUG }

--- Handler for window/showMessage from the trellis server: one line, kept
--- whole in state.messages.
function M.on_message(_, result)
  if type(result) ~= "table" or type(result.message) ~= "string" then
    return vim.NIL
  end
  table.insert(state.messages, result.message)
  if #state.messages > KEPT_MESSAGES then
    table.remove(state.messages, 1)
  end
  notify.show(result.message, LEVELS[result.type])
  return vim.NIL
end

--- The last trellis/searchStatus as one line.
function M.line()
  local status = state.last_status
  if not status then
    return "Trellis: no repair started"
  end
  local subject = type(status.cluster_title) == "string" and status.cluster_title
    or (status.repair_id and ("repair " .. status.repair_id))
    or "search"
  local line = ("Trellis %s: %s"):format(subject, (status.status:gsub("_", " ")))
  local summary = summary_of(status)
  if summary then
    line = line .. " - " .. summary
  end
  return line
end

--- Work-done progress of the trellis client in the message line (0.10+).
function M.show_progress()
  vim.api.nvim_create_autocmd("LspProgress", {
    group = vim.api.nvim_create_augroup("trellis.progress", { clear = true }),
    callback = function(event)
      local client = vim.lsp.get_client_by_id(event.data.client_id)
      local value = event.data.params and event.data.params.value
      if not (client and client.name == config.current.name and type(value) == "table") then
        return
      end
      local text = table.concat(vim.tbl_filter(function(part)
        return type(part) == "string" and part ~= ""
      end, { value.title, value.message }), ": ")
      if value.percentage then
        text = ("%s (%d%%)"):format(text, value.percentage)
      end
      if text:sub(1, #"Trellis") ~= "Trellis" then
        text = "Trellis: " .. text
      end
      notify.show(text)
    end,
  })
end

return M
