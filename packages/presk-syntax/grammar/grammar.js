module.exports = grammar({
  name: 'presk',
  externals: $ => [$._newline],
  extras: $ => [/\s/],
  rules: {
    source_file: $ => repeat($.identifier),
    identifier: $ => /[a-z]+/,
  }
});
