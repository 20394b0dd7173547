; Folding: blocks, lists, parameter and argument lists, a condition's parentheses,
; tests and block comments.
[
  (block)
  (field_list)
  (parameters)
  (arguments)
  (list)
  (parenthesized_condition)
  (test_declaration)
  (block_comment)
] @fold
