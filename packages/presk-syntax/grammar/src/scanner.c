#include "tree_sitter/parser.h"
void *tree_sitter_presk_external_scanner_create(void) { return NULL; }
void tree_sitter_presk_external_scanner_destroy(void *p) { (void)p; }
unsigned tree_sitter_presk_external_scanner_serialize(void *p, char *b) { (void)p; (void)b; return 0; }
void tree_sitter_presk_external_scanner_deserialize(void *p, const char *b, unsigned n) { (void)p; (void)b; (void)n; }
bool tree_sitter_presk_external_scanner_scan(void *p, TSLexer *l, const bool *v) { (void)p; (void)l; (void)v; return false; }
