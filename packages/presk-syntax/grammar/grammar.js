/**
 * The tree-sitter grammar of Presk, the surface language of the tutorial
 * (../../../../shared/spec/presk-tutorial-0.16.0.txt) and docs/language.md.
 *
 * Layout: a `let` (and a field of an optimizer, training or serving block) ends at the
 * end of its line. The external scanner (src/scanner.c) emits `_newline` only where the
 * grammar can take one, so everywhere else, inside brackets in particular, a newline is
 * a blank.
 *
 * Every Unicode symbol has an ASCII synonym: ℝ Real, λ \, · @, ≤ <=, ≥ >=, ≠ !=, → ->.
 */

const PREC = {
  lambda: 0,
  pipe: 1,
  compare: 3,
  add: 4,
  mul: 5,
  unary: 6,
  pow: 7,
  postfix: 8,
};

const commaSep1 = (rule) => seq(rule, repeat(seq(',', rule)), optional(','));
const commaSep = (rule) => optional(commaSep1(rule));

module.exports = grammar({
  name: 'presk',

  externals: ($) => [$._newline, $._error_sentinel],

  extras: ($) => [/\s/, $.comment],

  word: ($) => $.identifier,

  conflicts: ($) => [[$.dim_decl, $._dim_expr]],

  rules: {
    source_file: ($) => repeat($._declaration),

    _declaration: ($) =>
      choice(
        $.import_decl,
        $.const_decl,
        $.static_assert,
        $.dim_decl,
        $.type_decl,
        $.module_decl,
        $.fn_decl,
        $.optimizer_decl,
        $.training_decl,
        $.serve_decl,
      ),

    // ---- declarations ------------------------------------------------------------------

    import_decl: ($) => seq('import', field('path', $.string), 'as', field('alias', $.identifier)),

    const_decl: ($) =>
      seq('const', field('name', $.identifier), ':', field('type', $._type), '=', field('value', $._expr)),

    static_assert: ($) => seq('static', 'assert', field('condition', $._expr)),

    // `dim T`, `dim T <= 1024`, `dim T >= 2`, both bounds `dim 2 <= T <= 1024`.
    dim_decl: ($) =>
      seq(
        'dim',
        choice(
          seq(
            field('name', $.identifier),
            optional(
              choice(seq($._le, field('bound', $._dim_expr)), seq($._ge, field('lower', $._dim_expr))),
            ),
          ),
          seq(field('lower', $._dim_expr), $._le, field('name', $.identifier), $._le, field('bound', $._dim_expr)),
        ),
      ),

    type_decl: ($) => seq('type', field('name', $.identifier), '=', field('type', $._type)),

    module_decl: ($) =>
      seq(
        'module',
        field('name', $.identifier),
        optional(field('type_params', $.type_params)),
        '{',
        repeat(field('item', choice($.param_decl, $.use_decl, $.fn_decl))),
        '}',
      ),

    param_decl: ($) =>
      seq(
        'param',
        field('name', $.identifier),
        ':',
        field('type', $._type),
        optional(seq('init', '=', field('init', $._expr))),
      ),

    use_decl: ($) =>
      seq('use', field('name', $.identifier), ':', field('module', choice($.module_ref, $.stack_ref))),

    stack_ref: ($) =>
      seq('stack', '{', field('count', $._dim_expr), '}', '(', field('module', $.module_ref), ')'),

    module_ref: ($) => seq(field('name', $.qualified_name), optional(field('args', $.type_args))),

    type_params: ($) => seq('{', commaSep1($.type_param_group), '}'),

    type_param_group: ($) => seq(repeat1(field('name', $.identifier)), ':', field('kind', $.identifier)),

    type_args: ($) => seq('{', commaSep1($._dim_expr), '}'),

    fn_decl: ($) =>
      seq(
        'fn',
        field('name', $.identifier),
        optional(field('type_params', $.type_params)),
        field('params', $.parameters),
        optional(seq($._arrow, field('return_type', $._type))),
        optional(field('effects', $.effects)),
        '=',
        field('body', $.block),
      ),

    parameters: ($) => seq('(', commaSep($.parameter), ')'),

    parameter: ($) =>
      seq(
        field('name', $.identifier),
        ':',
        field('type', $._type),
        optional(seq('=', field('default', $._expr))),
      ),

    effects: ($) => seq('uses', commaSep1(field('effect', $.identifier))),

    block: ($) => seq(repeat(field('let', $.let_binding)), field('result', $._expr)),

    let_binding: ($) =>
      seq('let', field('pattern', $._pattern), '=', field('value', $._expr), $._newline),

    _pattern: ($) => choice($.identifier, $.tuple_pattern),

    tuple_pattern: ($) => seq('(', commaSep1($._pattern), ')'),

    // optimizer adamw { lr : f64 = 0.01 … }, training run { … }, inference serve { … }
    optimizer_decl: ($) =>
      seq('optimizer', field('name', $.identifier), '{', repeat(field('field', $._block_field)), '}'),

    training_decl: ($) => seq('training', 'run', '{', repeat(field('field', $._block_field)), '}'),

    serve_decl: ($) => seq('inference', 'serve', '{', repeat(field('field', $._block_field)), '}'),

    _block_field: ($) => choice($.block_field, $.checkpoint_field),

    block_field: ($) =>
      seq(
        field('name', $.identifier),
        choice(
          seq('=', field('value', $._expr)),
          seq(':', field('type', $._expr), optional(seq('=', field('value', $._expr)))),
        ),
        $._newline,
      ),

    checkpoint_field: ($) =>
      seq(
        'checkpoint',
        'every',
        field('every', $.integer),
        'steps',
        'to',
        field('dir', $.string),
        $._newline,
      ),

    // ---- types -------------------------------------------------------------------------

    _type: ($) => choice($.tensor_type, $.idx_type, $.params_type, $.tuple_type, $.named_type),

    tensor_type: ($) =>
      prec.right(
        seq(field('element', choice($._real, alias('bool', $.bool))), optional(field('shape', $.shape))),
      ),

    idx_type: ($) => seq('idx', '[', field('bound', $._dim_expr), ']', field('shape', $.shape)),

    shape: ($) => seq('[', commaSep(choice($.prefix, $.axis)), ']'),

    prefix: ($) => '...',

    axis: ($) => seq(optional(seq(field('name', $.identifier), ':')), field('length', $._dim_expr)),

    params_type: ($) => seq('params', field('module', $.module_ref)),

    tuple_type: ($) => seq('(', commaSep($._type), ')'),

    named_type: ($) => seq(field('name', $.qualified_name), optional(field('args', $.type_args))),

    qualified_name: ($) => prec.left(seq($.identifier, repeat(seq('.', $.identifier)))),

    // Lengths: naturals written with constants, dimensions and + - * / %.
    _dim_expr: ($) =>
      choice(
        $.integer,
        $.identifier,
        alias($.dim_binary, $.binary),
        alias($.dim_paren, $.paren),
        alias($.dim_field, $.field),
      ),

    dim_binary: ($) =>
      choice(
        ...[
          ['+', PREC.add],
          ['-', PREC.add],
          ['*', PREC.mul],
          ['/', PREC.mul],
          ['%', PREC.mul],
        ].map(([op, p]) =>
          prec.left(p, seq(field('left', $._dim_expr), field('op', op), field('right', $._dim_expr))),
        ),
      ),

    dim_paren: ($) => seq('(', field('expr', $._dim_expr), ')'),

    dim_field: ($) => seq(field('object', $.identifier), '.', field('name', $.identifier)),

    // ---- expressions -------------------------------------------------------------------

    _expr: ($) =>
      choice(
        $.lambda,
        $.binary,
        $.unary,
        $.call,
        $.field,
        $.slice,
        $.ein,
        $.stream,
        $.paren,
        $.ascription,
        $.tuple,
        $.identifier,
        $.integer,
        $.float,
        $.string,
      ),

    lambda: ($) =>
      prec.right(
        PREC.lambda,
        seq($._lambda, repeat1(field('param', $.identifier)), '.', field('body', $._expr)),
      ),

    binary: ($) =>
      choice(
        prec.left(PREC.pipe, seq(field('left', $._expr), field('op', '|>'), field('right', $._expr))),
        ...[
          ['==', PREC.compare],
          [choice('!=', '≠'), PREC.compare],
          ['<', PREC.compare],
          [$._le, PREC.compare],
          ['>', PREC.compare],
          [choice('>=', '≥'), PREC.compare],
        ].map(([op, p]) =>
          prec.left(p, seq(field('left', $._expr), field('op', op), field('right', $._expr))),
        ),
        ...[
          ['+', PREC.add],
          ['-', PREC.add],
          ['*', PREC.mul],
          ['/', PREC.mul],
          ['%', PREC.mul],
          [choice('·', '@'), PREC.mul],
        ].map(([op, p]) =>
          prec.left(p, seq(field('left', $._expr), field('op', op), field('right', $._expr))),
        ),
        prec.right(PREC.pow, seq(field('left', $._expr), field('op', '^'), field('right', $._expr))),
      ),

    unary: ($) => prec(PREC.unary, seq(field('op', '-'), field('operand', $._expr))),

    call: ($) => prec(PREC.postfix, seq(field('function', $._expr), field('args', $.arguments))),

    arguments: ($) => seq('(', commaSep($._argument), ')'),

    _argument: ($) => choice($._expr, $.axis_argument, $.keyword_argument, $.shape_argument),

    axis_argument: ($) => seq('axis', field('name', $.identifier)),

    keyword_argument: ($) => seq(field('name', $.identifier), '=', field('value', $._expr)),

    // causal_mask(seq: T): an axis given by name and length; sqrt(HD : ℝ): an ascription.
    shape_argument: ($) =>
      seq(
        field('name', $.identifier),
        ':',
        field('length', choice($._dim_expr, $.tensor_type, $.idx_type)),
      ),

    field: ($) => prec(PREC.postfix, seq(field('object', $._expr), '.', field('name', $.identifier))),

    // x[seq: a .. a + W]: the elements a to a + W - 1 of the axis `seq`, bounds being lengths
    // (issue 29). The name is optional here so that a slice without one gets its own error.
    slice: ($) =>
      prec(PREC.postfix, seq(field('object', $._expr), '[', commaSep1(field('range', $.slice_range)), ']')),

    slice_range: ($) =>
      seq(
        optional(seq(field('name', $.identifier), ':')),
        field('start', $._dim_expr),
        '..',
        field('stop', $._dim_expr),
      ),

    ein: ($) =>
      seq(
        'ein',
        '[',
        commaSep(field('axis', $.identifier)),
        ']',
        '(',
        field('operand', $._expr),
        ')',
      ),

    stream: ($) => seq('stream', field('path', $.string)),

    paren: ($) => seq('(', field('expr', $._expr), ')'),

    ascription: ($) => seq('(', field('expr', $._expr), ':', field('type', $._type), ')'),

    tuple: ($) =>
      choice(
        seq('(', ')'),
        seq('(', field('element', $._expr), ',', commaSep(field('element', $._expr)), ')'),
      ),

    // ---- tokens ------------------------------------------------------------------------

    _real: ($) => choice('ℝ', 'Real'),
    _lambda: ($) => choice('λ', '\\'),
    _arrow: ($) => choice('->', '→'),
    _le: ($) => choice('<=', '≤'),
    _ge: ($) => choice('>=', '≥'),

    identifier: ($) => /[\p{L}_][\p{L}\p{N}_'\p{Mn}]*/,

    integer: ($) => /[0-9]+/,

    float: ($) => /[0-9]+\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+/,

    string: ($) => /"([^"\\\n]|\\.)*"/,

    comment: ($) => token(seq('--', /[^\n]*/)),
  },
});
