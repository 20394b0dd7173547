; Folding: blocks, lists, parameter and argument lists, tests and block comments.
[
  (block)
  (field_list)
  (parameters)
  (arguments)
  (list)
  (test_declaration)
  (block_comment)
] @fold
