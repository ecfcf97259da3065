/*
 * pt2chakra's compiled fast path, the simulator's tier: its kernels over
 * the prepared graph's flat arrays. Its contract (each function, its Python
 * twin, the test that compares them) is the table CONTRACT in
 * simulation/compiled.py; the formats' readers and writers are the other
 * module, chakra/_fast.c, whose header (the helpers both use) this one
 * includes. The functions:
 *
 * - parents_of, link_children, cpu_delays: the simulator's dependency lists,
 *   children arrays and CPU-thread delays (prepare._parents,
 *   prepare._link_children, thread_timing.cpu_delays);
 * - cpu_slices: how long each op holds its CPU thread (thread_timing.cpu_slices);
 * - shared_floats: a column of floats with equal values one object
 *   (prepared.shared_floats);
 * - replay_plain: the replay of a graph without collectives, sync ops or late
 *   launches (event_loop._Replay.replay);
 * - walk_back: the critical path's walk back from the last node to end
 *   (critical_path._walk_back_python);
 * - lane_cover, longest: a lane's busy time and idle gaps
 *   (rank_results._cover) and the critical path's longest nodes
 *   (critical_path._longest_python).
 *
 * Each only ever takes the common case (plain ints and floats, arrays of
 * the typecodes the simulator writes, regular dependency tuples); for
 * anything else it returns None, having changed nothing, and the
 * pure-Python twin takes the input. Both give the same arrays and times:
 * the parity tests named in CONTRACT compare them on arbitrary input.
 */
#include "../chakra/_fast.h"

/* ------------------------------------------------------------------------
 * prepare.Parents as C reads it: flat (source, kind) arrays, node k's pairs
 * from first[k] to first[k + 1], and the tuples of ``changed`` (by k) that
 * win over them.
 * ------------------------------------------------------------------------ */

typedef struct {
    Py_buffer first, src, kind;
    int held; /* buffers held: 0..3 */
    int64_t *keys; /* the replaced nodes, ascending, and their tuples (borrowed) */
    PyObject **tuples;
    Py_ssize_t n, edges, n_changed;
    PyObject *dict;
} ParentsView;

static void
parents_close(ParentsView *v)
{
    if (v->held > 2)
        PyBuffer_Release(&v->kind);
    if (v->held > 1)
        PyBuffer_Release(&v->src);
    if (v->held > 0)
        PyBuffer_Release(&v->first);
    v->held = 0;
    PyMem_Free(v->keys);
    PyMem_Free(v->tuples);
    v->keys = NULL;
    v->tuples = NULL;
    Py_CLEAR(v->dict);
}

static int
key_less(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The replaced nodes of ``v->dict``, sorted: 1, 0 (a key or value the Python
 * path must read), -1 error set. */
static int
parents_changed(ParentsView *v)
{
    Py_ssize_t pos = 0, m = PyDict_GET_SIZE(v->dict), c = 0;
    PyObject *key, *value;
    int64_t *pairs;
    v->n_changed = m;
    if (m == 0)
        return 1;
    v->keys = PyMem_Malloc((size_t)m * sizeof(int64_t));
    v->tuples = PyMem_Malloc((size_t)m * sizeof(PyObject *));
    pairs = PyMem_Malloc((size_t)m * 2 * sizeof(int64_t));
    if (v->keys == NULL || v->tuples == NULL || pairs == NULL) {
        PyMem_Free(pairs);
        PyErr_NoMemory();
        return -1;
    }
    while (PyDict_Next(v->dict, &pos, &key, &value)) {
        Py_ssize_t k = PyLong_CheckExact(key) ? PyLong_AsSsize_t(key) : -1;
        if (k == -1 && PyErr_Occurred())
            PyErr_Clear();
        if (k < 0 || k >= v->n || !PyTuple_Check(value)) {
            PyMem_Free(pairs);
            return 0;
        }
        pairs[2 * c] = k;
        pairs[2 * c + 1] = (int64_t)(intptr_t)value;
        c++;
    }
    qsort(pairs, (size_t)m, 2 * sizeof(int64_t), key_less);
    for (Py_ssize_t j = 0; j < m; j++) {
        v->keys[j] = pairs[2 * j];
        v->tuples[j] = (PyObject *)(intptr_t)pairs[2 * j + 1];
    }
    PyMem_Free(pairs);
    return 1;
}

/* 1: ``obj`` (a prepare.Parents) viewed; 0: not one this reads (the Python
 * path takes it); -1: error set. */
static int
parents_open(ParentsView *v, PyObject *obj)
{
    static const char *names[3] = {"first", "src", "kind"};
    static const char *formats[3] = {"q", "q", "b"};
    static const Py_ssize_t sizes[3] = {8, 8, 1};
    Py_buffer *views[3] = {&v->first, &v->src, &v->kind};
    int got;
    memset(v, 0, sizeof *v);
    for (int k = 0; k < 3; k++) {
        PyObject *a = PyObject_GetAttrString(obj, names[k]);
        int ok;
        if (a == NULL) {
            PyErr_Clear();
            parents_close(v);
            return 0;
        }
        ok = PyObject_GetBuffer(a, views[k], PyBUF_FORMAT) == 0;
        Py_DECREF(a);
        if (!ok) {
            PyErr_Clear();
            parents_close(v);
            return 0;
        }
        v->held++;
        if (views[k]->itemsize != sizes[k] || views[k]->format == NULL ||
            strcmp(views[k]->format, formats[k]) != 0) {
            parents_close(v);
            return 0;
        }
    }
    v->n = v->first.len / 8 - 1;
    v->edges = v->src.len / 8;
    if (v->n < 0 || v->kind.len != v->edges) {
        parents_close(v);
        return 0;
    }
    v->dict = PyObject_GetAttrString(obj, "changed");
    if (v->dict == NULL || !PyDict_Check(v->dict)) {
        PyErr_Clear();
        parents_close(v);
        return 0;
    }
    got = parents_changed(v);
    if (got <= 0)
        parents_close(v);
    return got;
}

/* Node k's replacing tuple (borrowed), or NULL. */
static inline PyObject *
parents_tuple(const ParentsView *v, Py_ssize_t k)
{
    Py_ssize_t lo = 0, hi = v->n_changed;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (v->keys[mid] < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < v->n_changed && v->keys[lo] == k ? v->tuples[lo] : NULL;
}

/* Node k's number of pairs (its flat ones from ``*at``; ``*tuple`` its
 * replacing tuple, or NULL), or -1 where the flat offsets are not in order. */
static inline Py_ssize_t
parents_count(const ParentsView *v, Py_ssize_t k, Py_ssize_t *at, PyObject **tuple)
{
    const int64_t *first = (const int64_t *)v->first.buf;
    *tuple = v->n_changed ? parents_tuple(v, k) : NULL;
    if (*tuple != NULL)
        return PyTuple_GET_SIZE(*tuple);
    if (first[k] < 0 || first[k + 1] < first[k] || first[k + 1] > v->edges)
        return -1;
    *at = (Py_ssize_t)first[k];
    return (Py_ssize_t)(first[k + 1] - first[k]);
}

/* Pair j of a node (``at`` and ``tuple`` from parents_count): 1, or 0 where
 * a replacing tuple's pair is not two ints (the source is not range-checked
 * here). */
static inline int
parents_pair(const ParentsView *v, Py_ssize_t at, PyObject *tuple, Py_ssize_t j,
             Py_ssize_t *src, long *kind)
{
    PyObject *pair;
    if (tuple == NULL) {
        *src = (Py_ssize_t)((const int64_t *)v->src.buf)[at + j];
        *kind = ((const int8_t *)v->kind.buf)[at + j];
        return 1;
    }
    pair = PyTuple_GET_ITEM(tuple, j);
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
        !PyLong_Check(PyTuple_GET_ITEM(pair, 0)) || !PyLong_Check(PyTuple_GET_ITEM(pair, 1)))
        return 0;
    *src = PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 0));
    *kind = PyLong_AsLong(PyTuple_GET_ITEM(pair, 1));
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------------
 * link_children: the simulator's children arrays (prepare._link_children)
 * ------------------------------------------------------------------------ */

