; Indentation in Helix: one level inside every bracketed construct.
[
  (block)
  (field_list)
  (parameters)
  (arguments)
  (list)
  (parenthesized_condition)
  (test_declaration)
] @indent

[
  "}"
  "]"
  ")"
] @outdent
