/**
 * @file The jadpo subscriber language, for highlighting and structural editing.
 * @license MIT OR Apache-2.0
 *
 * The language is defined by grammar/jadpo.lalrpop and the lexer of jadpo-syntax;
 * this grammar follows them. Like the parser, it has one generic entry shape
 * (`KEY: VALUE`) for every declaration: which keys a declaration takes is the
 * checker's business, so a new key needs no change here.
 */

/// <reference types="tree-sitter-cli/dsl" />
// @ts-check

/**
 * Zero or more `rule`s separated by commas, with an optional trailing comma.
 *
 * @param {RuleOrLiteral} rule
 */
function commaSep(rule) {
  return optional(seq(rule, repeat(seq(',', rule)), optional(',')));
}

const DIGITS = '[0-9][0-9_]*';

export default grammar({
  name: 'jadpo',

  extras: $ => [/[ \t\r\n\f]/, $.line_comment, $.block_comment],

  // The keywords are words: `retry` is a step only at the start of a test's step and
  // a plain key everywhere else, as in the parser; `and`, `or`, `not` and `in` are
  // operators where a condition may go on, and field names after a `.`
  // (`event.in`), as the lexer has them.
  word: $ => $.identifier,

  supertypes: $ => [$._declaration, $._value, $._condition, $._step],

  rules: {
    source_file: $ => repeat($._declaration),

    _declaration: $ => choice(
      $.event_declaration,
      $.connection_declaration,
      $.action_declaration,
      $.subscriber_declaration,
      $.schedule_declaration,
      $.test_declaration,
    ),

    event_declaration: $ => seq('event', field('name', $.identifier), field('body', $.field_list)),

    // An event's body is a block like any other to the parser; it has a node of its
    // own so that queries tell a field's type from an entry's value.
    field_list: $ => seq('{', repeat(seq($.field, optional(','))), '}'),

    // The parser reads an event's body as entries too, so a field's type may be
    // anything an entry's value may be (the checker says what is a type).
    field: $ => seq(
      field('name', choice($.identifier, $.string)),
      ':',
      field('type', choice($._value, $._condition)),
    ),

    connection_declaration: $ => seq('connection', field('name', $.identifier), field('body', $.block)),

    action_declaration: $ => seq(
      'action',
      field('name', $.identifier),
      field('parameters', $.parameters),
      field('body', $.block),
    ),

    subscriber_declaration: $ => seq('subscriber', field('name', $.identifier), field('body', $.block)),

    schedule_declaration: $ => seq('schedule', field('name', $.identifier), field('body', $.block)),

    test_declaration: $ => seq(
      'test',
      field('name', $.string),
      '{',
      repeat($._step),
      '}',
    ),

    parameters: $ => seq('(', commaSep($.parameter), ')'),

    parameter: $ => seq(field('name', $.identifier), ':', field('type', $.type)),

    type: $ => seq(field('name', $.identifier), optional(field('optional', '?'))),

    // Entries are separated by newlines (whitespace) or by optional commas.
    block: $ => seq('{', repeat(seq($.entry, optional(','))), '}'),

    entry: $ => seq(
      field('key', choice($.identifier, $.string)),
      ':',
      field('value', choice($._value, $._condition)),
    ),

    // A condition (a subscriber's `where:`), as the parser reads an entry's value:
    // `and` and `or` take two or more operands and are not mixed without
    // parentheses, `not` takes a comparison, a membership test, a parenthesised
    // condition or a value (never `not`), and a comparison's sides are values, so
    // no precedence is involved. An entry's value without an operator is the value.
    _condition: $ => choice(
      $.comparison,
      $.in_condition,
      $.not_condition,
      $.parenthesized_condition,
      $.and_condition,
      $.or_condition,
    ),

    and_condition: $ => seq(
      field('operand', $._operand),
      repeat1(seq('and', field('operand', $._operand))),
    ),

    or_condition: $ => seq(
      field('operand', $._operand),
      repeat1(seq('or', field('operand', $._operand))),
    ),

    _operand: $ => choice($._atom, $.not_condition),

    not_condition: $ => seq('not', field('operand', $._atom)),

    _atom: $ => choice($._value, $.comparison, $.in_condition, $.parenthesized_condition),

    // `event.amount_cents >= 10000`
    comparison: $ => seq(
      field('left', $._value),
      field('operator', choice('==', '!=', '<', '<=', '>', '>=')),
      field('right', $._value),
    ),

    // `event.currency in ["EUR", "USD"]`, `event.currency not in [...]`
    in_condition: $ => seq(
      field('left', $._value),
      optional(field('negated', 'not')),
      'in',
      field('list', $.list),
    ),

    parenthesized_condition: $ => seq('(', field('condition', choice($._value, $._condition)), ')'),

    _value: $ => choice(
      $.string,
      $.integer,
      $.duration,
      $.rate,
      $.boolean,
      $.identifier,
      $.optional_type,
      $.path,
      $.call,
      $.block,
      $.list,
    ),

    // `string?`: a type that may be absent.
    optional_type: $ => seq(field('name', $.identifier), '?'),

    // `event.payment_id`, or a dotted name such as `jadpo.delivery_failed`. A keyword
    // after `.` is a segment (`event.connection`, `event.event`): only an identifier
    // is valid there, so the keyword is lexed as the identifier it spells (`word`).
    path: $ => seq(
      field('head', choice($.identifier, alias('event', $.event))),
      repeat1(seq('.', field('segment', $.identifier))),
    ),

    call: $ => seq(field('function', $.identifier), field('arguments', $.arguments)),

    arguments: $ => seq('(', commaSep($._value), ')'),

    list: $ => seq('[', commaSep(choice($._value, $.repetition)), ']'),

    // `unavailable * 5` in a test's fake answers.
    repetition: $ => seq(field('value', $._value), '*', field('count', $.integer)),

    _step: $ => choice(
      $.fake_step,
      $.emit_step,
      $.wait_step,
      $.retry_step,
      $.expect_step,
      $.expect_breaker_step,
    ),

    fake_step: $ => seq('fake', field('connection', $.identifier), ':', field('answers', $.list)),

    // A declared event, or one of jadpo's own as a path: `emit jadpo.delivery_failed`.
    emit_step: $ => seq('emit', field('event', choice($.identifier, $.path)), field('fields', $.block)),

    wait_step: $ => seq('wait', field('duration', $.duration)),

    retry_step: $ => seq('retry', field('subscriber', $.identifier)),

    // The step words are names everywhere else, so a subscriber may be called
    // `breaker`: `expect breaker { ... }` expects that subscriber.
    expect_step: $ => seq(
      'expect',
      field('subscriber', choice($.identifier, alias('breaker', $.identifier))),
      field('expected', $.block),
    ),

    expect_breaker_step: $ => seq(
      'expect',
      'breaker',
      field('connection', $.identifier),
      field('expected', $.block),
    ),

    boolean: _ => choice('true', 'false'),

    // Durations: an integer and a unit, compound units in decreasing order (`1h30m`).
    // The order and overflow are the checker's to report.
    duration: _ => token(new RegExp(`(${DIGITS}(ms|s|m|h|d))+`)),

    integer: _ => token(new RegExp(DIGITS)),

    // A rate: a count over a unit, one token (`50/s`). Which units there are is the
    // checker's to say.
    rate: _ => token(new RegExp(`${DIGITS}/[A-Za-z]+`)),

    string: $ => seq(
      '"',
      repeat(choice($.string_content, $.escape_sequence)),
      token.immediate('"'),
    ),

    string_content: _ => token.immediate(prec(1, /[^"\\\n]+/)),

    escape_sequence: _ => token.immediate(/\\(["\\ntr]|u\{[0-9A-Fa-f]{1,6}\})/),

    identifier: _ => /[A-Za-z_][A-Za-z0-9_]*/,

    line_comment: _ => token(seq('//', /[^\n]*/)),

    block_comment: _ => token(seq('/*', /[^*]*\*+([^/*][^*]*\*+)*/, '/')),
  },
});