/* The edge kind of a dependency moved to an issue release (inferred_waits.py). */
#define MOVED_TO_ISSUE (-1)

/* A node's pair j (see parents_pair), checked against the rank's n nodes:
 * 1 fine, 0 irregular. */
static int
pair_at(const ParentsView *v, Py_ssize_t at, PyObject *tuple, Py_ssize_t j, Py_ssize_t base,
        Py_ssize_t n, Py_ssize_t *src, long *kind)
{
    if (!parents_pair(v, at, tuple, j, src, kind))
        return 0;
    *src -= base;
    return *src >= 0 && *src < n && *kind >= -128 && *kind <= 127;
}

PyDoc_STRVAR(link_children_doc,
"link_children(parents, base, shift, nwait) -> (starts, child, kinds) or None\n\n"
"prepare._link_children's counting sort: parents (a prepare.Parents) holds\n"
"node base+k's (source index, kind) pairs; returns the packed int64 child\n"
"starts (plus shift), int64 children and int8 kinds, and adds each node's\n"
"waits to nwait[base+k]. None (nothing changed) where an entry is irregular.");

static PyObject *
link_children(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    PyObject *nwait, *starts = NULL, *child = NULL, *kinds = NULL, *result = NULL;
    Py_ssize_t base, shift, n, edges = 0;
    int64_t *count = NULL, *at;
    ParentsView v;
    int opened;
    (void)self;
    if (argc != 4 || !PyList_Check(argv[3])) {
        PyErr_SetString(PyExc_TypeError, "link_children(parents, base, shift, nwait: list)");
        return NULL;
    }
    nwait = argv[3];
    base = PyLong_AsSsize_t(argv[1]);
    shift = PyLong_AsSsize_t(argv[2]);
    if (PyErr_Occurred())
        return NULL;
    opened = parents_open(&v, argv[0]);
    if (opened <= 0)
        return opened < 0 ? NULL : Py_NewRef(Py_None);
    n = v.n;
    if (base < 0 || PyList_GET_SIZE(nwait) < base + n)
        goto python_path;
    count = PyMem_Calloc((size_t)n + 1, sizeof(int64_t));
    if (count == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) { /* check every entry, count children */
        Py_ssize_t src, from = 0, m;
        PyObject *tuple;
        long kind;
        if (!PyLong_CheckExact(PyList_GET_ITEM(nwait, base + k)))
            goto python_path;
        m = parents_count(&v, k, &from, &tuple);
        if (m < 0)
            goto python_path;
        for (Py_ssize_t j = 0; j < m; j++) {
            if (!pair_at(&v, from, tuple, j, base, n, &src, &kind))
                goto python_path;
            if (kind != MOVED_TO_ISSUE) {
                count[src + 1]++;
                edges++;
            }
        }
    }
    starts = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    child = PyBytes_FromStringAndSize(NULL, edges * (Py_ssize_t)sizeof(int64_t));
    kinds = PyBytes_FromStringAndSize(NULL, edges);
    if (starts == NULL || child == NULL || kinds == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < n; k++) /* offsets: where node base+k's children start */
        count[k + 1] += count[k];
    at = count; /* the fill cursors: count[k] until node k's children are placed */
    for (Py_ssize_t k = 0; k < n; k++)
        ((int64_t *)PyBytes_AS_STRING(starts))[k] = count[k] + shift;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t src = 0, waits = 0, from = 0, m;
        PyObject *tuple;
        long kind = 0;
        m = parents_count(&v, k, &from, &tuple);
        for (Py_ssize_t j = 0; j < m; j++) {
            pair_at(&v, from, tuple, j, base, n, &src, &kind);
            if (kind == MOVED_TO_ISSUE)
                continue;
            ((int64_t *)PyBytes_AS_STRING(child))[at[src]] = (int64_t)(base + k);
            PyBytes_AS_STRING(kinds)[at[src]] = (char)kind;
            at[src]++;
            waits++;
        }
        if (waits) {
            PyObject *old = PyList_GET_ITEM(nwait, base + k);
            PyObject *now = PyLong_FromSsize_t(PyLong_AsSsize_t(old) + waits);
            if (now == NULL)
                goto done;
            PyList_SetItem(nwait, base + k, now); /* steals now, drops old */
        }
    }
    result = PyTuple_Pack(3, starts, child, kinds);
    goto done;
python_path:
    result = Py_NewRef(Py_None);
done:
    parents_close(&v);
    PyMem_Free(count);
    Py_XDECREF(starts);
    Py_XDECREF(child);
    Py_XDECREF(kinds);
    return result;
}

/* ------------------------------------------------------------------------
 * parents_of: each node's dependencies as (index, kind) (prepare._parents)
 * ------------------------------------------------------------------------ */

/* Growing flat arrays of (source index, kind code) pairs, and each node's
 * first pair: prepare.Parents' first, src and kind. */
typedef struct {
    int64_t *first, *src;
    int8_t *kind;
    Py_ssize_t n, cap;
} Flat;

static int
flat_push(Flat *f, int64_t src, long kind)
{
    if (f->n == f->cap) {
        Py_ssize_t cap = f->cap ? 2 * f->cap : 16;
        int64_t *s = PyMem_Realloc(f->src, (size_t)cap * sizeof(int64_t));
        int8_t *k;
        if (s == NULL)
            return 0;
        f->src = s;
        k = PyMem_Realloc(f->kind, (size_t)cap);
        if (k == NULL)
            return 0;
        f->kind = k;
        f->cap = cap;
    }
    f->src[f->n] = src;
    f->kind[f->n] = (int8_t)kind;
    f->n++;
    return 1;
}

/* The index of id ``dep`` by ``index`` (a dict, or the rank's ids in
 * non-decreasing order: its last node of that id, as the dict keeps it):
 * 1 found, 0 unknown, 2 not an int the ids array can answer for (the Python
 * path's lookup decides), -1 error set. ``hint``: where to look first. */
static int
index_of(PyObject *dep, PyObject *index, const uint64_t *ids, Py_ssize_t n_ids,
         Py_ssize_t base, Py_ssize_t hint, Py_ssize_t *at)
{
    uint64_t v;
    Py_ssize_t lo = 0, hi = n_ids;
    if (ids == NULL) {
        PyObject *src = PyDict_GetItemWithError(index, dep);
        if (src == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (!PyLong_Check(src))
            return 2;
        *at = PyLong_AsSsize_t(src);
        if (*at == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 2;
        }
        return 1;
    }
    if (!PyLong_CheckExact(dep))
        return 2;
    v = PyLong_AsUnsignedLongLong(dep);
    if (v == (uint64_t)-1 && PyErr_Occurred()) { /* negative or past 64 bits: no such id */
        PyErr_Clear();
        return 0;
    }
    if (hint >= 0 && hint < n_ids && ids[hint] == v && (hint + 1 == n_ids || ids[hint + 1] != v)) {
        *at = base + hint; /* the last node of id v: most often the one just before */
        return 1;
    }
    while (lo < hi) { /* the first id past v (bisect_right) */
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (ids[mid] <= v)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || ids[lo - 1] != v)
        return 0;
    *at = base + lo - 1;
    return 1;
}

/* many(i, deps, key)'s pairs appended to ``f``: 1, 0 (not pairs the arrays
 * hold: the Python path decides), -1 error set. */
static int
many_pairs(Flat *f, PyObject *many, Py_ssize_t i, PyObject *deps, PyObject *key)
{
    PyObject *at = PyLong_FromSsize_t(i), *got;
    int ok = 1;
    if (at == NULL)
        return -1;
    got = PyObject_CallFunctionObjArgs(many, at, deps, key, NULL);
    Py_DECREF(at);
    if (got == NULL)
        return -1;
    if (!PyTuple_CheckExact(got))
        ok = 0;
    for (Py_ssize_t j = 0; ok && j < PyTuple_GET_SIZE(got); j++) {
        PyObject *pair = PyTuple_GET_ITEM(got, j);
        long long src;
        long kind;
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(pair, 0)) ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(pair, 1))) {
            ok = 0;
            break;
        }
        src = PyLong_AsLongLong(PyTuple_GET_ITEM(pair, 0));
        kind = PyLong_AsLong(PyTuple_GET_ITEM(pair, 1));
        if (PyErr_Occurred()) {
            PyErr_Clear();
            ok = 0;
        }
        else if (kind < -128 || kind > 127)
            ok = 0;
        else if (!flat_push(f, (int64_t)src, kind)) {
            PyErr_NoMemory();
            ok = -1;
        }
    }
    Py_DECREF(got);
    return ok;
}

