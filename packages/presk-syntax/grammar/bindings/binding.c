/* The Python entry of the Presk grammar: presk_syntax._binding.language() returns the
   capsule that tree_sitter.Language takes. */
#include <Python.h>

typedef struct TSLanguage TSLanguage;
const TSLanguage *tree_sitter_presk(void);

static PyObject *language(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    return PyCapsule_New((void *)tree_sitter_presk(), "tree_sitter.Language", NULL);
}

static PyMethodDef methods[] = {
    {"language", language, METH_NOARGS, "The tree-sitter language of Presk."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_binding", "The compiled Presk grammar.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__binding(void) { return PyModule_Create(&module); }
