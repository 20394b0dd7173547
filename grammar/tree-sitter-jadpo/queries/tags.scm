; Definitions and references, for code navigation (GitHub, `tree-sitter tags`).

(event_declaration
  name: (identifier) @name) @definition.class

(connection_declaration
  name: (identifier) @name) @definition.module

(action_declaration
  name: (identifier) @name) @definition.function

(subscriber_declaration
  name: (identifier) @name) @definition.function

(schedule_declaration
  name: (identifier) @name) @definition.function

; Calls of actions (`env` is built in). Tag queries take no captures but these,
; so references by key (`on:`, `via:`) are left to the language server.
(call
  function: (identifier) @name
  (#not-eq? @name "env")) @reference.call

(emit_step
  event: (identifier) @name) @reference.class

(fake_step
  connection: (identifier) @name) @reference.module

(expect_breaker_step
  connection: (identifier) @name) @reference.module

(retry_step
  subscriber: (identifier) @name) @reference.call

(expect_step
  subscriber: (identifier) @name) @reference.call
