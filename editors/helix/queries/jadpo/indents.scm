; Indentation in Helix: one level inside every bracketed construct.
[
  (block)
  (field_list)
  (parameters)
  (arguments)
  (list)
  (test_declaration)
] @indent

[
  "}"
  "]"
  ")"
] @outdent
