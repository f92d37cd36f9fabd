/* The layout of Presk: a `let` and a block field end at the end of their line.
 *
 * The parser asks for NEWLINE only in the states where a line may end a construct
 * (after the value of a `let` or of a field). There this scanner skips blanks and, on a
 * line break, emits NEWLINE; everywhere else it declines, and the line break is a blank.
 * A comment before the line break is left to the lexer (an extra), after which the
 * parser asks again. In error recovery every symbol is valid, ERROR_SENTINEL included:
 * then the scanner declines, so that recovery is driven by the tokens alone.
 */
#include "tree_sitter/parser.h"

enum TokenType { NEWLINE, ERROR_SENTINEL };

void *tree_sitter_presk_external_scanner_create(void) { return NULL; }
void tree_sitter_presk_external_scanner_destroy(void *payload) { (void)payload; }
unsigned tree_sitter_presk_external_scanner_serialize(void *payload, char *buffer) {
    (void)payload;
    (void)buffer;
    return 0;
}
void tree_sitter_presk_external_scanner_deserialize(void *payload, const char *buffer,
                                                    unsigned length) {
    (void)payload;
    (void)buffer;
    (void)length;
}

bool tree_sitter_presk_external_scanner_scan(void *payload, TSLexer *lexer,
                                             const bool *valid_symbols) {
    (void)payload;
    if (valid_symbols[ERROR_SENTINEL] || !valid_symbols[NEWLINE]) return false;
    while (lexer->lookahead == ' ' || lexer->lookahead == '\t' || lexer->lookahead == '\r' ||
           lexer->lookahead == '\f' || lexer->lookahead == '\v') {
        lexer->advance(lexer, true);
    }
    if (lexer->lookahead == '\n') {
        lexer->advance(lexer, false);
        lexer->mark_end(lexer);
        lexer->result_symbol = NEWLINE;
        return true;
    }
    if (lexer->eof(lexer)) {
        /* A last line without its line break still ends its `let`. */
        lexer->mark_end(lexer);
        lexer->result_symbol = NEWLINE;
        return true;
    }
    return false;
}
