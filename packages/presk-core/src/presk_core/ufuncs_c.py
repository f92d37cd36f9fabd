"""numpy ufuncs in C for the four operations of ℝ on the interpreter's object arrays:
`add`, `sub`, `mul`, `div`, each element MPFR's own (`mpfr_add`, …, round to nearest, at
the context's precision) into a gmpy2 object made by gmpy2's C API — what `np.add` over
gmpy2 objects computes, without a Python call an element (numpy's object loop calls
`mpfr.__add__`, which converts, checks and allocates). The same bits: where the context is
not the interpreter's (round to nearest, no subnormalization, no traps, MPFR's exponent
range) or an operand is not an mpfr, the loop calls Python's operator, as numpy's would.
Only gmpy2's flags (inexact, …) are not raised by the C path; nothing in presk reads them.

Compiled, cached and loaded like presk_core.fold_c (presk_core.cc), as a Python extension (Python's, numpy's and
gmpy2's headers); `load()` is None where that cannot be done (then numpy's own ufuncs).
"""

from __future__ import annotations

import os

from presk_core import fold_c

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/ndarraytypes.h>
#include <numpy/ufuncobject.h>
#include <numpy/arrayobject.h>
#include "gmpy2.h"

static PyTypeObject *mpfr_type;
static PyObject *get_context;

typedef int (*mpfr_op)(mpfr_ptr, mpfr_srcptr, mpfr_srcptr, mpfr_rnd_t);
typedef PyObject *(*py_op)(PyObject *, PyObject *);

/* The context, if it is one where MPFR's value is gmpy2's: else NULL (a new reference). */
static CTXT_Object *plain_context(void)
{
    PyObject *c = PyObject_CallNoArgs(get_context);
    if (c == NULL) {
        PyErr_Clear();
        return NULL;
    }
    gmpy_context *x = &((CTXT_Object *)c)->ctx;
    if (x->mpfr_round != MPFR_RNDN || x->subnormalize || x->traps || x->emax != mpfr_get_emax()
        || x->emin != mpfr_get_emin()) {
        Py_DECREF(c);
        return NULL;
    }
    return (CTXT_Object *)c;
}

static void loop(char **args, npy_intp const *dimensions, npy_intp const *steps, mpfr_op f,
                 py_op g)
{
    npy_intp n = dimensions[0];
    char *a = args[0], *b = args[1], *o = args[2];
    CTXT_Object *context = plain_context();
    for (npy_intp i = 0; i < n; i++, a += steps[0], b += steps[1], o += steps[2]) {
        PyObject *x = *(PyObject **)a, *y = *(PyObject **)b, *r;
        if (context != NULL && Py_TYPE(x) == mpfr_type && Py_TYPE(y) == mpfr_type) {
            MPFR_Object *m = GMPy_MPFR_New(context->ctx.mpfr_prec, context);
            if (m == NULL)
                break;
            m->rc = f(m->f, MPFR(x), MPFR(y), MPFR_RNDN);
            r = (PyObject *)m;
        } else {
            r = g(x, y);
            if (r == NULL)
                break;
        }
        PyObject *old = *(PyObject **)o;
        *(PyObject **)o = r;
        Py_XDECREF(old);
    }
    Py_XDECREF(context);
}

#define LOOP(name, f, g)                                                                 \
    static void name(char **args, npy_intp const *d, npy_intp const *s, void *data)     \
    {                                                                                    \
        loop(args, d, s, f, g);                                                          \
    }
LOOP(add_loop, mpfr_add, PyNumber_Add)
LOOP(sub_loop, mpfr_sub, PyNumber_Subtract)
LOOP(mul_loop, mpfr_mul, PyNumber_Multiply)
LOOP(div_loop, mpfr_div, PyNumber_TrueDivide)

static PyUFuncGenericFunction add_f[] = {add_loop}, sub_f[] = {sub_loop}, mul_f[] = {mul_loop},
                              div_f[] = {div_loop};
static void *data[] = {NULL};
static char types[] = {NPY_OBJECT, NPY_OBJECT, NPY_OBJECT};
static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "presk_ufuncs", NULL, -1, NULL};

PyMODINIT_FUNC PyInit_presk_ufuncs(void)
{
    PyObject *m = PyModule_Create(&moddef), *gmpy2;
    if (m == NULL)
        return NULL;
    import_array();
    import_umath();
    if (import_gmpy2() < 0 || (gmpy2 = PyImport_ImportModule("gmpy2")) == NULL)
        return NULL;
    get_context = PyObject_GetAttrString(gmpy2, "get_context");
    Py_DECREF(gmpy2);
    if (get_context == NULL)
        return NULL;
    mpfr_type = (PyTypeObject *)GMPy_C_API[MPFR_Type_NUM];
    struct {
        const char *name;
        PyUFuncGenericFunction *f;
    } ops[] = {{"add", add_f}, {"sub", sub_f}, {"mul", mul_f}, {"div", div_f}};
    for (int i = 0; i < 4; i++) {
        PyObject *u = PyUFunc_FromFuncAndData(ops[i].f, data, types, 1, 2, 1, PyUFunc_None,
                                              ops[i].name, NULL, 0);
        if (u == NULL || PyModule_AddObject(m, ops[i].name, u) < 0)
            return NULL;
    }
    return m;
}
"""


def load():
    """The module of the four ufuncs, or None where it cannot be built here."""
    if os.environ.get("PRESK_INTERP_C", "1") == "0":
        return None
    module = fold_c.extension("presk_ufuncs", SOURCE, ("add", "sub", "mul", "div"))
    return None if module is None else module.lib
