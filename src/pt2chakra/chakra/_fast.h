/*
 * The helpers both compiled modules share (pt2chakra.chakra._fast, the
 * formats' readers and writers, and pt2chakra.simulation._fast, the
 * simulator's kernels): included by each, static inline, so each module
 * has its own copy and no symbol crosses between them. Only what both use
 * lives here; a tier's own helpers stay in its .c file. This header is the
 * format tier's (chakra/): a simulator file may include it, never the
 * reverse (tests/packaging/test_layers.py checks the includes).
 */
#ifndef PT2CHAKRA_FAST_H
#define PT2CHAKRA_FAST_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* One METH_FASTCALL entry of a module's method table: the C function
 * ``name`` and its docstring ``name##_doc``. */
#define FAST_METHOD(name) \
    {#name, (PyCFunction)(void (*)(void))name, METH_FASTCALL, name##_doc}

/* A view (``flags``, PyBUF_FORMAT among them) of an array.array of
 * ``format`` (``itemsize`` bytes an item) holding ``n`` items (any number
 * where n < 0); 0, nothing held, where it is not one. */
static inline int
typed_view(PyObject *obj, Py_buffer *view, int flags, const char *format, Py_ssize_t itemsize,
           Py_ssize_t n)
{
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (view->itemsize == itemsize && view->format && strcmp(view->format, format) == 0 &&
        (n < 0 || view->len == n * itemsize))
        return 1;
    PyBuffer_Release(view);
    return 0;
}

/* A read-only view of an array.array of ``format``, any length. */
static inline int
read_column(PyObject *obj, Py_buffer *view, const char *format, Py_ssize_t itemsize)
{
    return typed_view(obj, view, PyBUF_FORMAT, format, itemsize, -1);
}

/* A writable buffer of ``n`` items of ``format`` (an ``array.array`` of
 * that typecode); 0 where it is not. */
static inline int
column(PyObject *obj, Py_buffer *view, const char *format, Py_ssize_t itemsize, Py_ssize_t n)
{
    return typed_view(obj, view, PyBUF_FORMAT | PyBUF_WRITABLE, format, itemsize, n);
}

#endif /* PT2CHAKRA_FAST_H */