/* Node base+k with one dependency ``dep`` whose kind is ``code``: 1 done,
 * 2 for many(), 0 irregular, -1 error set. */
static int
lone_pair(Flat *f, PyObject *dep, Py_ssize_t i, PyObject *code, PyObject *index,
          const uint64_t *ids, Py_ssize_t n_ids, Py_ssize_t base)
{
    Py_ssize_t at = -1;
    long kind;
    int found = index_of(dep, index, ids, n_ids, base, i - base - 1, &at);
    if (found != 1)
        return found;
    if (at == i)
        return 1;
    kind = PyLong_Check(code) ? PyLong_AsLong(code) : LONG_MIN;
    if (kind == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (kind < -128 || kind > 127)
        return 0;
    if (!flat_push(f, (int64_t)at, kind)) {
        PyErr_NoMemory();
        return -1;
    }
    return 1;
}

PyDoc_STRVAR(parents_of_doc,
"parents_of(deps, keys, index, lone, base, lone_code, many) -> (first, src, kind) or None\n\n"
"prepare._parents' loop, into prepare.Parents' flat arrays (packed int64\n"
"first offsets, int64 sources, int8 kinds): node base+k with one dependency\n"
"(deps[k], a list) gets (index of deps[k], lone[keys[k]]), none for an\n"
"unknown id or itself; lone_code(key) gives (and remembers in the list lone)\n"
"a code not known yet; every other node gets many(base + k, deps[k], keys[k]).\n"
"index: a dict id -> index, or the rank's ids (an array of uint64, non-\n"
"decreasing) where an id's index is base + its last position. None where a\n"
"pair is not one the arrays hold (the Python path decides).");

static PyObject *
parents_of(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    PyObject *deps, *keys, *index, *lone, *lone_code, *many, *result = NULL;
    PyObject *first = NULL, *src = NULL, *kind = NULL;
    Py_buffer view;
    const uint64_t *ids = NULL;
    Py_ssize_t base, n, n_ids = 0;
    Flat f = {NULL, NULL, NULL, 0, 0};
    int viewed = 0;
    (void)self;
    if (argc != 7 || !PyList_Check(argv[0]) || !PyList_Check(argv[1]) ||
        !PyList_Check(argv[3])) {
        PyErr_SetString(PyExc_TypeError,
                        "parents_of(deps: list, keys: list, index: dict or ids, lone: list, "
                        "base, lone_code, many)");
        return NULL;
    }
    deps = argv[0], keys = argv[1], index = argv[2], lone = argv[3];
    lone_code = argv[5], many = argv[6];
    base = PyLong_AsSsize_t(argv[4]);
    if (base == -1 && PyErr_Occurred())
        return NULL;
    n = PyList_GET_SIZE(deps);
    if (PyList_GET_SIZE(keys) != n) {
        PyErr_SetString(PyExc_ValueError, "parents_of: deps and keys differ in length");
        return NULL;
    }
    if (!PyDict_Check(index)) {
        if (PyObject_GetBuffer(index, &view, PyBUF_FORMAT) < 0)
            return NULL;
        viewed = 1;
        if (view.itemsize != 8 || view.format == NULL || strcmp(view.format, "Q") != 0) {
            PyErr_SetString(PyExc_TypeError, "parents_of: ids must be an array('Q')");
            goto done;
        }
        ids = (const uint64_t *)view.buf;
        n_ids = view.len / 8;
        for (Py_ssize_t k = 1; k < n_ids; k++)
            if (ids[k] < ids[k - 1]) {
                PyErr_SetString(PyExc_ValueError, "parents_of: ids must not decrease");
                goto done;
            }
    }
    f.first = PyMem_Malloc(((size_t)n + 1) * sizeof(int64_t));
    if (f.first == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    f.first[0] = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *d = PyList_GET_ITEM(deps, k), *key = PyList_GET_ITEM(keys, k);
        Py_ssize_t slot = PyLong_Check(key) ? PyLong_AsSsize_t(key) : -1;
        int got = 2;
        if (slot == -1 && PyErr_Occurred())
            PyErr_Clear();
        if (PyList_Check(d) && PyList_GET_SIZE(d) == 1 && slot >= 0 &&
            slot < PyList_GET_SIZE(lone)) {
            PyObject *code = PyList_GET_ITEM(lone, slot); /* borrowed */
            if (code == Py_None) {
                code = PyObject_CallOneArg(lone_code, key); /* fills lone[slot] */
                if (code == NULL)
                    goto done;
                got = lone_pair(&f, PyList_GET_ITEM(d, 0), base + k, code, index, ids, n_ids,
                                base);
                Py_DECREF(code);
            }
            else
                got = lone_pair(&f, PyList_GET_ITEM(d, 0), base + k, code, index, ids, n_ids,
                                base);
        }
        if (got == 2)
            got = many_pairs(&f, many, base + k, d, key);
        if (got < 0)
            goto done;
        if (got == 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        f.first[k + 1] = f.n;
    }
    first = PyBytes_FromStringAndSize((const char *)f.first, (n + 1) * (Py_ssize_t)sizeof(int64_t));
    src = PyBytes_FromStringAndSize((const char *)f.src, f.n * (Py_ssize_t)sizeof(int64_t));
    kind = PyBytes_FromStringAndSize((const char *)f.kind, f.n);
    if (first != NULL && src != NULL && kind != NULL)
        result = PyTuple_Pack(3, first, src, kind);
done:
    Py_XDECREF(first);
    Py_XDECREF(src);
    Py_XDECREF(kind);
    PyMem_Free(f.first);
    PyMem_Free(f.src);
    PyMem_Free(f.kind);
    if (viewed)
        PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------------
 * cpu_delays: one CPU thread's replayed delays (thread_timing.cpu_delays)
 * ------------------------------------------------------------------------ */

/* A recorded start (an int) as a float, as Python's float(int) rounds it;
 * 0 where it is not an int that fits 64 bits. */
static int
start_at(PyObject *starts, Py_ssize_t i, double *out)
{
    PyObject *x;
    int overflow = 0;
    long long v;
    if (i < 0 || i >= PyList_GET_SIZE(starts))
        return 0;
    x = PyList_GET_ITEM(starts, i);
    if (!PyLong_CheckExact(x))
        return 0;
    v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = (double)v;
    return 1;
}

/* A float entry of ``values`` (durations): 0 where it is not a float. */
static inline int
float_at(PyObject *values, Py_ssize_t i, double *out)
{
    PyObject *x;
    if (i < 0 || i >= PyList_GET_SIZE(values))
        return 0;
    x = PyList_GET_ITEM(values, i);
    if (!PyFloat_CheckExact(x))
        return 0;
    *out = PyFloat_AS_DOUBLE(x);
    return 1;
}

/* Floats made once per value (by their bits) for a column a loop fills: a
 * million delays take a few thousand values, and a list of equal floats
 * holds one object (24 bytes an entry less). Direct-mapped: a value whose
 * slot another holds is made anew. */
#define FLOAT_CACHE_SLOTS 16384

typedef struct {
    uint64_t bits[FLOAT_CACHE_SLOTS];
    PyObject *value[FLOAT_CACHE_SLOTS];
} FloatCache;

/* The float ``v`` (a new reference), shared through ``c``; NULL: error set. */
static PyObject *
cached_float(FloatCache *c, double v)
{
    uint64_t bits;
    size_t slot;
    memcpy(&bits, &v, sizeof bits);
    slot = (size_t)((bits ^ (bits >> 29) ^ (bits >> 47)) & (FLOAT_CACHE_SLOTS - 1));
    if (c->value[slot] == NULL || c->bits[slot] != bits) {
        PyObject *made = PyFloat_FromDouble(v);
        if (made == NULL)
            return NULL;
        Py_XSETREF(c->value[slot], made);
        c->bits[slot] = bits;
    }
    return Py_NewRef(c->value[slot]);
}

static void
float_cache_clear(FloatCache *c)
{
    for (size_t k = 0; k < FLOAT_CACHE_SLOTS; k++)
        Py_CLEAR(c->value[k]);
}

PyDoc_STRVAR(cpu_delays_doc,
"cpu_delays(ops, starts, dur, incl, parents, base, t0, delay) -> (last, cursor) or None\n\n"
"thread_timing.cpu_delays' loop over one thread's ops (parents: a prepare.Parents):\n"
"sets delay[i] for each op\n"
"and returns the latest recorded end and the cursor after its last slice.\n"
"None (nothing changed) where an entry is not what that loop reads.");

static PyObject *
cpu_delays(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    PyObject *ops, *starts, *dur, *incl, *delay;
    Py_ssize_t base, n;
    double t0, cursor, last = -Py_HUGE_VAL, *gaps;
    FloatCache *cache;
    ParentsView v;
    int opened;
    (void)self;
    if (argc != 8 || !PyList_Check(argv[0]) || !PyList_Check(argv[1]) ||
        !PyList_Check(argv[2]) || !PyList_Check(argv[3]) ||
        !PyList_Check(argv[7]) || !PyFloat_Check(argv[6])) {
        PyErr_SetString(PyExc_TypeError, "cpu_delays(ops, starts, dur, incl: lists, parents, "
                        "base: int, t0: float, delay: list)");
        return NULL;
    }
    ops = argv[0], starts = argv[1], dur = argv[2], incl = argv[3];
    delay = argv[7];
    base = PyLong_AsSsize_t(argv[5]);
    if (base == -1 && PyErr_Occurred())
        return NULL;
    t0 = PyFloat_AS_DOUBLE(argv[6]);
    n = PyList_GET_SIZE(ops);
    opened = parents_open(&v, argv[4]);
    if (opened <= 0)
        return opened < 0 ? NULL : Py_NewRef(Py_None);
    gaps = PyMem_Malloc(((size_t)n + 1) * sizeof(double));
    if (gaps == NULL) {
        parents_close(&v);
        return PyErr_NoMemory();
    }
    cursor = t0;
    for (Py_ssize_t q = 0; q < n; q++) { /* compute every delay first: nothing set on None */
        PyObject *op = PyList_GET_ITEM(ops, q);
        Py_ssize_t i = PyLong_Check(op) ? PyLong_AsSsize_t(op) : -1, k, m, at = 0;
        PyObject *tuple;
        double start, inclusive, own, ready, gap, held_to, end;
        if (i == -1 && PyErr_Occurred())
            PyErr_Clear();
        k = i - base;
        if (i < 0 || !start_at(starts, i, &start) || !float_at(incl, k, &inclusive) ||
            !float_at(dur, i, &own) || k < 0 || k >= v.n || i >= PyList_GET_SIZE(delay))
            goto python_path;
        ready = cursor;
        m = parents_count(&v, k, &at, &tuple);
        if (m < 0)
            goto python_path;
        for (Py_ssize_t j = 0; j < m; j++) {
            Py_ssize_t src;
            long kind;
            double s, d, e;
            if (!parents_pair(&v, at, tuple, j, &src, &kind))
                goto python_path;
            if (!start_at(starts, src, &s) || !float_at(dur, src, &d))
                goto python_path;
            e = s + d;
            if (ready < e && e <= start)
                ready = e;
        }
        gap = start - ready; /* max(0.0, ...) and max(cursor, ...), inline */
        gaps[q] = gap > 0.0 ? gap : 0.0;
        held_to = start + own;
        if (held_to > cursor)
            cursor = held_to;
        end = start + inclusive;
        if (end > last)
            last = end;
    }
    parents_close(&v);
    cache = PyMem_Calloc(1, sizeof(FloatCache));
    if (cache == NULL) {
        PyMem_Free(gaps);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *value = cached_float(cache, gaps[q]);
        if (value == NULL) {
            float_cache_clear(cache);
            PyMem_Free(cache);
            PyMem_Free(gaps);
            return NULL;
        }
        PyList_SetItem(delay, PyLong_AsSsize_t(PyList_GET_ITEM(ops, q)), value);
    }
    float_cache_clear(cache);
    PyMem_Free(cache);
    PyMem_Free(gaps);
    return Py_BuildValue("(dd)", last, cursor);
python_path:
    parents_close(&v);
    PyMem_Free(gaps);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(cpu_slices_doc,
"cpu_slices(ops, starts, incl, base, dur) -> True or None\n\n"
"thread_timing._slices_python over one thread's ops (a list of indices):\n"
"dur[i] = how long op i holds its thread (rules.conventions.thread_holds:\n"
"from its start until the next op's start, at most its inclusive time\n"
"incl[i - base], never negative), equal values one float object. None\n"
"(nothing changed) where a start is not an int, an inclusive time not a\n"
"float or an index outside the lists.");

static PyObject *
cpu_slices(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    PyObject *ops, *starts, *incl, *dur;
    Py_ssize_t base, n;
    double *held = NULL, *start = NULL;
    FloatCache *cache = NULL;
    PyObject *result = NULL;
    (void)self;
    if (argc != 5 || !PyList_Check(argv[0]) || !PyList_Check(argv[1]) ||
        !PyList_Check(argv[2]) || !PyList_Check(argv[4])) {
        PyErr_SetString(PyExc_TypeError, "cpu_slices(ops, starts, incl: lists, base: int, "
                        "dur: list)");
        return NULL;
    }
    ops = argv[0], starts = argv[1], incl = argv[2], dur = argv[4];
    base = PyLong_AsSsize_t(argv[3]);
    if (base == -1 && PyErr_Occurred())
        return NULL;
    n = PyList_GET_SIZE(ops);
    held = PyMem_Malloc(((size_t)n + 1) * sizeof(double));
    start = PyMem_Malloc(((size_t)n + 1) * sizeof(double));
    if (held == NULL || start == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t q = 0; q < n; q++) { /* every start first: the next op's is read */
        PyObject *op = PyList_GET_ITEM(ops, q);
        Py_ssize_t i = PyLong_CheckExact(op) ? PyLong_AsSsize_t(op) : -1;
        if (i == -1 && PyErr_Occurred())
            PyErr_Clear();
        if (i < 0 || i >= PyList_GET_SIZE(dur) || !start_at(starts, i, &start[q]))
            goto python_path;
    }
    for (Py_ssize_t q = 0; q < n; q++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyList_GET_ITEM(ops, q));
        double inclusive, stop, h;
        if (!float_at(incl, i - base, &inclusive))
            goto python_path;
        stop = start[q] + inclusive;
        if (q + 1 < n && start[q + 1] < stop) /* the next op (its first callee) */
            stop = start[q + 1];
        h = stop - start[q];
        held[q] = h > 0.0 ? h : 0.0;
    }
    cache = PyMem_Calloc(1, sizeof(FloatCache));
    if (cache == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *value = cached_float(cache, held[q]);
        if (value == NULL)
            goto done;
        PyList_SetItem(dur, PyLong_AsSsize_t(PyList_GET_ITEM(ops, q)), value);
    }
    result = Py_NewRef(Py_True);
    goto done;
python_path:
    result = Py_NewRef(Py_None);
done:
    if (cache != NULL) {
        float_cache_clear(cache);
        PyMem_Free(cache);
    }
    PyMem_Free(held);
    PyMem_Free(start);
    return result;
}

PyDoc_STRVAR(shared_floats_doc,
"shared_floats(values, absent) -> list\n\n"
"prepared.shared_floats: the doubles of values (an array('d')) as a list in\n"
"which equal values (bit for bit) are mostly one float object; with absent (a\n"
"list, else None) a NaN entry takes absent's entry at its place. As long as\n"
"the shorter of the two.");

static PyObject *
shared_floats(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    PyObject *absent, *out = NULL;
    Py_buffer view;
    FloatCache *cache = NULL;
    const double *v;
    Py_ssize_t n;
    (void)self;
    if (argc != 2 || (argv[1] != Py_None && !PyList_Check(argv[1]))) {
        PyErr_SetString(PyExc_TypeError, "shared_floats(values: array('d'), absent: list | None)");
        return NULL;
    }
    absent = argv[1];
    if (PyObject_GetBuffer(argv[0], &view, PyBUF_FORMAT) < 0)
        return NULL;
    if (view.itemsize != 8 || view.format == NULL || strcmp(view.format, "d") != 0) {
        PyErr_SetString(PyExc_TypeError, "shared_floats: values must be an array('d')");
        goto done;
    }
    v = (const double *)view.buf;
    n = view.len / 8;
    if (absent != Py_None && PyList_GET_SIZE(absent) < n)
        n = PyList_GET_SIZE(absent);
    cache = PyMem_Calloc(1, sizeof(FloatCache));
    out = cache == NULL ? PyErr_NoMemory() : PyList_New(n);
    if (out == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *x;
        if (absent != Py_None && v[k] != v[k])
            x = Py_NewRef(PyList_GET_ITEM(absent, k));
        else if ((x = cached_float(cache, v[k])) == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, k, x);
    }
done:
    if (cache != NULL) {
        float_cache_clear(cache);
        PyMem_Free(cache);
    }
    PyBuffer_Release(&view);
    return out;
}

/* ------------------------------------------------------------------------
 * replay_plain: the replay of a graph without collectives that wait for
 * peers, sync ops or late launches (event_loop._Replay.replay): lanes take their
 * first ready node by recorded order, a node starts after its delay from
 * whichever came last (its lane freeing or its last dependency) and holds
 * its lane for its duration; events in (time, type, push order) order.
 * ------------------------------------------------------------------------ */

enum { EV_COMPLETE = 0, EV_START = 3 }; /* event_loop._EV_COMPLETE, _EV_START */

typedef struct {
    double t;
    int64_t ev, seq, i;
} Event;

typedef struct {
    int64_t order, i;
} Ready;

static inline int
event_less(const Event *a, const Event *b)
{
    if (a->t != b->t)
        return a->t < b->t;
    if (a->ev != b->ev)
        return a->ev < b->ev;
    return a->seq < b->seq;
}

static inline int
ready_less(const Ready *a, const Ready *b)
{
    return a->order != b->order ? a->order < b->order : a->i < b->i;
}

/* Binary heaps over a growing array (keys are unique, so any heap pops
 * them in the order heapq does). */
#define HEAP_FUNCS(NAME, T, LESS)                                              \
    typedef struct { T *a; Py_ssize_t n, cap; } NAME;                          \
    static int NAME##_push(NAME *h, T x)                                       \
    {                                                                          \
        Py_ssize_t k;                                                          \
        if (h->n == h->cap) {                                                  \
            Py_ssize_t cap = h->cap ? 2 * h->cap : 4;                          \
            T *a = PyMem_Realloc(h->a, (size_t)cap * sizeof(T));               \
            if (a == NULL)                                                     \
                return 0;                                                      \
            h->a = a, h->cap = cap;                                            \
        }                                                                      \
        k = h->n++;                                                            \
        while (k > 0) {                                                        \
            Py_ssize_t up = (k - 1) / 2;                                       \
            if (!LESS(&x, &h->a[up]))                                          \
                break;                                                         \
            h->a[k] = h->a[up];                                                \
            k = up;                                                            \
        }                                                                      \
        h->a[k] = x;                                                           \
        return 1;                                                              \
    }                                                                          \
    static T NAME##_pop(NAME *h)                                               \
    {                                                                          \
        T top = h->a[0], last = h->a[--h->n];                                  \
        Py_ssize_t k = 0;                                                      \
        for (;;) {                                                             \
            Py_ssize_t c = 2 * k + 1;                                          \
            if (c >= h->n)                                                     \
                break;                                                         \
            if (c + 1 < h->n && LESS(&h->a[c + 1], &h->a[c]))                  \
                c++;                                                           \
            if (!LESS(&h->a[c], &last))                                        \
                break;                                                         \
            h->a[k] = h->a[c];                                                 \
            k = c;                                                             \
        }                                                                      \
        if (h->n)                                                              \
            h->a[k] = last;                                                    \
        return top;                                                            \
    }

HEAP_FUNCS(EventHeap, Event, event_less)
HEAP_FUNCS(ReadyHeap, Ready, ready_less)

/* A list of exact floats, all finite, as doubles; 0 where it is not. */
static int
finite_floats(PyObject *list, Py_ssize_t n, double *out)
{
    if (!PyList_Check(list) || PyList_GET_SIZE(list) != n)
        return 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *v = PyList_GET_ITEM(list, k);
        if (!PyFloat_CheckExact(v))
            return 0;
        out[k] = PyFloat_AS_DOUBLE(v);
        if (!isfinite(out[k]))
            return 0;
    }
    return 1;
}

/* An exact int of ``list`` at ``i`` within [lo, hi]; 0 where it is not. */
static inline int
small_int_at(PyObject *list, Py_ssize_t i, int64_t lo, int64_t hi, int64_t *out)
{
    PyObject *v = PyList_GET_ITEM(list, i);
    int overflow = 0;
    long long x;
    if (!PyLong_CheckExact(v))
        return 0;
    x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || x < lo || x > hi)
        return 0;
    *out = x;
    return 1;
}

/* A list of exact ints within [lo, hi], as int64; 0 where it is not. */
static int
bounded_ints(PyObject *list, Py_ssize_t n, int64_t lo, int64_t hi, int64_t *out)
{
    if (!PyList_Check(list) || PyList_GET_SIZE(list) != n)
        return 0;
    for (Py_ssize_t k = 0; k < n; k++)
        if (!small_int_at(list, k, lo, hi, &out[k]))
            return 0;
    return 1;
}

/* The replay's state, C arrays; the run's columns (start_t, end_t,
 * bind_pred, bind_kind, bind_time) are the buffers of its arrays, written in place. */
typedef struct {
    Py_ssize_t n, lanes;
    double *lane_free, *ready_t, *dur, *delay, *start_t, *end_t, *bind_time;
    int64_t *waiting, *lane_of, *order, *lane_prev, *ready_pred, *ready_kind, *bind_pred;
    signed char *bind_kind;
    char *lane_busy;
    const int64_t *cs, *child;
    const signed char *kind;
    ReadyHeap *lane_heap;
    EventHeap events;
    int64_t seq, k_start, k_lane;
} Plain;

/* replay's take: lane ``lane`` takes node ``i``. */
static int
plain_take(Plain *r, int64_t lane, int64_t i)
{
    double free = r->lane_free[lane], ready = r->ready_t[i], bt;
    int64_t bp, bk;
    Event e;
    r->lane_busy[lane] = 1;
    if (free > ready) {
        bp = r->lane_prev[lane], bk = r->k_lane, bt = free;
        if (bp < 0)
            bk = r->k_start;
    }
    else
        bp = r->ready_pred[i], bk = r->ready_kind[i], bt = ready;
    r->bind_pred[i] = bp, r->bind_kind[i] = (signed char)bk, r->bind_time[i] = bt;
    e.t = bt + r->delay[i], e.ev = EV_START, e.seq = ++r->seq, e.i = i;
    return EventHeap_push(&r->events, e);
}

static inline int
plain_try_lane(Plain *r, int64_t lane)
{
    if (r->lane_busy[lane] || r->lane_heap[lane].n == 0)
        return 1;
    return plain_take(r, lane, ReadyHeap_pop(&r->lane_heap[lane]).i);
}

/* replay's complete: node ``i`` ends at ``t``. */
static int
plain_complete(Plain *r, int64_t i, double t)
{
    int64_t lane = r->lane_of[i];
    r->end_t[i] = t;
    r->lane_busy[lane] = 0;
    r->lane_free[lane] = t;
    r->lane_prev[lane] = i;
    for (int64_t j = r->cs[i]; j < r->cs[i + 1]; j++) {
        int64_t c = r->child[j];
        if (t >= r->ready_t[c])
            r->ready_t[c] = t, r->ready_pred[c] = i, r->ready_kind[c] = r->kind[j];
        if (--r->waiting[c] == 0) {
            int64_t c_lane = r->lane_of[c];
            Ready x = {r->order[c], c};
            if (r->lane_busy[c_lane]) {
                if (!ReadyHeap_push(&r->lane_heap[c_lane], x))
                    return 0;
            }
            else if (r->lane_heap[c_lane].n) {
                if (!ReadyHeap_push(&r->lane_heap[c_lane], x) || !plain_try_lane(r, c_lane))
                    return 0;
            }
            else if (!plain_take(r, c_lane, c))
                return 0;
        }
    }
    return r->lane_busy[lane] ? 1 : plain_try_lane(r, lane);
}

static int
plain_run(Plain *r)
{
    for (Py_ssize_t i = 0; i < r->n; i++)
        if (r->waiting[i] == 0) {
            Ready x = {r->order[i], i};
            if (!ReadyHeap_push(&r->lane_heap[r->lane_of[i]], x))
                return 0;
        }
    for (Py_ssize_t lane = 0; lane < r->lanes; lane++)
        if (!plain_try_lane(r, lane))
            return 0;
    while (r->events.n) {
        Event e = EventHeap_pop(&r->events);
        if (e.ev == EV_COMPLETE) {
            if (!plain_complete(r, e.i, e.t))
                return 0;
        }
        else {
            Event done = {e.t + r->dur[e.i], EV_COMPLETE, ++r->seq, e.i};
            r->start_t[e.i] = e.t;
            if (!EventHeap_push(&r->events, done))
                return 0;
        }
    }
    return 1;
}


/* The run's columns, argv[10] to argv[14]: their typecodes and item sizes
 * (event_loop.ReplayRun: TIME_TYPECODE, INDEX_TYPECODE, KIND_TYPECODE). */
#define RUN_COLUMNS 5
static const char *const RUN_FORMATS[RUN_COLUMNS] = {"d", "d", "q", "b", "d"};
static const Py_ssize_t RUN_ITEMSIZES[RUN_COLUMNS] = {8, 8, 8, 1, 8};

PyDoc_STRVAR(replay_plain_doc,
"replay_plain(lane_free, waiting, ready_t, lane_of, order, child_start, child,\n"
"             child_kind, dur, delay, start, end, bind_pred, bind_kind, bind_time,\n"
"             k_start, k_lane) -> bool | None\n\n"
"event_loop._Replay.replay of a graph without collectives waiting for peers, sync\n"
"ops or late launches: writes the nodes' start, end and binding into the\n"
"run's arrays given (typecodes d, d, q, b, d) and returns True; None (nothing\n"
"written) where an input is not as expected (a value not an exact finite\n"
"float or an int in range, a column not such an array of n items).");

static PyObject *
replay_plain(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    Plain r;
    Py_buffer views[3], cols[RUN_COLUMNS];
    int got = 0, got_cols = 0, ok = 0, fits;
    Py_ssize_t n, lanes;
    PyObject *result = NULL;
    void *blocks[2] = {NULL, NULL};
    (void)self;
    memset(&r, 0, sizeof r);
    if (argc != 17 || !PyList_Check(argv[0]) || !PyList_Check(argv[2])) {
        PyErr_SetString(PyExc_TypeError, "replay_plain: 17 arguments, see its docstring");
        return NULL;
    }
    lanes = PyList_GET_SIZE(argv[0]);
    n = PyList_GET_SIZE(argv[2]);
    r.k_start = PyLong_AsLongLong(argv[15]);
    r.k_lane = PyLong_AsLongLong(argv[16]);
    if (PyErr_Occurred())
        return NULL;
    for (; got < 3; got++)
        if (PyObject_GetBuffer(argv[5 + got], &views[got], PyBUF_FORMAT) < 0)
            goto done;
    fits = views[0].itemsize == 8 && views[1].itemsize == 8 && views[2].itemsize == 1 &&
        views[0].format && strcmp(views[0].format, "q") == 0 && views[1].format &&
        strcmp(views[1].format, "q") == 0 && views[2].format &&
        strcmp(views[2].format, "b") == 0 && views[0].len / 8 == n + 1 &&
        views[1].len == views[2].len * 8;
    fits = fits && r.k_start >= SCHAR_MIN && r.k_start <= SCHAR_MAX && r.k_lane >= SCHAR_MIN &&
        r.k_lane <= SCHAR_MAX; /* the bind_kind column holds signed bytes */
    if (!fits || n < 0 || lanes <= 0 || n > PY_SSIZE_T_MAX / 64)
        goto python_path;
    for (; got_cols < RUN_COLUMNS; got_cols++)
        if (!column(argv[10 + got_cols], &cols[got_cols], RUN_FORMATS[got_cols],
                    RUN_ITEMSIZES[got_cols], n))
            goto python_path;
    r.n = n, r.lanes = lanes;
    r.cs = views[0].buf, r.child = views[1].buf, r.kind = views[2].buf;
    {
        Py_ssize_t nc = views[1].len / 8;
        for (Py_ssize_t i = 0; i < n; i++)
            if (r.cs[i] < 0 || r.cs[i] > r.cs[i + 1] || r.cs[i + 1] > nc)
                goto python_path;
        if (n && r.cs[0] != 0)
            goto python_path;
        for (Py_ssize_t j = 0; j < nc; j++)
            if (r.child[j] < 0 || r.child[j] >= n)
                goto python_path;
    }
    /* per node: 3 doubles, 5 int64; per lane: 1 double, 1 int64, 1 char, 1 heap */
    blocks[0] = PyMem_Calloc((size_t)n + 1, 3 * sizeof(double) + 5 * sizeof(int64_t));
    blocks[1] = PyMem_Calloc((size_t)lanes, sizeof(double) + sizeof(int64_t) + 1 +
                             sizeof(ReadyHeap));
    if (blocks[0] == NULL || blocks[1] == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    {
        char *b = blocks[0];
        double **d[3] = {&r.ready_t, &r.dur, &r.delay};
        int64_t **q[5] = {&r.waiting, &r.lane_of, &r.order, &r.ready_pred, &r.ready_kind};
        for (int k = 0; k < 3; k++, b += (n + 1) * sizeof(double))
            *d[k] = (double *)b;
        for (int k = 0; k < 5; k++, b += (n + 1) * sizeof(int64_t))
            *q[k] = (int64_t *)b;
        r.start_t = cols[0].buf, r.end_t = cols[1].buf, r.bind_pred = cols[2].buf;
        r.bind_kind = cols[3].buf, r.bind_time = cols[4].buf;
        b = blocks[1];
        r.lane_heap = (ReadyHeap *)b;
        b += lanes * sizeof(ReadyHeap);
        r.lane_free = (double *)b;
        b += lanes * sizeof(double);
        r.lane_prev = (int64_t *)b;
        b += lanes * sizeof(int64_t);
        r.lane_busy = b;
    }
    if (!finite_floats(argv[0], lanes, r.lane_free) ||
        !bounded_ints(argv[1], n, 0, INT64_MAX, r.waiting) ||
        !finite_floats(argv[2], n, r.ready_t) ||
        !bounded_ints(argv[3], n, 0, lanes - 1, r.lane_of) ||
        !bounded_ints(argv[4], n, INT64_MIN, INT64_MAX, r.order) ||
        !finite_floats(argv[8], n, r.dur) || !finite_floats(argv[9], n, r.delay)) {
        if (PyErr_Occurred())
            goto done;
        goto python_path;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        r.ready_pred[i] = -1, r.ready_kind[i] = r.k_start;
    for (Py_ssize_t lane = 0; lane < lanes; lane++)
        r.lane_prev[lane] = -1;
    if (!plain_run(&r)) {
        PyErr_NoMemory();
        goto done;
    }
    ok = 1;
python_path:
    result = ok ? Py_True : Py_None;
    Py_INCREF(result);
done:
    if (r.lane_heap)
        for (Py_ssize_t lane = 0; lane < r.lanes; lane++)
            PyMem_Free(r.lane_heap[lane].a);
    PyMem_Free(r.events.a);
    PyMem_Free(blocks[0]);
    PyMem_Free(blocks[1]);
    while (got > 0)
        PyBuffer_Release(&views[--got]);
    while (got_cols > 0)
        PyBuffer_Release(&cols[--got_cols]);
    return result;
}

/* ------------------------------------------------------------------------
 * walk_back: the critical path's walk back (critical_path._walk_back_python):
 * from the last node to end, follow what decided each start (or a sync op's
 * end) back to a rank's start, charging time to node types and edge kinds.
 * ------------------------------------------------------------------------ */

/* Time charged per code, and the codes in the order first charged. */
typedef struct {
    double *us;
    char *charged;
    int64_t *order;
    Py_ssize_t n, used;
} Tally;

static inline void
tally_charge(Tally *t, int64_t code, double us)
{
    if (!t->charged[code]) {
        t->charged[code] = 1;
        t->order[t->used++] = code;
    }
    t->us[code] = t->us[code] + us;
}

/* The tally as Python values: slots (a float, None where never charged)
 * and the order; NULL on failure. */
static int
tally_out(const Tally *t, PyObject **slots, PyObject **order)
{
    *slots = PyList_New(t->n);
    *order = PyList_New(t->used);
    if (*slots == NULL || *order == NULL)
        return 0;
    for (Py_ssize_t k = 0; k < t->n; k++) {
        PyObject *v = t->charged[k] ? PyFloat_FromDouble(t->us[k]) : Py_NewRef(Py_None);
        if (v == NULL)
            return 0;
        PyList_SET_ITEM(*slots, k, v);
    }
    for (Py_ssize_t k = 0; k < t->used; k++) {
        PyObject *v = PyLong_FromLongLong(t->order[k]);
        if (v == NULL)
            return 0;
        PyList_SET_ITEM(*order, k, v);
    }
    return 1;
}

/* The columns walk_back reads, argv[2] to argv[7] (event_loop.ReplayRun):
 * start, end, bind_time, bind_kind, bind_pred, gate_pred. */
#define WALK_COLUMNS 6
static const char *const WALK_FORMATS[WALK_COLUMNS] = {"d", "d", "d", "b", "q", "q"};
static const Py_ssize_t WALK_ITEMSIZES[WALK_COLUMNS] = {8, 8, 8, 1, 8, 8};

PyDoc_STRVAR(walk_back_doc,
"walk_back(cat, rank, start, end, bind_time, bind_kind, bind_pred, gate_pred, late,\n"
"          last, multi, n_types, n_kinds, t_gap, t_wait, cpu_op, k_gpu_sync)\n"
"  -> (path, type_us, kind_us, type_order, kind_order, total, crossings) | None\n\n"
"critical_path._walk_back_python from node ``last``: ``path`` the nodes walked\n"
"(int64 bytes, last first), the time per node type and edge kind by code (None:\n"
"never charged) with the codes in the order first charged, the path's length and\n"
"its moves to another rank. ``cat`` and ``rank`` are lists of ints, the columns the\n"
"run's arrays (typecodes d, d, d, b, q, q), ``late`` the late launches (``in``).\n"
"None where an input is not as expected (a code or a node index out of range).");

static PyObject *
walk_back(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    Py_buffer cols[WALK_COLUMNS];
    int got = 0, ok = 0, multi;
    Py_ssize_t n, path_len = 0, path_cap = 0;
    int64_t *path = NULL, cur, n_types, n_kinds, t_gap, t_wait, cpu_op, k_sync, crossings = 0;
    int64_t guard;
    double t, total = 0.0;
    const double *start, *end, *bind_time;
    const signed char *bind_kind;
    const int64_t *bind_pred, *gate_pred;
    PyObject *cat, *rank, *late, *result = NULL;
    PyObject *type_us = NULL, *kind_us = NULL, *type_order = NULL, *kind_order = NULL;
    PyObject *path_bytes = NULL;
    Tally types = {0}, kinds = {0};
    (void)self;
    if (argc != 17 || !PyList_Check(argv[0]) || !PyList_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "walk_back: 17 arguments, see its docstring");
        return NULL;
    }
    cat = argv[0], rank = argv[1], late = argv[8];
    n = PyList_GET_SIZE(cat);
    cur = PyLong_AsLongLong(argv[9]);
    multi = PyObject_IsTrue(argv[10]);
    n_types = PyLong_AsLongLong(argv[11]);
    n_kinds = PyLong_AsLongLong(argv[12]);
    t_gap = PyLong_AsLongLong(argv[13]);
    t_wait = PyLong_AsLongLong(argv[14]);
    cpu_op = PyLong_AsLongLong(argv[15]);
    k_sync = PyLong_AsLongLong(argv[16]);
    if (PyErr_Occurred() || multi < 0)
        return NULL;
    if (PyList_GET_SIZE(rank) != n || cur < 0 || cur >= n || n_types <= 0 || n_kinds <= 0 ||
        n_types > 256 || n_kinds > 256 || t_gap < 0 || t_gap >= n_types || t_wait < 0 ||
        t_wait >= n_types || cpu_op < 0 || cpu_op >= n_types || k_sync < 0 || k_sync >= n_kinds)
        goto python_path;
    for (; got < WALK_COLUMNS; got++)
        if (!column(argv[2 + got], &cols[got], WALK_FORMATS[got], WALK_ITEMSIZES[got], n))
            goto python_path;
    start = cols[0].buf, end = cols[1].buf, bind_time = cols[2].buf;
    bind_kind = cols[3].buf, bind_pred = cols[4].buf, gate_pred = cols[5].buf;
    types.n = n_types, kinds.n = n_kinds;
    types.us = PyMem_Calloc((size_t)n_types, sizeof(double));
    types.charged = PyMem_Calloc((size_t)n_types, 1);
    types.order = PyMem_Calloc((size_t)n_types, sizeof(int64_t));
    kinds.us = PyMem_Calloc((size_t)n_kinds, sizeof(double));
    kinds.charged = PyMem_Calloc((size_t)n_kinds, 1);
    kinds.order = PyMem_Calloc((size_t)n_kinds, sizeof(int64_t));
    if (!types.us || !types.charged || !types.order || !kinds.us || !kinds.charged ||
        !kinds.order) {
        PyErr_NoMemory();
        goto done;
    }
    guard = (int64_t)n + 5;
    t = end[cur];
    while (cur >= 0 && guard) {
        int64_t gp, c, kind, pred;
        double s, e, node_part, bt, wait, share;
        guard--;
        if (path_len == path_cap) {
            Py_ssize_t cap = path_cap ? 2 * path_cap : 1024;
            int64_t *grown = PyMem_Realloc(path, (size_t)cap * sizeof(int64_t));
            if (grown == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            path = grown, path_cap = cap;
        }
        path[path_len++] = cur;
        gp = gate_pred[cur];
        if (gp >= n)
            goto python_path;
        if (gp >= 0 && t >= end[cur] && end[gp] > start[cur]) {
            /* _gated_step: the post-return part is CPU time on a gpu_sync edge */
            double seg = t - end[gp];
            int differ;
            tally_charge(&types, cpu_op, seg);
            tally_charge(&kinds, k_sync, seg);
            total += seg;
            differ = PyObject_RichCompareBool(PyList_GET_ITEM(rank, gp),
                                              PyList_GET_ITEM(rank, cur), Py_NE);
            if (differ < 0)
                goto done;
            crossings += differ;
            cur = gp, t = end[gp];
            continue;
        }
        s = start[cur], e = end[cur];
        node_part = (e < t ? e : t) - s;
        if (!(node_part > 0.0))
            node_part = 0.0;
        if (!small_int_at(cat, cur, 0, (t_gap < t_wait ? t_gap : t_wait) - 1, &c))
            goto python_path;
        tally_charge(&types, c, node_part);
        bt = bind_time[cur];
        wait = s - bt;
        if (!(wait > 0.0))
            wait = 0.0;
        if (c == cpu_op)
            tally_charge(&types, t_gap, wait);
        else if (wait != 0.0) {
            PyObject *key = PyLong_FromLongLong(cur);
            int in_late = key == NULL ? -1 : PySequence_Contains(late, key);
            Py_XDECREF(key);
            if (in_late < 0)
                goto done;
            tally_charge(&types, in_late ? t_gap : t_wait, wait);
        }
        share = node_part + wait;
        kind = bind_kind[cur];
        if (kind < 0 || kind >= n_kinds)
            goto python_path;
        tally_charge(&kinds, kind, share);
        total += share;
        pred = bind_pred[cur];
        if (pred >= n)
            goto python_path;
        if (multi && pred >= 0) {
            int differ = PyObject_RichCompareBool(PyList_GET_ITEM(rank, pred),
                                                  PyList_GET_ITEM(rank, cur), Py_NE);
            if (differ < 0)
                goto done;
            crossings += differ;
        }
        cur = pred, t = bt;
    }
    path_bytes = PyBytes_FromStringAndSize((const char *)path,
                                           path_len * (Py_ssize_t)sizeof(int64_t));
    if (path_bytes == NULL || !tally_out(&types, &type_us, &type_order) ||
        !tally_out(&kinds, &kind_us, &kind_order))
        goto done;
    result = Py_BuildValue("(OOOOOdL)", path_bytes, type_us, kind_us, type_order, kind_order,
                           total, (long long)crossings);
    ok = 1;
    goto done;
python_path:
    result = Py_NewRef(Py_None);
    ok = 1;
done:
    if (!ok)
        Py_CLEAR(result);
    Py_XDECREF(path_bytes);
    Py_XDECREF(type_us);
    Py_XDECREF(kind_us);
    Py_XDECREF(type_order);
    Py_XDECREF(kind_order);
    PyMem_Free(path);
    PyMem_Free(types.us);
    PyMem_Free(types.charged);
    PyMem_Free(types.order);
    PyMem_Free(kinds.us);
    PyMem_Free(kinds.charged);
    PyMem_Free(kinds.order);
    while (got > 0)
        PyBuffer_Release(&cols[--got]);
    return result;
}

/* ------------------------------------------------------------------------
 * lane_cover, longest: a replay's summaries (rank_results._cover,
 * critical_path._longest_python)
 * ------------------------------------------------------------------------ */

/* Two buffers of doubles (array('d')) viewed: 1, or 0 with neither held. */
static int
two_doubles(PyObject *a, Py_buffer *va, PyObject *b, Py_buffer *vb)
{
    if (!read_column(a, va, "d", 8))
        return 0;
    if (!read_column(b, vb, "d", 8)) {
        PyBuffer_Release(va);
        return 0;
    }
    return 1;
}

PyDoc_STRVAR(lane_cover_doc,
"lane_cover(starts, ends, origin, predicted) -> (busy, gaps) or None\n\n"
"rank_results._cover's walk over a lane's spans (array('d') starts and ends,\n"
"both not decreasing; origin and predicted floats). None where they are not\n"
"that (the Python path sorts).");

static PyObject *
lane_cover(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    Py_buffer sv, ev;
    const double *st, *en;
    double cursor, hi, busy = 0.0;
    Py_ssize_t n, gaps = 0;
    PyObject *result = NULL;
    (void)self;
    if (argc != 4) {
        PyErr_SetString(PyExc_TypeError, "lane_cover(starts, ends, origin, predicted)");
        return NULL;
    }
    if (!PyFloat_CheckExact(argv[2]) || !PyFloat_CheckExact(argv[3]))
        Py_RETURN_NONE;
    if (!two_doubles(argv[0], &sv, argv[1], &ev))
        Py_RETURN_NONE;
    st = (const double *)sv.buf;
    en = (const double *)ev.buf;
    n = sv.len / 8;
    if (ev.len / 8 != n)
        goto python_path;
    for (Py_ssize_t k = 1; k < n; k++) /* prepare.non_decreasing: NaN is not in order */
        if (!(st[k - 1] <= st[k]) || !(en[k - 1] <= en[k]))
            goto python_path;
    cursor = PyFloat_AS_DOUBLE(argv[2]);
    hi = cursor + PyFloat_AS_DOUBLE(argv[3]);
    for (Py_ssize_t k = 0; k < n; k++) {
        double s = st[k], e = en[k];
        if (s > cursor + 1e-9)
            gaps++;
        if (e > cursor) {
            double lo = s > cursor ? s : cursor;
            if (lo < hi)
                busy += (e < hi ? e : hi) - lo;
            cursor = e;
        }
    }
    if (cursor < hi - 1e-9)
        gaps++;
    result = Py_BuildValue("(dn)", busy, gaps);
    goto done;
python_path:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ev);
    return result;
}

/* The most nodes ``longest`` lists (the report lists ten). */
#define LONGEST_MAX 64

PyDoc_STRVAR(longest_doc,
"longest(nodes, start, end, count) -> list or None\n\n"
"critical_path._longest_python: the count nodes of the list nodes with the\n"
"longest end - start (array('d') columns), in the order of\n"
"sorted(nodes, key=start - end)[:count] (ties in list order). None where a\n"
"node is not an index of the columns, a time is NaN or count is past\n"
"LONGEST_MAX.");

static PyObject *
longest(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    Py_buffer sv, ev;
    const double *st, *en;
    double key[LONGEST_MAX];
    Py_ssize_t pos[LONGEST_MAX], n, cols, count, held = 0;
    PyObject *nodes, *result = NULL;
    (void)self;
    if (argc != 4 || !PyList_Check(argv[0])) {
        PyErr_SetString(PyExc_TypeError, "longest(nodes: list, start, end, count)");
        return NULL;
    }
    nodes = argv[0];
    count = PyLong_AsSsize_t(argv[3]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    if (count < 0 || count > LONGEST_MAX)
        Py_RETURN_NONE;
    if (!two_doubles(argv[1], &sv, argv[2], &ev))
        Py_RETURN_NONE;
    st = (const double *)sv.buf;
    en = (const double *)ev.buf;
    cols = sv.len / 8 < ev.len / 8 ? sv.len / 8 : ev.len / 8;
    n = PyList_GET_SIZE(nodes);
    for (Py_ssize_t q = 0; q < n; q++) {
        PyObject *item = PyList_GET_ITEM(nodes, q);
        Py_ssize_t i = PyLong_CheckExact(item) ? PyLong_AsSsize_t(item) : -1, at;
        double k;
        if (i == -1 && PyErr_Occurred())
            PyErr_Clear();
        if (i < 0 || i >= cols)
            goto python_path;
        k = st[i] - en[i];
        if (k != k)
            goto python_path;
        if (held == count && (count == 0 || !(k < key[held - 1])))
            continue;
        at = held < count ? held : held - 1; /* the slot it may take, then moved up */
        while (at > 0 && k < key[at - 1]) { /* after equal keys: list order at ties */
            key[at] = key[at - 1];
            pos[at] = pos[at - 1];
            at--;
        }
        key[at] = k;
        pos[at] = q;
        if (held < count)
            held++;
    }
    result = PyList_New(held);
    if (result == NULL)
        goto done;
    for (Py_ssize_t j = 0; j < held; j++)
        PyList_SET_ITEM(result, j, Py_NewRef(PyList_GET_ITEM(nodes, pos[j])));
    goto done;
python_path:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&sv);
    PyBuffer_Release(&ev);
    return result;
}

static PyMethodDef methods[] = {
    FAST_METHOD(parents_of),
    FAST_METHOD(link_children),
    FAST_METHOD(cpu_delays),
    FAST_METHOD(cpu_slices),
    FAST_METHOD(shared_floats),
    FAST_METHOD(replay_plain),
    FAST_METHOD(walk_back),
    FAST_METHOD(lane_cover),
    FAST_METHOD(longest),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fast",
    "pt2chakra's compiled fast path, the simulator's tier (see "
    "pt2chakra/simulation/compiled.py).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__fast(void)
{
    return PyModule_Create(&module);
}
