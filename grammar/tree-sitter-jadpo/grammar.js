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
  // a plain key everywhere else, as in the parser.
  word: $ => $.identifier,

  supertypes: $ => [$._declaration, $._value, $._step],

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

    field: $ => seq(
      field('name', choice($.identifier, $.string)),
      ':',
      field('type', $._value),
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
      field('value', $._value),
    ),

    _value: $ => choice(
      $.string,
      $.integer,
      $.duration,
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
