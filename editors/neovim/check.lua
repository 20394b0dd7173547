-- Run by try-docs.sh in a headless Neovim that has a .jadpo file open: checks that the
-- setup of docs/editors.md gives the file its filetype, tree-sitter highlighting and
-- folds, and `jadpoc lsp` attached with the project as its root. Exits 1 on a failure.
local failures = {}
local function expect(ok, what)
  print((ok and 'ok     ' or 'FAILED ') .. what)
  if not ok then table.insert(failures, what) end
end

local buf = vim.api.nvim_get_current_buf()
expect(vim.bo.filetype == 'jadpo', 'the filetype is jadpo')
expect(vim.bo.commentstring == '// %s', 'comments are //')
local ok, parser = pcall(vim.treesitter.get_parser, buf, 'jadpo')
expect(ok, 'the jadpo parser loads')
if ok then
  expect(not parser:parse()[1]:root():has_error(), 'the file parses without an error')
end
expect(vim.treesitter.highlighter.active[buf] ~= nil, 'tree-sitter highlighting is on')
-- Line 1 of the file is `event Paid {`.
local captures = vim.tbl_map(function(c) return c.capture end, vim.treesitter.get_captures_at_pos(buf, 0, 0))
expect(vim.tbl_contains(captures, 'keyword'), '`event` is a keyword (' .. table.concat(captures, ',') .. ')')
captures = vim.tbl_map(function(c) return c.capture end, vim.treesitter.get_captures_at_pos(buf, 0, 6))
expect(vim.tbl_contains(captures, 'type'), 'the event name is a type (' .. table.concat(captures, ',') .. ')')

local attached = vim.wait(10000, function() return #vim.diagnostic.get(buf) > 0 end, 20)
local clients = vim.lsp.get_clients({ bufnr = buf })
local client = clients[1]
expect(#clients == 1 and client.name == 'jadpo', 'one client, jadpo, is attached')
if client then
  expect(vim.deep_equal(client.config.cmd, { 'jadpoc', 'lsp' }), 'it runs `jadpoc lsp`')
  expect(client.root_dir == vim.g.jadpo_project, 'its root is the project (' .. tostring(client.root_dir) .. ')')
end
expect(attached, "the server's diagnostics are shown")

if #failures > 0 then
  vim.cmd('cquit 1')
else
  vim.cmd('qall!')
end
