; Highlighting of Presk for editors that read tree-sitter queries (Neovim, Helix, Zed).

(comment) @comment
(string) @string
(integer) @number
(float) @number.float

[
  "module" "param" "use" "fn" "let" "import" "as" "const" "static" "assert" "dim" "type"
  "init" "uses" "params" "stack" "ein" "axis" "optimizer" "training" "run" "inference"
  "serve" "stream" "checkpoint" "every" "steps" "to"
] @keyword

["λ" "\\"] @keyword.function
["ℝ" "Real" "idx" (bool)] @type.builtin

[
  "+" "-" "*" "/" "%" "^" "·" "@" "==" "!=" "≠" "<" "<=" "≤" ">" ">=" "≥" "|>" "->" "→"
  "=" ".."
] @operator

["(" ")" "[" "]" "{" "}"] @punctuation.bracket
["," ":" "."] @punctuation.delimiter
(prefix) @punctuation.special

(module_decl name: (identifier) @type)
(module_ref name: (qualified_name (identifier) @type .))
(named_type name: (qualified_name) @type)
(type_param_group name: (identifier) @type.parameter)
(type_param_group kind: (identifier) @type.builtin)

(fn_decl name: (identifier) @function)
(call function: (identifier) @function.call)
(call function: (field name: (identifier) @function.method.call))
(parameter name: (identifier) @variable.parameter)
(lambda param: (identifier) @variable.parameter)
(param_decl name: (identifier) @property)
(use_decl name: (identifier) @property)
(axis name: (identifier) @label)
(axis_argument name: (identifier) @label)
(shape_argument name: (identifier) @label)
(slice_range name: (identifier) @label)
(keyword_argument name: (identifier) @variable.parameter)
(ein axis: (identifier) @label)
(const_decl name: (identifier) @constant)
(dim_decl name: (identifier) @constant)
(block_field name: (identifier) @property)
(import_decl alias: (identifier) @module)

; The primitives a program calls by name and the constant π (names of the language, which a
; name of the program hides: presk_types.rules.CALL_NAMES and CONSTANT_NAMES).
((identifier) @constant.builtin (#any-of? @constant.builtin "π" "pi"))
(call
  function: (identifier) @function.builtin
  (#any-of? @function.builtin
    "abs" "argmax" "bernoulli" "causal_mask" "conv" "cos" "embed" "exp" "gelu" "iota" "log"
    "log_softmax" "max" "mean" "merge" "min" "normal" "one_hot" "ones" "pad" "real" "relu"
    "sample" "scan" "select"
    "sigmoid" "silu" "sin" "softmax" "split" "split_key" "sqrt" "stop_grad" "sum" "take" "tanh" "top_k"
    "uniform" "zeros"))
