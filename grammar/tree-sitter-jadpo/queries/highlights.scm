; Highlighting for jadpo.
;
; No two patterns give one node different captures, so the result is the same in
; editors where the first matching pattern wins (tree-sitter highlight, Helix,
; GitHub) and in those where the last one does (Neovim). Contexts are told apart
; with predicates on the entry's key instead.

; Comments, literals

[
  (line_comment)
  (block_comment)
] @comment

(string) @string

(escape_sequence) @string.escape

(integer) @number

(duration) @number

(rate) @number

(boolean) @boolean

; Keywords

[
  "event"
  "connection"
  "action"
  "subscriber"
  "schedule"
  "test"
] @keyword

[
  "fake"
  "emit"
  "wait"
  "retry"
  "expect"
  "breaker"
] @keyword

; Conditions: `where: event.amount_cents >= 10000 and event.currency in ["EUR"]`

[
  "and"
  "or"
  "not"
  "in"
] @keyword.operator

[
  "=="
  "!="
  "<"
  "<="
  ">"
  ">="
] @operator

; Declarations

(event_declaration
  name: (identifier) @type)

(connection_declaration
  name: (identifier) @module)

(action_declaration
  name: (identifier) @function)

(subscriber_declaration
  name: (identifier) @function)

(schedule_declaration
  name: (identifier) @function)

(parameter
  name: (identifier) @variable.parameter)

(type
  name: (identifier) @type.builtin)

; An event's fields and their types

(field
  name: (identifier) @property)

(field
  type: (identifier) @type.builtin)

(field
  type: (optional_type
    name: (identifier) @type.builtin))

; Entries. Where a key decides how its value reads, the key is captured as a
; property again, so that every capture of a key agrees.

(entry
  key: (identifier) @property)

; `on:` names an event, or a built-in event such as `jadpo.delivery_failed`.
(entry
  key: (identifier) @property
  value: (identifier) @type
  (#eq? @property "on"))

(entry
  key: (identifier) @property
  value: (path
    head: (identifier) @module
    segment: (identifier) @type)
  (#eq? @property "on"))

; `via:` names a connection.
(entry
  key: (identifier) @property
  value: (identifier) @module
  (#eq? @property "via"))

; Any other name as a value is a word of the language: `succeeded`, `open`.
(entry
  key: (identifier) @property
  value: (identifier) @constant
  (#not-any-of? @property "on" "via"))

(entry
  key: (string)
  value: (identifier) @constant)

(entry
  key: (identifier) @property
  value: (path
    head: (identifier) @module
    segment: (identifier) @variable.member)
  (#not-eq? @property "on"))

(entry
  key: (string)
  value: (path
    head: (identifier) @module
    segment: (identifier) @variable.member))

(entry
  value: (optional_type
    name: (identifier) @type.builtin))

; `event.payment_id`

(path
  head: (event) @variable.builtin)

(path
  head: (event)
  segment: (identifier) @variable.member)

(arguments
  (path
    head: (identifier) @module
    segment: (identifier) @variable.member))

; Calls: `env("NAME")` is the one built-in function.

(call
  function: (identifier) @function.builtin
  (#eq? @function.builtin "env"))

(call
  function: (identifier) @function.call
  (#not-eq? @function.call "env"))

; Lists: a test's fake answers, `[unavailable * 5, ok]`

(list
  (identifier) @constant)

(repetition
  value: (identifier) @constant)

; Test steps

(fake_step
  connection: (identifier) @module)

(emit_step
  event: (identifier) @type)

(emit_step
  event: (path
    head: (identifier) @module
    segment: (identifier) @type))

(retry_step
  subscriber: (identifier) @function)

(expect_step
  subscriber: (identifier) @function)

(expect_breaker_step
  connection: (identifier) @module)

; Punctuation

[
  "{"
  "}"
  "("
  ")"
  "["
  "]"
] @punctuation.bracket

[
  ":"
  ","
  "."
] @punctuation.delimiter

[
  "*"
  "?"
] @operator
