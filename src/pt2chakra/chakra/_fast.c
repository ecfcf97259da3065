/*
 * pt2chakra's compiled fast path. Its contract (each function, its Python
 * twin, the test that compares them) is the table CONTRACT in
 * chakra/compiled.py; the functions:
 *
 * - scan_frames: decode's frame scan of a buffer fill;
 * - lean_nodes: the simulator's lean node decode (chakra/lean_read.py): a
 *   million-node .et read in about a second instead of six;
 * - encode_node: the converter's CPU-node encoder (encode.NodeWriter);
 * - frame_nodes: that encoder over a batch of nodes, framed (NodeWriter.frame);
 * - deps_in_order: the writer's walk over the dependency table
 *   (dep_table.DepTable._in_order_chunk);
 * - parents_of, link_children, cpu_delays: the simulator's dependency lists,
 *   children arrays and CPU-thread delays (prepare._parents,
 *   prepare._link_children, thread_timing.cpu_delays);
 * - cpu_slices: how long each op holds its CPU thread (thread_timing.cpu_slices);
 * - shared_floats: a column of floats with equal values one object
 *   (prepared.shared_floats);
 * - shared_io: a host op's inputs/outputs as their IOInfo body (host_decode);
 * - host_ops: host ET nodes as HostOps, where their attrs are the observer's
 *   plain list (host_decode._nested_to_op);
 * - nested_ops: a slice of a host ET's nodes read from its text straight
 *   into HostOps, where they are plain (host_decode.decode_nodes, normalise);
 * - replay_plain: the replay of a graph without collectives, sync ops or late
 *   launches (event_loop._Replay.replay);
 * - walk_back: the critical path's walk back from the last node to end
 *   (critical_path._walk_back_python);
 * - lane_cover, longest: a lane's busy time and idle gaps
 *   (rank_results._cover) and the critical path's longest nodes
 *   (critical_path._longest_python);
 * - thread_order, check_ops, op_field: the converter's thread-order edges as
 *   columns (deps.thread_order_columns), the host ops' structure check
 *   (host_decode._check_ops_python) and a field of every op (linker.op_field).
 *
 * Each only ever takes the common case. Anything it does not handle exactly
 * (an unnamed attribute, a group field, a wire type the lean schema would
 * read differently, a node type NodeType lacks, invalid UTF-8, a value of the
 * held-apart attribute that is not a plain integer, a varint that runs off
 * its buffer, a value the encoder's tables have not met ...) goes to the
 * pure-Python path, which gives its result or its error. Both paths give the
 * same nodes and bytes: the parity tests named in CONTRACT compare them on
 * arbitrary input.
 *
 * Wire format: et_def.proto (Node: 1 id, 2 name, 3 type, 4 ctrl_deps,
 * 5 data_deps, 6 start_time_micros, 7 duration_micros, 8 inputs, 9 outputs,
 * 10 attr; AttributeProto: 1 name).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

/* Wanted attribute bodies of one node, concatenated (each with its length
 * varint) into the key of its shared attribute list; longer sets take the
 * Python path. */
#define KEY_MAX 4096
#define MAX_WANTED 64

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };
enum { F_ID = 1, F_NAME = 2, F_TYPE = 3, F_DATA_DEPS = 5, F_START = 6, F_DURATION = 7,
       F_ATTR = 10 };
/* AttributeProto: the name's tag, and the integer members the held-apart
 * value may use (int64_val = 9, uint64_val = 13, varint wire type). */
#define ATTR_NAME_TAG 0x0A
#define INT64_VAL_TAG 0x48
#define UINT64_VAL_TAG 0x68

typedef const unsigned char *cursor;

/* One varint; 0 where it is truncated or longer than 64 bits. */
static inline int
read_varint(cursor *p, cursor end, uint64_t *out)
{
    uint64_t v = 0;
    int shift = 0;
    cursor q = *p;
    while (q < end) {
        unsigned char b = *q++;
        if (shift == 63 && b > 1)
            return 0;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *p = q;
            *out = v;
            return 1;
        }
        shift += 7;
        if (shift > 63)
            return 0;
    }
    return 0;
}

/* The longest varint (a 64-bit value, 7 bits a byte). */
#define MAX_VARINT_BYTES 10

/* Write ``v`` as a varint at ``dst`` (room for MAX_VARINT_BYTES); returns its length. */
static inline Py_ssize_t
write_varint(unsigned char *dst, uint64_t v)
{
    Py_ssize_t n = 0;
    while (v >= 0x80) {
        dst[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    dst[n++] = (unsigned char)v;
    return n;
}

/* Skip one field of wire type ``wt``; 0 where it cannot be skipped exactly. */
static inline int
skip_field(cursor *p, cursor end, unsigned wt)
{
    uint64_t n;
    switch (wt) {
    case WT_VARINT:
        return read_varint(p, end, &n);
    case WT_I64:
        if (end - *p < 8)
            return 0;
        *p += 8;
        return 1;
    case WT_LEN:
        if (!read_varint(p, end, &n) || n > (uint64_t)(end - *p))
            return 0;
        *p += n;
        return 1;
    case WT_I32:
        if (end - *p < 4)
            return 0;
        *p += 4;
        return 1;
    default: /* groups (3, 4) and invalid wire types */
        return 0;
    }
}

static inline int
put_varint(unsigned char *buf, Py_ssize_t *len, uint64_t v)
{
    if (*len + MAX_VARINT_BYTES > KEY_MAX)
        return 0;
    *len += write_varint(buf + *len, v);
    return 1;
}

/* What one read asks for: wanted attribute names, the one held apart. */
typedef struct {
    Py_ssize_t n_wanted;
    const char *wanted[MAX_WANTED];
    Py_ssize_t wanted_len[MAX_WANTED];
    const char *apart;
    Py_ssize_t apart_len; /* 0: none held apart */
} Filter;

static int
is_wanted(const Filter *f, cursor name, Py_ssize_t len)
{
    for (Py_ssize_t k = 0; k < f->n_wanted; k++)
        if (f->wanted_len[k] == len && memcmp(f->wanted[k], name, (size_t)len) == 0)
            return 1;
    return 0;
}

/* The held-apart body's value, where it is ``name`` plus one int64/uint64
 * member; 0 otherwise (the Python path decides). */
static int
apart_value(cursor p, cursor end, double *out)
{
    uint64_t v;
    unsigned char tag;
    if (p >= end)
        return 0;
    tag = *p++;
    if ((tag != INT64_VAL_TAG && tag != UINT64_VAL_TAG) || !read_varint(&p, end, &v) || p != end)
        return 0;
    *out = tag == INT64_VAL_TAG ? (double)(int64_t)v : (double)v;
    return 1;
}

/* One node's fields; returns 0 where the Python path must decide. ``deps``
 * gets the data dependencies; ``key``/``key_len`` the wanted attributes
 * (less the one held apart, whose value goes to ``apart``, NaN if absent);
 * ``bodies`` their count. */
typedef struct {
    uint64_t id, start, duration;
    long type;
    cursor name;
    Py_ssize_t name_len;
    double apart;
    int apart_seen;
    unsigned char key[KEY_MAX];
    Py_ssize_t key_len;
} NodeFields;

static int
attr_field(const Filter *f, NodeFields *nf, cursor body, cursor end)
{
    Py_ssize_t len = end - body, name_len;
    if (len < 2 || body[0] != ATTR_NAME_TAG || body[1] >= 0x80 || 2 + body[1] > len)
        return 0; /* unnamed first: the Python path decodes it whole */
    name_len = body[1];
    if (f->apart_len && name_len == f->apart_len &&
        memcmp(body + 2, f->apart, (size_t)name_len) == 0) {
        if (nf->apart_seen++)
            return 0; /* twice: the Python path keeps the rule for that */
        return apart_value(body + 2 + name_len, end, &nf->apart);
    }
    if (!is_wanted(f, body + 2, name_len))
        return 1;
    if (!put_varint(nf->key, &nf->key_len, (uint64_t)len) || nf->key_len + len > KEY_MAX)
        return 0;
    memcpy(nf->key + nf->key_len, body, (size_t)len);
    nf->key_len += len;
    return 1;
}

/* A node's dependency ids as read, before they become its list (made at
 * their exact count: a list grown by appends holds room for four). */
typedef struct {
    uint64_t *v;
    Py_ssize_t n, cap;
} Deps;

/* Read one varint dependency id into ``deps``: 1, 0 (malformed), -1 (error set). */
static int
append_dep(Deps *deps, cursor *p, cursor end)
{
    uint64_t v;
    if (!read_varint(p, end, &v))
        return 0;
    if (deps->n == deps->cap) {
        Py_ssize_t cap = deps->cap ? 2 * deps->cap : 16;
        uint64_t *grown = PyMem_Realloc(deps->v, (size_t)cap * sizeof(uint64_t));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        deps->v = grown;
        deps->cap = cap;
    }
    deps->v[deps->n++] = v;
    return 1;
}

static int
data_deps_field(Deps *deps, cursor *p, cursor end, unsigned wt)
{
    uint64_t n;
    int got;
    if (wt == WT_VARINT)
        return append_dep(deps, p, end);
    if (wt != WT_LEN || !read_varint(p, end, &n) || n > (uint64_t)(end - *p))
        return 0;
    end = *p + n; /* packed */
    while (*p < end)
        if ((got = append_dep(deps, p, end)) <= 0)
            return got;
    return 1;
}

/* The ids of the last nodes made, each with its int: a dependency is nearly
 * always on the node just before (a thread's previous op), and shares that
 * node's id object instead of an int of its own (32 bytes a node). */
#define RECENT_IDS 4

typedef struct {
    uint64_t id[RECENT_IDS];
    PyObject *obj[RECENT_IDS];
    int next;
} RecentIds;

static void
recent_note(RecentIds *r, uint64_t id, PyObject *obj)
{
    Py_INCREF(obj);
    Py_XSETREF(r->obj[r->next], obj);
    r->id[r->next] = id;
    r->next = (r->next + 1) % RECENT_IDS;
}

static void
recent_clear(RecentIds *r)
{
    for (int k = 0; k < RECENT_IDS; k++)
        Py_CLEAR(r->obj[k]);
}

/* The int ``v``: a recent node's id object where one is ``v``; new reference. */
static PyObject *
id_int(const RecentIds *r, uint64_t v)
{
    for (int k = 0; k < RECENT_IDS; k++)
        if (r->obj[k] != NULL && r->id[k] == v)
            return Py_NewRef(r->obj[k]);
    return PyLong_FromUnsignedLongLong(v);
}

/* The ids read as a list of ints, of exactly their count; NULL: error set. */
static PyObject *
deps_list(const Deps *deps, const RecentIds *recent)
{
    PyObject *out = PyList_New(deps->n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < deps->n; k++) {
        PyObject *item = id_int(recent, deps->v[k]);
        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, k, item);
    }
    return out;
}

/* 1: parsed; 0: not handled here; -1: a Python error is set. */
static int
node_fields(const Filter *f, NodeFields *nf, Deps *deps, cursor p, cursor end)
{
    uint64_t tag, v;
    deps->n = 0;
    nf->id = nf->start = nf->duration = 0;
    nf->type = 0;
    nf->name = NULL; /* absent: "" */
    nf->name_len = 0;
    nf->apart = Py_NAN;
    nf->apart_seen = 0;
    nf->key_len = 0;
    while (p < end) {
        unsigned field, wt;
        if (!read_varint(&p, end, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1FFFFFFF)
            return 0;
        field = (unsigned)(tag >> 3);
        wt = (unsigned)(tag & 7);
        switch (field) {
        case F_ID:
        case F_TYPE:
        case F_START:
        case F_DURATION:
            if (wt != WT_VARINT || !read_varint(&p, end, &v))
                return 0;
            if (field == F_ID)
                nf->id = v;
            else if (field == F_START)
                nf->start = v;
            else if (field == F_DURATION)
                nf->duration = v;
            else
                nf->type = (long)(int32_t)(uint32_t)v; /* int32 on the wire */
            break;
        case F_NAME:
        case F_ATTR: {
            cursor body;
            if (wt != WT_LEN || !read_varint(&p, end, &v) || v > (uint64_t)(end - p))
                return 0;
            body = p;
            p += v;
            if (field == F_NAME) {
                if (nf->name != NULL)
                    return 0; /* twice: protobuf checks each one's UTF-8 */
                nf->name = body;
                nf->name_len = (Py_ssize_t)v;
            }
            else if (!attr_field(f, nf, body, p))
                return 0;
            break;
        }
        case F_DATA_DEPS: {
            int got = data_deps_field(deps, &p, end, wt);
            if (got <= 0)
                return got;
            break;
        }
        default: /* fields the simulator does not read */
            if (!skip_field(&p, end, wt))
                return 0;
        }
    }
    return 1;
}

/* 1: read; 0: more names than it holds (the Python path reads); -1: error. */
static int
read_filter(Filter *f, PyObject *wanted, PyObject *apart)
{
    Py_ssize_t n = PyTuple_GET_SIZE(wanted);
    if (n > MAX_WANTED)
        return 0;
    f->n_wanted = n;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *name = PyTuple_GET_ITEM(wanted, k);
        if (!PyBytes_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "wanted names must be bytes");
            return -1;
        }
        f->wanted[k] = PyBytes_AS_STRING(name);
        f->wanted_len[k] = PyBytes_GET_SIZE(name);
    }
    f->apart = PyBytes_AS_STRING(apart);
    f->apart_len = PyBytes_GET_SIZE(apart);
    return 1;
}

/* The node built from parsed fields (a new reference), or NULL with an
 * error set, or Py_None (borrowed) where the Python path must decide. */
static PyObject *
make_node(NodeFields *nf, PyObject *id, PyObject *deps, PyObject *node_cls, PyObject *types,
          PyObject *no_deps, PyObject *names, PyObject *lists, PyObject *miss)
{
    PyObject *args[10] = {NULL};
    PyObject *name, *key, *attrs, *node = NULL;
    if (nf->type < 0 || nf->type >= PyTuple_GET_SIZE(types))
        return Py_None;
    name = PyUnicode_DecodeUTF8(nf->name ? (const char *)nf->name : "", nf->name_len, NULL);
    if (name == NULL) {
        PyErr_Clear();
        return Py_None; /* upb refuses it too: the Python path gives its error */
    }
    args[1] = PyDict_SetDefault(names, name, name); /* borrowed */
    Py_DECREF(name);
    if (args[1] == NULL)
        return NULL;
    key = PyBytes_FromStringAndSize((const char *)nf->key, nf->key_len);
    if (key == NULL)
        return NULL;
    attrs = PyDict_GetItemWithError(lists, key); /* borrowed */
    if (attrs != NULL)
        Py_INCREF(attrs);
    else if (!PyErr_Occurred())
        attrs = PyObject_CallOneArg(miss, key); /* decodes and remembers it */
    Py_DECREF(key);
    if (attrs == NULL)
        return NULL;
    args[0] = Py_NewRef(id);
    args[2] = PyTuple_GET_ITEM(types, nf->type);
    args[3] = PyLong_FromUnsignedLongLong(nf->start);
    args[4] = PyLong_FromUnsignedLongLong(nf->duration);
    args[5] = no_deps;
    args[6] = deps;
    args[7] = Py_None;
    args[8] = Py_None;
    args[9] = attrs;
    if (args[0] != NULL && args[3] != NULL && args[4] != NULL)
        node = PyObject_Vectorcall(node_cls, args, 10, NULL);
    Py_XDECREF(args[0]);
    Py_XDECREF(args[3]);
    Py_XDECREF(args[4]);
    Py_DECREF(attrs);
    return node;
}

PyDoc_STRVAR(lean_nodes_doc,
"lean_nodes(buf, bodies, ends, wanted, apart, node_cls, types, no_deps, names, lists, miss)\n"
"-> (nodes, apart_values) or None\n\n"
"The nodes of buf[bodies[k]:ends[k]] as lean_read builds them, with the\n"
"held-apart attribute's values as packed doubles (NaN: absent). None where\n"
"a node needs the Python path. lists maps an attribute key to its shared\n"
"list; miss(key) decodes a new one (and remembers it).");

static PyObject *
lean_nodes(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    PyObject *buf_obj, *bodies, *ends, *wanted, *apart, *node_cls, *types, *no_deps, *names,
        *lists, *miss;
    PyObject *nodes = NULL, *values = NULL, *result = NULL;
    NodeFields *nf = NULL;
    Deps ids = {NULL, 0, 0};
    RecentIds recent;
    Filter filter;
    Py_ssize_t n, size;
    cursor buf;
    double *column;
    (void)self;
    memset(&recent, 0, sizeof recent);
    if (argc != 11) {
        PyErr_SetString(PyExc_TypeError, "lean_nodes takes 11 arguments");
        return NULL;
    }
    buf_obj = argv[0], bodies = argv[1], ends = argv[2], wanted = argv[3], apart = argv[4];
    node_cls = argv[5], types = argv[6], no_deps = argv[7], names = argv[8], lists = argv[9];
    miss = argv[10];
    if (!PyBytes_Check(buf_obj) || !PyList_Check(bodies) || !PyList_Check(ends) ||
        !PyTuple_Check(wanted) || !PyBytes_Check(apart) || !PyTuple_Check(types) ||
        !PyDict_Check(names) || !PyDict_Check(lists)) {
        PyErr_SetString(PyExc_TypeError, "lean_nodes: unexpected argument types");
        return NULL;
    }
    switch (read_filter(&filter, wanted, apart)) {
    case -1:
        return NULL;
    case 0:
        Py_RETURN_NONE;
    }
    buf = (cursor)PyBytes_AS_STRING(buf_obj);
    size = PyBytes_GET_SIZE(buf_obj);
    n = PyList_GET_SIZE(bodies);
    if (PyList_GET_SIZE(ends) != n) {
        PyErr_SetString(PyExc_ValueError, "lean_nodes: bodies and ends differ in length");
        return NULL;
    }
    nf = PyMem_Malloc(sizeof(NodeFields));
    nodes = PyList_New(n);
    values = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(double));
    if (nf == NULL || nodes == NULL || values == NULL)
        goto fail;
    column = (double *)PyBytes_AS_STRING(values);
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t start = PyLong_AsSsize_t(PyList_GET_ITEM(bodies, k));
        Py_ssize_t stop = PyLong_AsSsize_t(PyList_GET_ITEM(ends, k));
        PyObject *deps, *node, *id;
        int got;
        if ((start == -1 || stop == -1) && PyErr_Occurred())
            goto fail;
        if (start < 0 || stop < start || stop > size) {
            PyErr_SetString(PyExc_ValueError, "lean_nodes: a frame outside the buffer");
            goto fail;
        }
        got = node_fields(&filter, nf, &ids, buf + start, buf + stop);
        if (got <= 0) {
            if (got < 0)
                goto fail;
            goto python_path;
        }
        deps = deps_list(&ids, &recent);
        if (deps == NULL)
            goto fail;
        id = id_int(&recent, nf->id);
        if (id == NULL) {
            Py_DECREF(deps);
            goto fail;
        }
        node = make_node(nf, id, deps, node_cls, types, no_deps, names, lists, miss);
        Py_DECREF(deps);
        if (node != NULL && node != Py_None)
            recent_note(&recent, nf->id, id);
        Py_DECREF(id);
        if (node == NULL)
            goto fail;
        if (node == Py_None)
            goto python_path;
        PyList_SET_ITEM(nodes, k, node);
        column[k] = nf->apart;
    }
    result = PyTuple_Pack(2, nodes, values);
    goto done;
python_path:
    result = Py_NewRef(Py_None);
    goto done;
fail:
    result = NULL;
done:
    PyMem_Free(nf);
    PyMem_Free(ids.v);
    recent_clear(&recent);
    Py_XDECREF(nodes);
    Py_XDECREF(values);
    return result;
}

PyDoc_STRVAR(scan_frames_doc,
"scan_frames(buf, pos, limit) -> (bodies, ends, pos)\n\n"
"Frames the length-prefixed messages of buf from pos while they start at or\n"
"before limit and have a non-zero 1- or 2-byte length that fits the buffer;\n"
"stops (returning where) at the first other one, which decode's Python loop\n"
"then handles with its checks and errors.");

static PyObject *
scan_frames(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    PyObject *bodies = NULL, *ends = NULL, *result = NULL;
    Py_ssize_t pos, limit, size;
    cursor buf;
    (void)self;
    if (argc != 3 || !PyBytes_Check(argv[0])) {
        PyErr_SetString(PyExc_TypeError, "scan_frames(buf: bytes, pos: int, limit: int)");
        return NULL;
    }
    buf = (cursor)PyBytes_AS_STRING(argv[0]);
    size = PyBytes_GET_SIZE(argv[0]);
    pos = PyLong_AsSsize_t(argv[1]);
    limit = PyLong_AsSsize_t(argv[2]);
    if ((pos == -1 || limit == -1) && PyErr_Occurred())
        return NULL;
    bodies = PyList_New(0);
    ends = PyList_New(0);
    if (bodies == NULL || ends == NULL)
        goto done;
    while (pos >= 0 && pos <= limit && pos < size) {
        Py_ssize_t length = buf[pos], body, end;
        PyObject *b, *e;
        if (0 < length && length < 0x80)
            body = pos + 1;
        else if (pos + 1 < size && length >= 0x80 && buf[pos + 1] < 0x80 &&
                 ((length & 0x7F) | (buf[pos + 1] << 7)) != 0) {
            length = (length & 0x7F) | ((Py_ssize_t)buf[pos + 1] << 7);
            body = pos + 2;
        }
        else
            break;
        end = body + length;
        if (end > size)
            break;
        b = PyLong_FromSsize_t(body);
        e = PyLong_FromSsize_t(end);
        if (b == NULL || e == NULL || PyList_Append(bodies, b) < 0 || PyList_Append(ends, e) < 0) {
            Py_XDECREF(b);
            Py_XDECREF(e);
            goto done;
        }
        Py_DECREF(b);
        Py_DECREF(e);
        pos = end;
    }
    result = Py_BuildValue("(OOn)", bodies, ends, pos);
done:
    Py_XDECREF(bodies);
    Py_XDECREF(ends);
    return result;
}

/* ------------------------------------------------------------------------
 * encode_node: encode.NodeWriter's encoder of a node given as a flat tuple
 * ------------------------------------------------------------------------ */

/* Node field tags (field << 3 | wire type). */
#define TAG_ID 0x08
#define TAG_CTRL_DEPS 0x22
#define TAG_DATA_DEPS 0x2A
#define TAG_START 0x30
#define TAG_DURATION 0x38
#define TAG_INPUTS 0x42
#define TAG_OUTPUTS 0x4A
/* The Node fields before the attribute values in a node tuple (NODE_FIELDS). */
#define NODE_FIELD_COUNT 9
#define INT64_PREFIXES 11 /* by varint length, 0..10 */
#define OUT_STACK 2048

/* Attribute names, interned once at import (a lookup by C string makes a str per call). */
static PyObject *IOINFO_TEXTS[4]; /* values, shapes, types, strides */
static PyObject *IOINFO_BODY, *IOINFO_SIZE; /* ioinfo, ioinfo_size */

/* The message being built: on the stack, on the heap past OUT_STACK. */
typedef struct {
    unsigned char *data;
    Py_ssize_t len, cap;
    unsigned char stack[OUT_STACK];
} Out;

static int
out_reserve(Out *o, Py_ssize_t more)
{
    unsigned char *grown;
    Py_ssize_t cap;
    if (o->len + more <= o->cap)
        return 1;
    cap = (o->len + more) * 2;
    if (o->data == o->stack) {
        grown = PyMem_Malloc((size_t)cap);
        if (grown != NULL)
            memcpy(grown, o->stack, (size_t)o->len);
    }
    else
        grown = PyMem_Realloc(o->data, (size_t)cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    o->data = grown;
    o->cap = cap;
    return 1;
}

static inline int
out_bytes(Out *o, const void *data, Py_ssize_t len)
{
    if (!out_reserve(o, len))
        return 0;
    memcpy(o->data + o->len, data, (size_t)len);
    o->len += len;
    return 1;
}

static inline int
varint_len(uint64_t v)
{
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline int
out_varint(Out *o, uint64_t v)
{
    if (!out_reserve(o, MAX_VARINT_BYTES))
        return 0;
    o->len += write_varint(o->data + o->len, v);
    return 1;
}

static inline int
out_byte(Out *o, unsigned char b)
{
    if (!out_reserve(o, 1))
        return 0;
    o->data[o->len++] = b;
    return 1;
}

/* A non-negative int that fits 64 bits: 1 and *v; 0 (no error set) otherwise. */
static int
as_u64(PyObject *x, uint64_t *v)
{
    if (!PyLong_Check(x))
        return 0;
    *v = PyLong_AsUnsignedLongLong(x);
    if (*v == (uint64_t)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* Each field writer returns 1 (written, or absent), 0 (the Python path
 * encodes this node) or -1 (a Python error is set). */

/* A truthy value's field (tag, varint); a falsy one is left out. */
static int
varint_field(Out *o, unsigned char tag, PyObject *x)
{
    uint64_t v;
    int truth = PyObject_IsTrue(x);
    if (truth <= 0)
        return truth < 0 ? -1 : 1;
    if (!as_u64(x, &v))
        return 0;
    return out_byte(o, tag) && out_varint(o, v) ? 1 : -1;
}

/* Data dependencies: (source id, kind) pairs, packed. */
static int
deps_field(Out *o, PyObject *deps)
{
    unsigned char packed[OUT_STACK];
    Py_ssize_t n, len = 0;
    int truth = PyObject_IsTrue(deps);
    if (truth <= 0)
        return truth < 0 ? -1 : 1;
    if (!PyList_Check(deps) && !PyTuple_Check(deps))
        return 0;
    n = PySequence_Fast_GET_SIZE(deps);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(deps, k);
        uint64_t source;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
            !as_u64(PyTuple_GET_ITEM(pair, 0), &source) || len + MAX_VARINT_BYTES > OUT_STACK)
            return 0;
        len += write_varint(packed + len, source);
    }
    return out_byte(o, TAG_DATA_DEPS) && out_varint(o, (uint64_t)len) &&
        out_bytes(o, packed, len) ? 1 : -1;
}

/* IOInfo given as its encoded body (``ioinfo``, first ``ioinfo_size`` bytes). */
static int
ioinfo_field(Out *o, unsigned char tag, PyObject *info)
{
    PyObject *body, *size_obj;
    uint64_t size;
    int ok;
    if (info == Py_None)
        return 1;
    body = PyObject_GetAttr(info, IOINFO_BODY);
    size_obj = body ? PyObject_GetAttr(info, IOINFO_SIZE) : NULL;
    if (body == NULL || size_obj == NULL) {
        Py_XDECREF(body);
        PyErr_Clear();
        return 0;
    }
    ok = PyBytes_Check(body) && as_u64(size_obj, &size) &&
        size <= (uint64_t)PyBytes_GET_SIZE(body);
    if (ok)
        ok = out_byte(o, tag) && out_varint(o, size) &&
            out_bytes(o, PyBytes_AS_STRING(body), (Py_ssize_t)size) ? 1 : -1;
    Py_DECREF(body);
    Py_DECREF(size_obj);
    return ok;
}

/* One attribute value: a repeating one through its table (a dict that
 * encodes a new value on a miss), an int64 one with its prefix by length. */
static int
attr_value(Out *o, PyObject *spec, PyObject *value)
{
    if (value == Py_None)
        return 1;
    if (PyTuple_Check(spec)) {
        int overflow = 0;
        long long v;
        uint64_t u;
        PyObject *prefix;
        if (!PyLong_Check(value) || PyTuple_GET_SIZE(spec) != INT64_PREFIXES)
            return 0;
        v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        u = (uint64_t)v;
        prefix = PyTuple_GET_ITEM(spec, varint_len(u));
        if (!PyBytes_Check(prefix))
            return 0;
        return out_bytes(o, PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix)) &&
            out_varint(o, u) ? 1 : -1;
    }
    else {
        /* A dict subclass's [] is a Python-level call: the dict's own lookup
         * first, its __missing__ (the table's encoder) only on a miss. */
        PyObject *field = PyDict_Check(spec) ? PyDict_GetItemWithError(spec, value) : NULL;
        int ok;
        if (field != NULL)
            Py_INCREF(field);
        else if (!PyErr_Occurred())
            field = PyObject_GetItem(spec, value);
        if (field == NULL) {
            PyErr_Clear(); /* the Python path raises it again, or encodes */
            return 0;
        }
        ok = PyBytes_Check(field) ?
            (out_bytes(o, PyBytes_AS_STRING(field), PyBytes_GET_SIZE(field)) ? 1 : -1) : 0;
        Py_DECREF(field);
        return ok;
    }
}

/* The fields of one node tuple: 1 encoded, 0 the Python path, -1 error. */
static int
node_message(Out *o, PyObject *names, PyObject *types, PyObject *attrs, PyObject *values)
{
    PyObject *const *item = &PyTuple_GET_ITEM(values, 0);
    PyObject *field;
    uint64_t v;
    int got, truth;
    Py_ssize_t n_attrs = PyTuple_GET_SIZE(attrs);
    if (PyTuple_GET_SIZE(values) < NODE_FIELD_COUNT + n_attrs)
        return 0;
    if ((got = varint_field(o, TAG_ID, item[0])) <= 0)
        return got;
    field = PyDict_GetItemWithError(names, item[1]); /* name -> its field (b"" for none) */
    if (field == NULL || !PyBytes_Check(field))
        return PyErr_Occurred() ? -1 : 0;
    if (!out_bytes(o, PyBytes_AS_STRING(field), PyBytes_GET_SIZE(field)))
        return -1;
    truth = PyObject_IsTrue(item[2]);
    if (truth < 0)
        return -1;
    if (truth) {
        field = PyDict_GetItemWithError(types, item[2]);
        if (field == NULL || !PyBytes_Check(field))
            return PyErr_Occurred() ? -1 : 0;
        if (!out_bytes(o, PyBytes_AS_STRING(field), PyBytes_GET_SIZE(field)))
            return -1;
    }
    if (item[3] != Py_None) { /* one control dependency, packed */
        if (!as_u64(item[3], &v))
            return 0;
        if (!out_byte(o, TAG_CTRL_DEPS) || !out_varint(o, (uint64_t)varint_len(v)) ||
            !out_varint(o, v))
            return -1;
    }
    if ((got = deps_field(o, item[4])) <= 0 || (got = varint_field(o, TAG_START, item[5])) <= 0 ||
        (got = varint_field(o, TAG_DURATION, item[6])) <= 0)
        return got;
    if ((got = ioinfo_field(o, TAG_INPUTS, item[7])) <= 0 ||
        (got = ioinfo_field(o, TAG_OUTPUTS, item[8])) <= 0)
        return got;
    for (Py_ssize_t k = 0; k < n_attrs; k++)
        if ((got = attr_value(o, PyTuple_GET_ITEM(attrs, k), item[NODE_FIELD_COUNT + k])) <= 0)
            return got;
    return 1;
}

/* Whether ``tables`` (a 3-tuple) holds what node_message reads: the name
 * and type dicts, the attribute tables' tuple. */
static int
node_tables(PyObject *tables)
{
    return PyDict_Check(PyTuple_GET_ITEM(tables, 0)) &&
        PyDict_Check(PyTuple_GET_ITEM(tables, 1)) && PyTuple_Check(PyTuple_GET_ITEM(tables, 2));
}

PyDoc_STRVAR(encode_node_doc,
"encode_node(tables, fallback, values) -> bytes\n\n"
"NodeWriter.encode in C: tables = (name -> name field, node type -> type\n"
"field, per attribute its value table (a dict) or its int64 prefixes by\n"
"varint length). A node it does not take goes to fallback(values).");

static PyObject *
encode_node(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    PyObject *tables, *fallback, *values, *result;
    Out o;
    int got;
    (void)self;
    if (argc != 3 || !PyTuple_Check(argv[0]) || PyTuple_GET_SIZE(argv[0]) != 3) {
        PyErr_SetString(PyExc_TypeError, "encode_node(tables, fallback, values)");
        return NULL;
    }
    tables = argv[0], fallback = argv[1], values = argv[2];
    if (!PyTuple_Check(values) || !node_tables(tables))
        return PyObject_CallOneArg(fallback, values);
    o.data = o.stack;
    o.len = 0;
    o.cap = OUT_STACK;
    got = node_message(&o, PyTuple_GET_ITEM(tables, 0), PyTuple_GET_ITEM(tables, 1),
                       PyTuple_GET_ITEM(tables, 2), values);
    if (got > 0)
        result = PyBytes_FromStringAndSize((const char *)o.data, o.len);
    else if (got == 0 && !PyErr_Occurred())
        result = PyObject_CallOneArg(fallback, values);
    else
        result = NULL;
    if (o.data != o.stack)
        PyMem_Free(o.data);
    return result;
}

/* ------------------------------------------------------------------------
 * frame_nodes: encode.NodeWriter.frame, a batch of node tuples framed
 * ------------------------------------------------------------------------ */

/* A typical CPU node's framed size, the batch's first guess per row: the
 * 25k-op benchmark's average is about 370 bytes; the buffer grows past it. */
#define FRAME_GUESS 512

/* The batch, built in the bytes object returned (grown in place by
 * _PyBytes_Resize: no copy at the end, no page touched twice). */
typedef struct {
    PyObject *bytes;
    Py_ssize_t len;
} Frames;

/* One message appended with its length varint in front: 1, or 0 with an error set. */
static int
frames_add(Frames *f, const void *message, Py_ssize_t len)
{
    Py_ssize_t need = f->len + MAX_VARINT_BYTES + len;
    unsigned char *at;
    Py_ssize_t n;
    if (need > PyBytes_GET_SIZE(f->bytes) && _PyBytes_Resize(&f->bytes, need * 2) < 0)
        return 0;
    at = (unsigned char *)PyBytes_AS_STRING(f->bytes) + f->len;
    n = write_varint(at, (uint64_t)len);
    memcpy(at + n, message, (size_t)len);
    f->len += n + len;
    return 1;
}

/* One row's frame: encoded here, or by fallback (always where tables is
 * NULL), then framed: 1, or -1 with a Python error set. */
static int
frame_row(Frames *f, Out *node, PyObject *tables, PyObject *fallback, PyObject *row)
{
    PyObject *message;
    int got = 0, ok;
    node->len = 0;
    if (tables != NULL && PyTuple_Check(row))
        got = node_message(node, PyTuple_GET_ITEM(tables, 0), PyTuple_GET_ITEM(tables, 1),
                           PyTuple_GET_ITEM(tables, 2), row);
    if (got > 0)
        return frames_add(f, node->data, node->len) ? 1 : -1;
    if (got < 0 || PyErr_Occurred())
        return -1;
    if ((message = PyObject_CallOneArg(fallback, row)) == NULL)
        return -1;
    if (!PyBytes_Check(message)) {
        PyErr_SetString(PyExc_TypeError, "frame_nodes: fallback must return bytes");
        ok = -1;
    }
    else
        ok = frames_add(f, PyBytes_AS_STRING(message), PyBytes_GET_SIZE(message)) ? 1 : -1;
    Py_DECREF(message);
    return ok;
}

PyDoc_STRVAR(frame_nodes_doc,
"frame_nodes(tables, fallback, rows) -> bytes\n\n"
"NodeWriter.frame in C: encode_node of each of rows (any iterable of node\n"
"tuples; same tables and fallback), each message after its length varint,\n"
"joined: a batch written as is, with no bytes object per node.");

static PyObject *
frame_nodes(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    PyObject *tables, *fallback, *rows;
    Frames f;
    Out node;
    int ok = 1;
    (void)self;
    if (argc != 3 || !PyTuple_Check(argv[0]) || PyTuple_GET_SIZE(argv[0]) != 3) {
        PyErr_SetString(PyExc_TypeError, "frame_nodes(tables, fallback, rows)");
        return NULL;
    }
    tables = argv[0], fallback = argv[1];
    /* list(rows) as the twin's map would iterate it (its error where not iterable) */
    rows = PyList_Check(argv[2]) || PyTuple_Check(argv[2]) ? Py_NewRef(argv[2])
        : PySequence_List(argv[2]);
    if (rows == NULL)
        return NULL;
    if (!node_tables(tables))
        tables = NULL; /* not tables C reads: every row goes to fallback */
    f.len = 0;
    f.bytes = PyBytes_FromStringAndSize(NULL, (PySequence_Fast_GET_SIZE(rows) + 1) * FRAME_GUESS);
    node.data = node.stack, node.len = 0, node.cap = OUT_STACK;
    /* The size is read again per row and each row held: fallback runs Python code. */
    ok = f.bytes != NULL;
    for (Py_ssize_t k = 0; ok > 0 && k < PySequence_Fast_GET_SIZE(rows); k++) {
        PyObject *row = PySequence_Fast_GET_ITEM(rows, k);
        Py_INCREF(row);
        ok = frame_row(&f, &node, tables, fallback, row);
        Py_DECREF(row);
    }
    if (node.data != node.stack)
        PyMem_Free(node.data);
    Py_DECREF(rows);
    if (ok <= 0 || _PyBytes_Resize(&f.bytes, f.len) < 0) {
        Py_XDECREF(f.bytes);
        return NULL;
    }
    return f.bytes;
}

/* ------------------------------------------------------------------------
 * deps_in_order: conversion.dep_table.DepTable.in_order over a chunk of ids
 * ------------------------------------------------------------------------ */

/* dep_table._MOVED: an array entry whose destination moved to the dict. */
#define DEP_MOVED 255

/* A view (``flags``, PyBUF_FORMAT among them) of an array.array of
 * ``format`` (``itemsize`` bytes an item) holding ``n`` items (any number
 * where n < 0); 0, nothing held, where it is not one. */
static int
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
static int
read_column(PyObject *obj, Py_buffer *view, const char *format, Py_ssize_t itemsize)
{
    return typed_view(obj, view, PyBUF_FORMAT, format, itemsize, -1);
}

/* The chunk's entries into ``out``: 1, 0 (one C does not read: the Python
 * walk takes the chunk) or -1 (error). ``*at``: the array position. */
static int
deps_chunk(PyObject *out, PyObject *ids, const int64_t *dsts, const int64_t *srcs,
           const unsigned char *kinds, Py_ssize_t end, PyObject *rest, PyObject *kind_objs,
           Py_ssize_t *at)
{
    Py_ssize_t i = *at, n_kinds = PyTuple_GET_SIZE(kind_objs);
    int with_rest = PyDict_GET_SIZE(rest) > 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(ids); k++) {
        PyObject *id = PyList_GET_ITEM(ids, k), *entry;
        int overflow = 0;
        long long dst;
        if (!PyLong_CheckExact(id))
            return 0;
        dst = PyLong_AsLongLongAndOverflow(id, &overflow);
        if (overflow)
            return 0;
        if (dst == -1 && PyErr_Occurred())
            return -1;
        if (with_rest) {
            entry = PyDict_GetItemWithError(rest, id);
            if (entry == NULL && PyErr_Occurred())
                return -1;
            if (entry != NULL && entry != Py_None) {
                if (PyList_Append(out, entry) < 0)
                    return -1;
                continue;
            }
        }
        while (i < end && dsts[i] < dst)
            i++;
        if (i < end && dsts[i] == dst && kinds[i] != DEP_MOVED) {
            PyObject *src, *pair, *deps;
            if (kinds[i] >= n_kinds)
                return 0;
            if ((src = PyLong_FromLongLong(srcs[i])) == NULL)
                return -1;
            pair = PyTuple_Pack(2, src, PyTuple_GET_ITEM(kind_objs, kinds[i]));
            Py_DECREF(src);
            deps = pair ? PyList_New(1) : NULL;
            if (deps == NULL) {
                Py_XDECREF(pair);
                return -1;
            }
            PyList_SET_ITEM(deps, 0, pair);
            entry = deps;
        }
        else
            entry = Py_NewRef(Py_None);
        if (PyList_Append(out, entry) < 0) {
            Py_DECREF(entry);
            return -1;
        }
        Py_DECREF(entry);
    }
    *at = i;
    return 1;
}

PyDoc_STRVAR(deps_in_order_doc,
"deps_in_order(ids, dsts, srcs, kinds, rest, kind_objs, at) -> (list, at) | None\n\n"
"DepTable._in_order_chunk in C: the entry (list or None) of each of ids (a list,\n"
"ascending), from the table's arrays (dsts, srcs: array('q'), kinds:\n"
"array('B')) walked from position at, or its dict rest; kind_objs: EdgeKind by\n"
"value. Returns the entries and the position to go on from; None where the\n"
"arguments are not what C reads (the Python walk takes the chunk).");

static PyObject *
deps_in_order(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    Py_buffer views[3];
    PyObject *out, *result = NULL;
    Py_ssize_t at, end;
    int opened = 0, got = 0;
    (void)self;
    if (argc != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "deps_in_order(ids, dsts, srcs, kinds, rest, kind_objs, at)");
        return NULL;
    }
    at = PyLong_AsSsize_t(argv[6]);
    if (at == -1 && PyErr_Occurred())
        return NULL;
    if (!PyList_Check(argv[0]) || !PyDict_Check(argv[4]) || !PyTuple_Check(argv[5]) || at < 0)
        Py_RETURN_NONE;
    opened = read_column(argv[1], &views[0], "q", 8);
    opened += opened == 1 && read_column(argv[2], &views[1], "q", 8);
    opened += opened == 2 && read_column(argv[3], &views[2], "B", 1);
    end = views[0].len / 8;
    if (opened == 3 && views[1].len / 8 == end && views[2].len == end && at <= end &&
        (out = PyList_New(0)) != NULL) {
        got = deps_chunk(out, argv[0], views[0].buf, views[1].buf, views[2].buf, end,
                         argv[4], argv[5], &at);
        if (got > 0)
            result = Py_BuildValue("(Nn)", out, at);
        else
            Py_DECREF(out);
    }
    for (int k = 0; k < opened; k++)
        PyBuffer_Release(&views[k]);
    if (result == NULL && got == 0 && !PyErr_Occurred())
        Py_RETURN_NONE;
    return result;
}

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
 * shared_io: a host op's inputs or outputs as the IOInfo body the writer
 * copies (host_trace._nested_to_op; encode.ioinfo_body's layout)
 * ------------------------------------------------------------------------ */

/* IOInfo field tags: values = 1, shapes = 2, types = 3 (length-delimited). */
static const unsigned char IOINFO_TAGS[3] = {0x0A, 0x12, 0x1A};

/* Append ``text`` (a bytes-like JSON text) as field ``tag``, or nothing if empty. */
static int
append_text(Out *o, unsigned char tag, PyObject *text, Py_ssize_t *len)
{
    Py_buffer view;
    int ok = 1;
    if (PyObject_GetBuffer(text, &view, PyBUF_SIMPLE) < 0)
        return 0;
    if (tag == 0) /* the tail: kept after the body, not a field */
        ok = out_bytes(o, view.buf, view.len);
    else if (view.len)
        ok = out_byte(o, tag) && out_varint(o, (uint64_t)view.len) &&
            out_bytes(o, view.buf, view.len);
    *len = view.len;
    PyBuffer_Release(&view);
    return ok;
}

PyDoc_STRVAR(shared_io_doc,
"shared_io(io, cls, shared) -> cls\n\n"
"cls(body, size) for io's values/shapes/types texts as an IOInfo body\n"
"(encode.ioinfo_body) followed by its strides, size the body's length; the\n"
"one equal to it in ``shared`` if any (``shared.setdefault``).");

/* cls(body, size) of the IOInfo body built in ``o`` (its last ``tail``
 * bytes the strides, after the body), the equal one in ``shared`` if any;
 * new reference. */
static PyObject *
io_made(const Out *o, Py_ssize_t tail, PyObject *cls, PyObject *shared)
{
    PyObject *args[2], *made, *result = NULL;
    args[0] = PyBytes_FromStringAndSize((const char *)o->data, o->len);
    args[1] = PyLong_FromSsize_t(o->len - tail);
    if (args[0] != NULL && args[1] != NULL &&
        (made = PyObject_Vectorcall(cls, args, 2, NULL)) != NULL) {
        result = PyDict_SetDefault(shared, made, made); /* borrowed */
        Py_XINCREF(result);
        Py_DECREF(made);
    }
    Py_XDECREF(args[0]);
    Py_XDECREF(args[1]);
    return result;
}

/* io's texts as cls(body, size), the equal one in ``shared`` if any; new reference. */
static PyObject *
shared_io_of(PyObject *io, PyObject *cls, PyObject *shared)
{
    PyObject *text, *result = NULL;
    Py_ssize_t len = 0;
    Out o;
    o.data = o.stack;
    o.len = 0;
    o.cap = OUT_STACK;
    for (int k = 0; k < 4; k++) {
        int ok;
        text = PyObject_GetAttr(io, IOINFO_TEXTS[k]);
        if (text == NULL)
            goto done;
        ok = append_text(&o, k < 3 ? IOINFO_TAGS[k] : 0, text, &len);
        Py_DECREF(text);
        if (!ok)
            goto done;
    }
    result = io_made(&o, len, cls, shared); /* len: the strides' */
done:
    if (o.data != o.stack)
        PyMem_Free(o.data);
    return result;
}

static PyObject *
shared_io(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    (void)self;
    if (argc != 3 || !PyDict_Check(argv[2])) {
        PyErr_SetString(PyExc_TypeError, "shared_io(io, cls, shared: dict)");
        return NULL;
    }
    return shared_io_of(argv[0], argv[1], argv[2]);
}

/* ------------------------------------------------------------------------
 * host_ops: host ET nodes of the nested layouts as HostOps
 * (host_decode._nested_to_op), for ops whose attrs are the observer's own
 * list: the lifted seven, then kernel_backend, kernel_file (and
 * tensor_range), these empty; written as torch writes them:
 *   [{"name": "rf_id", "type": "uint64", "value": 3}, ...]
 * (each object's keys in that order, strings without escapes, integers of
 * at most 18 digits). Anything else stops the run for the Python twin.
 * ------------------------------------------------------------------------ */

#define OBSERVER_ATTRS 10
#define OBSERVER_LIFTED 7
#define OBSERVER_INT_ATTRS 6 /* the lifted ones before op_schema */
#define MAX_INT_DIGITS 18    /* fits int64 whatever its digits */
static const char *const OBSERVER_NAMES[OBSERVER_ATTRS] = {
    "rf_id", "fw_parent", "seq_id", "scope", "tid", "fw_tid", "op_schema",
    "kernel_backend", "kernel_file", "tensor_range"};
/* Each attr's text up to its value exactly as torch writes it: matched whole
 * (one memcmp), else read token by token (the same text, spaced otherwise). */
static const char *const OBSERVER_HEADS[OBSERVER_ATTRS] = {
    "{\"name\": \"rf_id\", \"type\": \"uint64\", \"value\": ",
    "{\"name\": \"fw_parent\", \"type\": \"uint64\", \"value\": ",
    "{\"name\": \"seq_id\", \"type\": \"int64\", \"value\": ",
    "{\"name\": \"scope\", \"type\": \"uint64\", \"value\": ",
    "{\"name\": \"tid\", \"type\": \"uint64\", \"value\": ",
    "{\"name\": \"fw_tid\", \"type\": \"uint64\", \"value\": ",
    "{\"name\": \"op_schema\", \"type\": \"string\", \"value\": ",
    "{\"name\": \"kernel_backend\", \"type\": \"string\", \"value\": ",
    "{\"name\": \"kernel_file\", \"type\": \"string\", \"value\": ",
    "{\"name\": \"tensor_range\", \"type\": \"string\", \"value\": "};
static size_t OBSERVER_HEAD_LENS[OBSERVER_ATTRS]; /* filled at import */
static PyObject *NODE_FIELDS[6]; /* id, name, ctrl_deps, inputs, outputs, attrs */
enum { NF_ID, NF_NAME, NF_CTRL_DEPS, NF_INPUTS, NF_OUTPUTS, NF_ATTRS };

static inline int
json_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static inline void
skip_ws(cursor *p, cursor end)
{
    while (*p < end && json_ws(**p))
        (*p)++;
}

/* ``c`` after any whitespace. */
static inline int
expect_char(cursor *p, cursor end, unsigned char c)
{
    skip_ws(p, end);
    if (*p >= end || **p != c)
        return 0;
    (*p)++;
    return 1;
}

/* A string without escapes or control characters (ASCII only where
 * ``ascii``), its text in [start, start + len). */
static inline int
plain_string(cursor *p, cursor end, int ascii, cursor *start, Py_ssize_t *len)
{
    cursor q;
    if (!expect_char(p, end, '"'))
        return 0;
    q = *p;
    while (q < end && *q != '"') {
        if (*q == '\\' || *q < 0x20 || (ascii && *q >= 0x80))
            return 0;
        q++;
    }
    if (q >= end)
        return 0;
    *start = *p;
    *len = q - *p;
    *p = q + 1;
    return 1;
}

/* A string whose escapes, if any, are the two-character ones (\" \\ \/ \b
 * \f \n \r \t), no control characters (ASCII only where ``ascii``): its
 * text as written in [start, start + len), *escaped set where it has any. */
static inline int
escaped_string(cursor *p, cursor end, int ascii, cursor *start, Py_ssize_t *len, int *escaped)
{
    cursor q;
    *escaped = 0;
    if (!expect_char(p, end, '"'))
        return 0;
    q = *p;
    while (q < end && *q != '"') {
        if (*q == '\\') {
            if (q + 1 >= end || memchr("\"\\/bfnrt", q[1], 8) == NULL)
                return 0;
            *escaped = 1;
            q += 2;
            continue;
        }
        if (*q < 0x20 || (ascii && *q >= 0x80))
            return 0;
        q++;
    }
    if (q >= end)
        return 0;
    *start = *p;
    *len = q - *p;
    *p = q + 1;
    return 1;
}

/* Escaped strings up to this long are unescaped on the stack. */
#define TEXT_STACK 512

/* The str of a string read by escaped_string (UTF-8, strictly); new reference. */
static PyObject *
string_text(cursor start, Py_ssize_t len, int escaped)
{
    char stack[TEXT_STACK], *buf;
    Py_ssize_t n = 0;
    PyObject *text;
    if (!escaped)
        return PyUnicode_DecodeUTF8((const char *)start, len, "strict");
    buf = len <= TEXT_STACK ? stack : PyMem_Malloc((size_t)len);
    if (buf == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < len; i++) {
        unsigned char c = start[i];
        if (c == '\\') {
            switch (c = start[++i]) {
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            default: break; /* " \ / stand for themselves */
            }
        }
        buf[n++] = (char)c;
    }
    text = PyUnicode_DecodeUTF8(buf, n, "strict");
    if (buf != stack)
        PyMem_Free(buf);
    return text;
}

/* The string ``want`` exactly, as a plain string. */
static inline int
expect_string(cursor *p, cursor end, const char *want)
{
    cursor start;
    Py_ssize_t len;
    return plain_string(p, end, 1, &start, &len) && (size_t)len == strlen(want) &&
        memcmp(start, want, (size_t)len) == 0;
}

/* A JSON integer of at most MAX_INT_DIGITS digits, no leading zero, not -0. */
static inline int
plain_int(cursor *p, cursor end, int64_t *out)
{
    int neg = 0, digits = 0;
    int64_t v = 0;
    skip_ws(p, end);
    if (*p < end && **p == '-') {
        neg = 1;
        (*p)++;
    }
    while (*p < end && **p >= '0' && **p <= '9') {
        if (++digits > MAX_INT_DIGITS || (digits == 2 && v == 0))
            return 0;
        v = v * 10 + (**p - '0');
        (*p)++;
    }
    if (digits == 0 || (neg && v == 0))
        return 0;
    if (*p < end && !json_ws(**p) && **p != '}' && **p != ',')
        return 0; /* a fraction, an exponent or junk */
    *out = neg ? -v : v;
    return 1;
}

/* The observer's attrs list at *p, up to its ']' (*p moved past it): the
 * six integers and op_schema's text; 0 where they are anything else. */
static int
observer_list(cursor *at, cursor end, int64_t *ints, cursor *schema, Py_ssize_t *schema_len,
              int *schema_escaped)
{
    int count = 0;
    cursor p = *at;
    if (!expect_char(&p, end, '['))
        return 0;
    for (;;) {
        cursor text;
        Py_ssize_t len;
        skip_ws(&p, end);
        if (count < OBSERVER_ATTRS && (size_t)(end - p) > OBSERVER_HEAD_LENS[count] &&
            memcmp(p, OBSERVER_HEADS[count], OBSERVER_HEAD_LENS[count]) == 0)
            p += OBSERVER_HEAD_LENS[count];
        else if (count == OBSERVER_ATTRS || !expect_char(&p, end, '{') ||
            !expect_string(&p, end, "name") || !expect_char(&p, end, ':') ||
            !expect_string(&p, end, OBSERVER_NAMES[count]) || !expect_char(&p, end, ',') ||
            !expect_string(&p, end, "type") || !expect_char(&p, end, ':') ||
            !plain_string(&p, end, 1, &text, &len) || !expect_char(&p, end, ',') ||
            !expect_string(&p, end, "value") || !expect_char(&p, end, ':'))
            return 0;
        if (count < OBSERVER_INT_ATTRS) {
            if (!plain_int(&p, end, &ints[count]))
                return 0;
        }
        else {
            int escaped;
            if (!escaped_string(&p, end, 0, &text, &len, &escaped))
                return 0;
            if (count == OBSERVER_LIFTED - 1) {
                *schema = text;
                *schema_len = len;
                *schema_escaped = escaped;
            }
            else if (len) /* a kernel or tensor range: an extra, the twin's */
                return 0;
        }
        if (!expect_char(&p, end, '}'))
            return 0;
        count++;
        skip_ws(&p, end);
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (!expect_char(&p, end, ']'))
            return 0;
        break;
    }
    *at = p;
    return count == OBSERVER_LIFTED || count == OBSERVER_ATTRS - 1 || count == OBSERVER_ATTRS;
}

/* The observer's attrs in [p, end), nothing after the list. */
static int
observer_attrs(cursor p, cursor end, int64_t *ints, cursor *schema, Py_ssize_t *schema_len,
               int *schema_escaped)
{
    if (!observer_list(&p, end, ints, schema, schema_len, schema_escaped))
        return 0;
    skip_ws(&p, end);
    return p == end;
}

/* ``text`` as the one equal string ``strings`` holds (``share`` adds it). */
static PyObject *
shared_string(PyObject *text, PyObject *strings, PyObject *share)
{
    PyObject *found = PyDict_GetItemWithError(strings, text);
    if (found != NULL) {
        Py_INCREF(found);
        return found;
    }
    if (PyErr_Occurred())
        return NULL;
    return PyObject_CallOneArg(share, text);
}

/* args[j] (a new reference) as its shared string, in place; 0 on error. */
static int
share_arg(PyObject **args, int j, PyObject *const *ctx)
{
    PyObject *text = args[j];
    args[j] = shared_string(text, ctx[3], ctx[4]);
    Py_DECREF(text);
    return args[j] != NULL;
}

/* HostOp(id, name, parent, tid, rf_id, fw_parent, seq_id, scope, fw_tid,
 * op_schema, inputs, outputs, attrs) of ``args``: new references, released
 * here, 3..8 and 12 left NULL (filled from ``ints`` and with no_extras). */
static PyObject *
finish_host_op(PyObject **args, const int64_t *ints, PyObject *const *ctx)
{
    /* args[3 + k] is ints[INT_ARG[k]]: tid, rf_id, fw_parent, seq_id, scope, fw_tid */
    static const int INT_ARG[OBSERVER_INT_ATTRS] = {4, 0, 1, 2, 3, 5};
    PyObject *no_extras = ctx[5], *result = NULL;
    for (int k = 0; k < OBSERVER_INT_ATTRS; k++)
        if ((args[3 + k] = PyLong_FromLongLong(ints[INT_ARG[k]])) == NULL)
            goto done;
    args[12] = Py_NewRef(no_extras);
    result = PyObject_Vectorcall(ctx[2], args, 13, NULL);
done:
    for (int k = 0; k < 13; k++)
        Py_XDECREF(args[k]);
    return result;
}

/* One node's HostOp; Py_None (a new reference) where the twin must take it. */
static PyObject *
host_op(PyObject *node, PyObject *const *ctx)
{
    PyObject *shared = ctx[0], *io_cls = ctx[1];
    PyObject *args[13] = {NULL}, *attrs, *text;
    Py_buffer view;
    int64_t ints[OBSERVER_INT_ATTRS];
    cursor schema = NULL;
    Py_ssize_t schema_len = 0;
    int ok, escaped = 0;
    attrs = PyObject_GetAttr(node, NODE_FIELDS[NF_ATTRS]);
    if (attrs == NULL)
        return NULL;
    if (PyObject_GetBuffer(attrs, &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(attrs);
        return NULL;
    }
    ok = observer_attrs((cursor)view.buf, (cursor)view.buf + view.len, ints, &schema,
                        &schema_len, &escaped);
    text = ok ? string_text(schema, schema_len, escaped) : NULL;
    PyBuffer_Release(&view);
    Py_DECREF(attrs);
    if (text == NULL) {
        if (ok && !PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    args[9] = text;
    /* the name shared first, then op_schema, as the twin does */
    if ((args[1] = PyObject_GetAttr(node, NODE_FIELDS[NF_NAME])) == NULL ||
        !share_arg(args, 1, ctx) || !share_arg(args, 9, ctx) ||
        (args[0] = PyObject_GetAttr(node, NODE_FIELDS[NF_ID])) == NULL ||
        (args[2] = PyObject_GetAttr(node, NODE_FIELDS[NF_CTRL_DEPS])) == NULL)
        goto fail;
    for (int k = 0; k < 2; k++) {
        PyObject *io = PyObject_GetAttr(node, NODE_FIELDS[k ? NF_OUTPUTS : NF_INPUTS]);
        if (io == NULL)
            goto fail;
        args[10 + k] = shared_io_of(io, io_cls, shared);
        Py_DECREF(io);
        if (args[10 + k] == NULL)
            goto fail;
    }
    return finish_host_op(args, ints, ctx);
fail:
    for (int k = 0; k < 13; k++)
        Py_XDECREF(args[k]);
    return NULL;
}

/* ``op`` (a new reference; NULL: an error, Py_None: the twin's) appended
 * to ``ops``: 1 appended, 0 the twin's, -1 error. */
static int
take_op(PyObject *ops, PyObject *op)
{
    int bad;
    if (op == NULL)
        return -1;
    if (op == Py_None) {
        Py_DECREF(op);
        return 0;
    }
    bad = PyList_Append(ops, op);
    Py_DECREF(op);
    return bad ? -1 : 1;
}

PyDoc_STRVAR(host_ops_doc,
"host_ops(nodes, start, ops, shared, io_cls, op_cls, strings, share, no_extras) -> int\n\n"
"Append to ops the HostOp of nodes[start], nodes[start + 1], ... while each\n"
"one's attrs are the observer's plain list (see _fast.c); the index of the\n"
"first node left to host_decode._nested_to_op (len(nodes) when none).");

static PyObject *
host_ops(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    PyObject *nodes, *ops;
    Py_ssize_t i, n;
    (void)self;
    if (argc != 9 || !PyList_Check(argv[0]) || !PyList_Check(argv[2]) ||
        !PyDict_Check(argv[3]) || !PyDict_Check(argv[6])) {
        PyErr_SetString(PyExc_TypeError, "host_ops(nodes: list, start: int, ops: list, "
                        "shared: dict, io_cls, op_cls, strings: dict, share, no_extras)");
        return NULL;
    }
    nodes = argv[0], ops = argv[2];
    i = PyLong_AsSsize_t(argv[1]);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    n = PyList_GET_SIZE(nodes);
    for (; i >= 0 && i < n; i++) {
        int got = take_op(ops, host_op(PyList_GET_ITEM(nodes, i), argv + 3));
        if (got < 0)
            return NULL;
        if (got == 0)
            break;
    }
    return PyLong_FromSsize_t(i);
}

/* ------------------------------------------------------------------------
 * nested_ops: a slice of a nested-layout host ET's ``nodes`` (a JSON array,
 * as json_slices hands it out) read straight into HostOps, in one pass over
 * its text: what msgspec's decode into host_decode._NestedNode and host_ops
 * do in two (the twin: host_decode.decode_nodes, then normalise). Every
 * node must be plain: keys among id, name, ctrl_deps, inputs, outputs,
 * attrs, each once, strings whose escapes are the two-character ones (an
 * inputs/outputs value's strings ASCII), ids that are plain non-negative
 * integers, attrs the observer's list (observer_list). Such text is valid
 * JSON that msgspec reads the same way; anything else, anywhere in the
 * slice, leaves ``ops`` as it was for the twin, which gives its result or
 * names the problem.
 * ------------------------------------------------------------------------ */

#define MAX_NODE_ID ((int64_t)1 << 62) /* host_decode.MAX_ID */
/* Nesting of an inputs/outputs value read here; deeper ones (none in real
 * traces) go to msgspec, whose recursion limit names them. */
#define MAX_JSON_DEPTH 64
/* Digits of a number's integer or fraction part read here: longer ones go
 * to msgspec, which decides what they are. */
#define MAX_NUMBER_DIGITS 40
#define MAX_EXPONENT_DIGITS 3

typedef struct {
    cursor start;
    Py_ssize_t len;
} Span;

static int skip_value(cursor *p, cursor end, int depth);

/* A string at *p ('"'): ASCII, no control characters, escapes only the
 * two-character ones. */
static int
skip_string(cursor *p, cursor end)
{
    cursor q = *p + 1;
    while (q < end) {
        unsigned char c = *q++;
        if (c == '"') {
            *p = q;
            return 1;
        }
        if (c < 0x20 || c >= 0x80)
            return 0;
        if (c == '\\') {
            if (q >= end || memchr("\"\\/bfnrt", *q, 8) == NULL)
                return 0;
            q++;
        }
    }
    return 0;
}

/* Digits at *p: how many (at most MAX_NUMBER_DIGITS + 1). */
static inline int
skip_digits(cursor *p, cursor end, int most)
{
    int n = 0;
    while (*p < end && **p >= '0' && **p <= '9' && n <= most) {
        (*p)++;
        n++;
    }
    return n;
}

/* A JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int
skip_number(cursor *p, cursor end)
{
    cursor q = *p;
    int n;
    if (q < end && *q == '-')
        q++;
    if (q < end && *q == '0')
        q++;
    else if ((n = skip_digits(&q, end, MAX_NUMBER_DIGITS)) == 0 || n > MAX_NUMBER_DIGITS)
        return 0;
    if (q < end && *q == '.') {
        q++;
        if ((n = skip_digits(&q, end, MAX_NUMBER_DIGITS)) == 0 || n > MAX_NUMBER_DIGITS)
            return 0;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < end && (*q == '+' || *q == '-'))
            q++;
        if ((n = skip_digits(&q, end, MAX_EXPONENT_DIGITS)) == 0 || n > MAX_EXPONENT_DIGITS)
            return 0;
    }
    if (q < end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E' ||
                    *q == '+' || *q == '-'))
        return 0;
    *p = q;
    return 1;
}

static int
skip_literal(cursor *p, cursor end, const char *word, size_t len)
{
    if ((size_t)(end - *p) < len || memcmp(*p, word, len) != 0)
        return 0;
    *p += len;
    return 1;
}

/* Any JSON value at *p (no whitespace before it), *p moved past it. */
static int
skip_value(cursor *p, cursor end, int depth)
{
    unsigned char open, close;
    if (*p >= end)
        return 0;
    switch (**p) {
    case '"':
        return skip_string(p, end);
    case 't':
        return skip_literal(p, end, "true", 4);
    case 'f':
        return skip_literal(p, end, "false", 5);
    case 'n':
        return skip_literal(p, end, "null", 4);
    case '[':
    case '{':
        break;
    default:
        return skip_number(p, end);
    }
    if (depth >= MAX_JSON_DEPTH)
        return 0;
    open = **p;
    close = open == '[' ? ']' : '}';
    (*p)++;
    skip_ws(p, end);
    if (*p < end && **p == close) {
        (*p)++;
        return 1;
    }
    for (;;) {
        if (open == '{') {
            if (*p >= end || **p != '"' || !skip_string(p, end) || !expect_char(p, end, ':'))
                return 0;
            skip_ws(p, end);
        }
        if (!skip_value(p, end, depth + 1))
            return 0;
        skip_ws(p, end);
        if (*p < end && **p == ',') {
            (*p)++;
            skip_ws(p, end);
            continue;
        }
        if (*p < end && **p == close) {
            (*p)++;
            return 1;
        }
        return 0;
    }
}

/* ``key`` (a plain string's text) as its index in ``keys``, or -1. */
static int
key_index(cursor key, Py_ssize_t len, const char *const *keys, int count)
{
    for (int k = 0; k < count; k++)
        if ((size_t)len == strlen(keys[k]) && memcmp(key, keys[k], (size_t)len) == 0)
            return k;
    return -1;
}

/* An object's members, each key in ``keys`` at most once: calls
 * read(k, p, end, data) at each value; the keys seen, as bits, or -1. */
typedef int (*MemberReader)(int k, cursor *p, cursor end, void *data);

static long
read_members(cursor *p, cursor end, const char *const *keys, int count, MemberReader read,
             void *data)
{
    long seen = 0;
    if (!expect_char(p, end, '{'))
        return -1;
    skip_ws(p, end);
    if (*p < end && **p == '}') {
        (*p)++;
        return 0;
    }
    for (;;) {
        cursor key;
        Py_ssize_t len;
        int k;
        if (!plain_string(p, end, 1, &key, &len) || !expect_char(p, end, ':') ||
            (k = key_index(key, len, keys, count)) < 0 || (seen & (1L << k)))
            return -1;
        seen |= 1L << k;
        skip_ws(p, end);
        if (!read(k, p, end, data))
            return -1;
        skip_ws(p, end);
        if (*p < end && **p == ',') {
            (*p)++;
            continue;
        }
        if (*p < end && **p == '}') {
            (*p)++;
            return seen;
        }
        return -1;
    }
}

/* host_decode._RawIO's fields, in IOINFO_TEXTS order. */
static const char *const IO_KEYS[4] = {"values", "shapes", "types", "strides"};

static int
read_io_member(int k, cursor *p, cursor end, void *data)
{
    Span *span = (Span *)data + k;
    span->start = *p;
    if (!skip_value(p, end, 0))
        return 0;
    span->len = *p - span->start;
    return 1;
}

/* The IOInfo body of the four texts (as shared_io_of builds it from
 * _RawIO), as cls(body, size), the equal one in ``shared`` if any. */
static PyObject *
io_of_spans(const Span *spans, PyObject *cls, PyObject *shared)
{
    PyObject *result = NULL;
    int ok = 1;
    Out o;
    o.data = o.stack;
    o.len = 0;
    o.cap = OUT_STACK;
    for (int k = 0; k < 3 && ok; k++)
        if (spans[k].len)
            ok = out_byte(&o, IOINFO_TAGS[k]) && out_varint(&o, (uint64_t)spans[k].len) &&
                out_bytes(&o, spans[k].start, spans[k].len);
    if (ok && spans[3].len)
        ok = out_bytes(&o, spans[3].start, spans[3].len);
    if (ok)
        result = io_made(&o, spans[3].len, cls, shared);
    if (o.data != o.stack)
        PyMem_Free(o.data);
    return result;
}

/* Names and schemas met in one slice, by their text as written: a node's
 * repeat an earlier one's (a GPT step has a few hundred distinct of each in
 * 25k ops), so most take no decode, hash or lookup of a str. A power of 2. */
#define TEXT_CACHE 512

typedef struct {
    uint64_t hash;
    cursor raw; /* in the slice's buffer, valid for the call */
    Py_ssize_t len;
    PyObject *text; /* the shared string */
} TextSlot;

/* A text's slot key from its length and its first and last 8 bytes (the
 * slot's memcmp decides): hashing every byte cost what the cache saved. */
static inline uint64_t
text_key(cursor p, Py_ssize_t len)
{
    uint64_t head = 0, tail = 0, key;
    memcpy(&head, p, (size_t)(len < 8 ? len : 8));
    if (len > 8)
        memcpy(&tail, p + len - 8, 8);
    key = head * 0x9E3779B97F4A7C15ULL ^ (tail + (uint64_t)len) * 0xC2B2AE3D27D4EB4FULL;
    return key ^ (key >> 29);
}

/* The shared string (``strings``, ``share``) of a string read by
 * escaped_string; the cache's where it met the same text. New reference. */
static PyObject *
cached_text(TextSlot *cache, cursor raw, Py_ssize_t len, int escaped, PyObject *const *ctx)
{
    uint64_t hash = text_key(raw, len);
    TextSlot *slot = &cache[hash & (TEXT_CACHE - 1)];
    PyObject *text, *shared;
    if (slot->text != NULL && slot->hash == hash && slot->len == len &&
        memcmp(slot->raw, raw, (size_t)len) == 0)
        return Py_NewRef(slot->text);
    text = string_text(raw, len, escaped);
    if (text == NULL)
        return NULL;
    shared = shared_string(text, ctx[3], ctx[4]);
    Py_DECREF(text);
    if (shared == NULL)
        return NULL;
    Py_XSETREF(slot->text, Py_NewRef(shared));
    slot->hash = hash;
    slot->raw = raw;
    slot->len = len;
    return shared;
}

/* One node's fields as read from its text. */
typedef struct {
    int64_t ids[2]; /* id, ctrl_deps */
    cursor name, schema;
    Py_ssize_t name_len, schema_len;
    int name_escaped, schema_escaped;
    Span io[2][4]; /* inputs, outputs */
    int64_t ints[OBSERVER_INT_ATTRS];
} NodeText;

static const char *const NODE_KEYS[6] = {"id", "name", "ctrl_deps", "inputs", "outputs",
                                         "attrs"};
/* The keys a node must have (the twin's required fields, and attrs, without
 * which an op is not the observer's plain one). */
#define NODE_KEYS_NEEDED ((1L << NF_ID) | (1L << NF_NAME) | (1L << NF_CTRL_DEPS) | \
                          (1L << NF_ATTRS))

static int
read_node_member(int k, cursor *p, cursor end, void *data)
{
    NodeText *n = (NodeText *)data;
    switch (k) {
    case NF_ID:
    case NF_CTRL_DEPS: {
        int64_t *v = &n->ids[k == NF_ID ? 0 : 1];
        return plain_int(p, end, v) && *v >= 0 && *v <= MAX_NODE_ID;
    }
    case NF_NAME:
        return escaped_string(p, end, 0, &n->name, &n->name_len, &n->name_escaped);
    case NF_INPUTS:
    case NF_OUTPUTS:
        return read_members(p, end, IO_KEYS, 4, read_io_member,
                            n->io[k == NF_INPUTS ? 0 : 1]) >= 0;
    default: /* NF_ATTRS */
        return observer_list(p, end, n->ints, &n->schema, &n->schema_len, &n->schema_escaped);
    }
}

/* The node at *p as a HostOp; Py_None (a new reference) where the twin
 * must read it. */
static PyObject *
nested_op(cursor *p, cursor end, PyObject *const *ctx, TextSlot *cache)
{
    PyObject *args[13] = {NULL};
    NodeText n;
    long seen;
    memset(&n, 0, sizeof n);
    seen = read_members(p, end, NODE_KEYS, 6, read_node_member, &n);
    if (seen < 0 || (seen & NODE_KEYS_NEEDED) != NODE_KEYS_NEEDED)
        Py_RETURN_NONE;
    /* the name first, then op_schema, as the twin shares them */
    args[1] = cached_text(cache, n.name, n.name_len, n.name_escaped, ctx);
    args[9] = args[1] == NULL ? NULL :
        cached_text(cache, n.schema, n.schema_len, n.schema_escaped, ctx);
    if (args[9] == NULL) {
        Py_XDECREF(args[1]);
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if ((args[0] = PyLong_FromLongLong(n.ids[0])) == NULL ||
        (args[2] = PyLong_FromLongLong(n.ids[1])) == NULL ||
        (args[10] = io_of_spans(n.io[0], ctx[1], ctx[0])) == NULL ||
        (args[11] = io_of_spans(n.io[1], ctx[1], ctx[0])) == NULL) {
        for (int k = 0; k < 13; k++)
            Py_XDECREF(args[k]);
        return NULL;
    }
    return finish_host_op(args, n.ints, ctx);
}

static void
texts_clear(TextSlot *cache)
{
    for (int k = 0; k < TEXT_CACHE; k++)
        Py_CLEAR(cache[k].text);
}

PyDoc_STRVAR(nested_ops_doc,
"nested_ops(nodes, ops, shared, io_cls, op_cls, strings, share, no_extras) -> int\n\n"
"Append to ops the HostOp of each node of ``nodes`` (a JSON array's text, the\n"
"nested layout) while the nodes are plain (see _fast.c); the offset of the\n"
"first node not taken (its '{', or where the array should go on), -1 when\n"
"every node was and the array closed, 0 when the text does not open one.");

static PyObject *
nested_ops(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    PyObject *ops;
    Py_buffer view;
    cursor p, end, at;
    int closed = 0, all = 0; /* all: every node taken, the array closed, nothing after */
    TextSlot cache[TEXT_CACHE];
    memset(cache, 0, sizeof cache);
    (void)self;
    if (argc != 8 || !PyList_Check(argv[1]) || !PyDict_Check(argv[2]) ||
        !PyDict_Check(argv[5])) {
        PyErr_SetString(PyExc_TypeError, "nested_ops(nodes, ops: list, shared: dict, io_cls, "
                        "op_cls, strings: dict, share, no_extras)");
        return NULL;
    }
    ops = argv[1];
    if (PyObject_GetBuffer(argv[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    at = p = (cursor)view.buf;
    end = p + view.len;
    if (expect_char(&p, end, '[')) {
        skip_ws(&p, end);
        at = p;
        closed = p < end && *p == ']'; /* no node */
        while (!closed) {
            int got = take_op(ops, nested_op(&p, end, argv + 2, cache));
            if (got < 0) {
                PyBuffer_Release(&view);
                texts_clear(cache);
                return NULL;
            }
            if (got == 0)
                break;
            skip_ws(&p, end);
            if (p < end && *p == ',') {
                p++;
                skip_ws(&p, end);
                at = p;
                continue;
            }
            at = p; /* the array's end, or what the twin will call an error */
            closed = p < end && *p == ']';
            break;
        }
        if (closed) {
            p++;
            skip_ws(&p, end);
            all = p == end;
        }
    }
    PyBuffer_Release(&view);
    texts_clear(cache);
    return PyLong_FromSsize_t(all ? -1 : at - (cursor)view.buf);
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

/* A writable buffer of ``n`` items of ``format`` (an ``array.array`` of
 * that typecode); 0 where it is not. */
static int
column(PyObject *obj, Py_buffer *view, const char *format, Py_ssize_t itemsize, Py_ssize_t n)
{
    return typed_view(obj, view, PyBUF_FORMAT | PyBUF_WRITABLE, format, itemsize, n);
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

/* ------------------------------------------------------------------------
 * thread_order, check_ops, op_field: the converter's passes over every HostOp
 * (deps.thread_order_columns, host_decode.check_structure, linker.op_field)
 *
 * A HostOp's fields are read and written at their slots: a msgspec Struct
 * holds each field in an object slot its class names by a member
 * descriptor (a getattr each was about a third of these loops). Ops of
 * another type, a field that is no such slot, or a value that is not a
 * plain int (str where a string) go to the Python twin.
 * ------------------------------------------------------------------------ */
#include <structmember.h> /* T_OBJECT_EX, READONLY */

/* Where ``type``'s field ``name`` is held: the offset of its object slot,
 * or -1 where it is not one (writable: settable in place). */
static Py_ssize_t
slot_offset(PyTypeObject *type, const char *name, int writable)
{
    PyObject *d = PyObject_GetAttrString((PyObject *)type, name);
    Py_ssize_t offset = -1;
    if (d == NULL) {
        PyErr_Clear();
        return -1;
    }
    if (Py_TYPE(d) == &PyMemberDescr_Type) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX && !(writable && (m->flags & READONLY)))
            offset = m->offset;
    }
    Py_DECREF(d);
    return offset;
}

/* The object in ``op``'s slot at ``offset`` (borrowed; NULL: unset). */
static inline PyObject *
slot_get(PyObject *op, Py_ssize_t offset)
{
    return *(PyObject **)((char *)op + offset);
}

/* A plain int within int64 as ``*out``: 1, or 0 (not one). */
static inline int
plain_int64(PyObject *x, int64_t *out)
{
    int overflow = 0;
    long long v;
    if (x == NULL || !PyLong_CheckExact(x))
        return 0;
    v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow)
        return 0;
    *out = (int64_t)v;
    return 1;
}

/* An int64 -> int64 hash table (open addressing, linear probing): ids to
 * their objects, threads to their last op. INT64_MIN marks a free slot,
 * so it is no key (the callers' keys are ids and thread ids, far above). */
#define INTMAP_FREE INT64_MIN
#define INTMAP_MIN_BITS 4

typedef struct {
    int64_t *keys, *values;
    int bits;
    Py_ssize_t used;
} IntMap;

/* 1, or 0 with MemoryError set. */
static int
intmap_init(IntMap *m, Py_ssize_t expected)
{
    int bits = INTMAP_MIN_BITS;
    size_t size;
    while (((Py_ssize_t)1 << bits) < 2 * expected) /* at most half full */
        bits++;
    size = (size_t)1 << bits;
    m->bits = bits;
    m->used = 0;
    m->keys = PyMem_Malloc(size * sizeof(int64_t));
    m->values = PyMem_Malloc(size * sizeof(int64_t));
    if (m->keys == NULL || m->values == NULL) {
        PyMem_Free(m->keys);
        PyMem_Free(m->values);
        m->keys = m->values = NULL;
        PyErr_NoMemory();
        return 0;
    }
    for (size_t k = 0; k < size; k++)
        m->keys[k] = INTMAP_FREE;
    return 1;
}

static void
intmap_free(IntMap *m)
{
    PyMem_Free(m->keys);
    PyMem_Free(m->values);
    m->keys = m->values = NULL;
}

static inline size_t
intmap_home(const IntMap *m, int64_t key)
{
    return (size_t)(((uint64_t)key * 0x9E3779B97F4A7C15ULL) >> (64 - m->bits));
}

/* The slot of ``key``: where it is, else the free slot it would take
 * (INTMAP_FREE is never found: it finds a free slot). */
static inline size_t
intmap_find(const IntMap *m, int64_t key)
{
    size_t mask = ((size_t)1 << m->bits) - 1, k = intmap_home(m, key);
    while (m->keys[k] != INTMAP_FREE && m->keys[k] != key)
        k = (k + 1) & mask;
    return k;
}

/* Insert ``key`` at free slot ``k`` (from intmap_find), growing the table
 * past half full; 1, or 0 with MemoryError set. */
static int
intmap_put(IntMap *m, size_t k, int64_t key, int64_t value)
{
    m->keys[k] = key;
    m->values[k] = value;
    if (2 * ++m->used > ((Py_ssize_t)1 << m->bits)) {
        IntMap bigger;
        size_t size = (size_t)1 << m->bits;
        if (!intmap_init(&bigger, m->used))
            return 0;
        for (size_t j = 0; j < size; j++)
            if (m->keys[j] != INTMAP_FREE) {
                size_t at = intmap_find(&bigger, m->keys[j]);
                bigger.keys[at] = m->keys[j];
                bigger.values[at] = m->values[j];
            }
        bigger.used = m->used;
        intmap_free(m);
        *m = bigger;
    }
    return 1;
}

enum { TO_ID, TO_PARENT, TO_TID, TO_FIELDS };
static const char *const THREAD_ORDER_FIELDS[TO_FIELDS] = {"id", "parent", "tid"};

PyDoc_STRVAR(thread_order_doc,
"thread_order(ops, channels, caller, thread, dsts, srcs, kinds) -> int or None\n\n"
"deps.thread_order_edges of the ops (a list of one type with id, parent and\n"
"tid fields, ids strictly ascending; an op's thread: channels.get(id, tid)),\n"
"written to the columns (array('q') dsts and srcs, array('B') kinds, each\n"
"len(ops) long) in the order found; returns how many. An edge's kind\n"
"is caller where its source is the op's parent, else thread. None (nothing\n"
"read back) where an op is not that, or an id or thread not a plain int.");

static PyObject *
thread_order(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    PyObject *ops, *channels, *result = NULL;
    Py_ssize_t n, count = 0, offset[TO_FIELDS];
    Py_buffer dv, sv, kv;
    long caller, thread;
    int64_t *dst, *src, previous = INT64_MIN;
    unsigned char *kind;
    PyTypeObject *type;
    IntMap last;
    (void)self;
    if (argc != 7 || !PyList_Check(argv[0]) || !PyDict_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "thread_order(ops: list, channels: dict, caller: int, "
                        "thread: int, dsts, srcs, kinds)");
        return NULL;
    }
    ops = argv[0], channels = argv[1];
    caller = PyLong_AsLong(argv[2]);
    thread = PyLong_AsLong(argv[3]);
    if ((caller == -1 || thread == -1) && PyErr_Occurred())
        return NULL;
    if (caller < 0 || caller > UCHAR_MAX || thread < 0 || thread > UCHAR_MAX) {
        PyErr_SetString(PyExc_ValueError, "thread_order: kinds are 0..255");
        return NULL;
    }
    n = PyList_GET_SIZE(ops);
    if (n == 0)
        return PyLong_FromSsize_t(0);
    type = Py_TYPE(PyList_GET_ITEM(ops, 0));
    for (int f = 0; f < TO_FIELDS; f++)
        if ((offset[f] = slot_offset(type, THREAD_ORDER_FIELDS[f], 0)) < 0)
            Py_RETURN_NONE;
    if (!column(argv[4], &dv, "q", 8, n))
        goto not_columns;
    if (!column(argv[5], &sv, "q", 8, n)) {
        PyBuffer_Release(&dv);
        goto not_columns;
    }
    if (!column(argv[6], &kv, "B", 1, n)) {
        PyBuffer_Release(&dv);
        PyBuffer_Release(&sv);
        goto not_columns;
    }
    dst = dv.buf, src = sv.buf, kind = kv.buf;
    if (!intmap_init(&last, 8))
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *op = PyList_GET_ITEM(ops, i), *id_obj, *channel;
        int64_t id, parent, tid;
        size_t at;
        if (Py_TYPE(op) != type)
            goto python_path;
        id_obj = slot_get(op, offset[TO_ID]);
        if (!plain_int64(id_obj, &id) || !plain_int64(slot_get(op, offset[TO_PARENT]), &parent) ||
            !plain_int64(slot_get(op, offset[TO_TID]), &tid) || id <= previous)
            goto python_path;
        previous = id;
        if (PyDict_GET_SIZE(channels)) { /* channels.get(id, tid) */
            channel = PyDict_GetItemWithError(channels, id_obj);
            if (channel == NULL && PyErr_Occurred())
                goto done;
            if (channel != NULL && !plain_int64(channel, &tid))
                goto python_path;
        }
        if (tid == INTMAP_FREE)
            goto python_path;
        at = intmap_find(&last, tid);
        if (last.keys[at] == tid) {
            int64_t prev = last.values[at];
            dst[count] = id;
            src[count] = prev;
            kind[count] = (unsigned char)(prev == parent ? caller : thread);
            count++;
            last.values[at] = id;
        }
        else if (!intmap_put(&last, at, tid, id))
            goto done;
    }
    result = PyLong_FromSsize_t(count);
    goto done;
python_path:
    result = Py_NewRef(Py_None);
done:
    intmap_free(&last);
    PyBuffer_Release(&dv);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&kv);
    return result;
not_columns:
    PyErr_SetString(PyExc_TypeError, "thread_order: dsts, srcs and kinds must be writable "
                    "array('q'), array('q'), array('B') of len(ops) items");
    return NULL;
}

enum { CO_ID, CO_NAME, CO_PARENT, CO_TID, CO_RF_ID, CO_OP_SCHEMA, CO_FIELDS };
static const char *const CHECK_OPS_FIELDS[CO_FIELDS] = {
    "id", "name", "parent", "tid", "rf_id", "op_schema"};

/* Whether ``x`` is a plain int in -limit..limit. */
static inline int
int_within(PyObject *x, int64_t limit)
{
    int64_t v;
    return plain_int64(x, &v) && -limit <= v && v <= limit;
}

PyDoc_STRVAR(check_ops_doc,
"check_ops(ops, prefix, limit, dangling) -> bool or None\n\n"
"host_decode._check_ops_python where it raises nothing: the ops (a list of\n"
"one HostOp type) checked, each parent that is an op made that op's id\n"
"object, an op that is its own parent (its name starting with prefix) given\n"
"parent 0, the ops whose parent is no op appended to dangling; returns\n"
"whether some parent id is above its op's. None (nothing changed) where an\n"
"id repeats, a check fails (the twin raises its error) or a field is not a\n"
"plain int (or str) within -limit..limit.");

static PyObject *
check_ops(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    PyObject *ops, *prefix, *dangling, *zero, *result = NULL;
    Py_ssize_t n, offset[CO_FIELDS];
    long long limit;
    PyTypeObject *type;
    IntMap ids;
    int later = 0;
    (void)self;
    if (argc != 4 || !PyList_Check(argv[0]) || !PyUnicode_Check(argv[1]) ||
        !PyList_Check(argv[3])) {
        PyErr_SetString(PyExc_TypeError, "check_ops(ops: list, prefix: str, limit: int, "
                        "dangling: list)");
        return NULL;
    }
    ops = argv[0], prefix = argv[1], dangling = argv[3];
    limit = PyLong_AsLongLong(argv[2]);
    if (limit == -1 && PyErr_Occurred())
        return NULL;
    n = PyList_GET_SIZE(ops);
    if (n == 0)
        return Py_NewRef(Py_False);
    type = Py_TYPE(PyList_GET_ITEM(ops, 0));
    for (int f = 0; f < CO_FIELDS; f++)
        if ((offset[f] = slot_offset(type, CHECK_OPS_FIELDS[f], f == CO_PARENT)) < 0)
            Py_RETURN_NONE;
    if (!intmap_init(&ids, n))
        return NULL;
    /* Every check first (one pass: the ids go in as they come), nothing
     * changed: the twin's errors come from the ops as given. */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *op = PyList_GET_ITEM(ops, i), *id_obj, *name, *rf_id, *schema;
        int64_t id, parent;
        size_t at;
        if (Py_TYPE(op) != type)
            goto python_path;
        id_obj = slot_get(op, offset[CO_ID]);
        if (!plain_int64(id_obj, &id) || id == INTMAP_FREE ||
            !plain_int64(slot_get(op, offset[CO_PARENT]), &parent))
            goto python_path;
        at = intmap_find(&ids, id);
        if (ids.keys[at] == id) /* a duplicate id */
            goto python_path;
        if (!intmap_put(&ids, at, id, (int64_t)(intptr_t)id_obj))
            goto done;
        if (parent == id) {
            name = slot_get(op, offset[CO_NAME]);
            if (name == NULL || !PyUnicode_CheckExact(name) ||
                PyUnicode_Tailmatch(name, prefix, 0, PY_SSIZE_T_MAX, -1) != 1)
                goto python_path;
        }
        rf_id = slot_get(op, offset[CO_RF_ID]);
        schema = slot_get(op, offset[CO_OP_SCHEMA]);
        if (!int_within(slot_get(op, offset[CO_TID]), limit) || rf_id == NULL ||
            (rf_id != Py_None && !int_within(rf_id, limit)) || schema == NULL ||
            !PyUnicode_CheckExact(schema))
            goto python_path;
    }
    /* Nothing raises now: share the parents, take the dangling ones. */
    zero = PyLong_FromLong(0);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *op = PyList_GET_ITEM(ops, i), **slot, *shared;
        int64_t id = 0, parent = 0; /* both checked above */
        size_t at;
        plain_int64(slot_get(op, offset[CO_ID]), &id);
        slot = (PyObject **)((char *)op + offset[CO_PARENT]);
        plain_int64(*slot, &parent);
        if (parent == id)
            shared = zero;
        else if (parent == 0)
            continue;
        else {
            at = intmap_find(&ids, parent);
            if (parent == INTMAP_FREE || ids.keys[at] != parent) { /* no op's id */
                if (PyList_Append(dangling, op) < 0) {
                    Py_DECREF(zero);
                    goto done;
                }
                continue;
            }
            shared = (PyObject *)(intptr_t)ids.values[at];
            later |= parent > id;
        }
        /* an int in a slot: what setattr does (an int is never tracked by
         * the cyclic collector, whatever the struct's gc setting) */
        Py_SETREF(*slot, Py_NewRef(shared));
    }
    Py_DECREF(zero);
    result = Py_NewRef(later ? Py_True : Py_False);
    goto done;
python_path:
    result = Py_NewRef(Py_None);
done:
    intmap_free(&ids);
    return result;
}

PyDoc_STRVAR(op_field_doc,
"op_field(ops, field) -> list or None\n\n"
"list(map(attrgetter(field), ops)) for a list of ops of one type whose field\n"
"is an object slot (a msgspec Struct's); None where an op is of another type,\n"
"the field no such slot or unset in an op.");

static PyObject *
op_field(PyObject *self, PyObject *const *argv, Py_ssize_t argc)
{
    PyObject *ops, *out;
    PyTypeObject *type;
    Py_ssize_t n, offset;
    const char *field;
    (void)self;
    if (argc != 2 || !PyList_Check(argv[0]) || !PyUnicode_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "op_field(ops: list, field: str)");
        return NULL;
    }
    ops = argv[0];
    n = PyList_GET_SIZE(ops);
    if (n == 0)
        return PyList_New(0);
    if ((field = PyUnicode_AsUTF8(argv[1])) == NULL)
        return NULL;
    type = Py_TYPE(PyList_GET_ITEM(ops, 0));
    if ((offset = slot_offset(type, field, 0)) < 0)
        Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < n; i++) { /* every op first: nothing made for the twin */
        PyObject *op = PyList_GET_ITEM(ops, i);
        if (Py_TYPE(op) != type || slot_get(op, offset) == NULL)
            Py_RETURN_NONE;
    }
    if ((out = PyList_New(n)) == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        PyList_SET_ITEM(out, i, Py_NewRef(slot_get(PyList_GET_ITEM(ops, i), offset)));
    return out;
}

static PyMethodDef methods[] = {
    {"cpu_delays", (PyCFunction)(void (*)(void))cpu_delays, METH_FASTCALL, cpu_delays_doc},
    {"parents_of", (PyCFunction)(void (*)(void))parents_of, METH_FASTCALL, parents_of_doc},
    {"cpu_slices", (PyCFunction)(void (*)(void))cpu_slices, METH_FASTCALL, cpu_slices_doc},
    {"shared_floats", (PyCFunction)(void (*)(void))shared_floats, METH_FASTCALL,
     shared_floats_doc},
    {"shared_io", (PyCFunction)(void (*)(void))shared_io, METH_FASTCALL, shared_io_doc},
    {"host_ops", (PyCFunction)(void (*)(void))host_ops, METH_FASTCALL, host_ops_doc},
    {"nested_ops", (PyCFunction)(void (*)(void))nested_ops, METH_FASTCALL, nested_ops_doc},
    {"replay_plain", (PyCFunction)(void (*)(void))replay_plain, METH_FASTCALL,
     replay_plain_doc},
    {"walk_back", (PyCFunction)(void (*)(void))walk_back, METH_FASTCALL, walk_back_doc},
    {"lane_cover", (PyCFunction)(void (*)(void))lane_cover, METH_FASTCALL, lane_cover_doc},
    {"longest", (PyCFunction)(void (*)(void))longest, METH_FASTCALL, longest_doc},
    {"link_children", (PyCFunction)(void (*)(void))link_children, METH_FASTCALL,
     link_children_doc},
    {"encode_node", (PyCFunction)(void (*)(void))encode_node, METH_FASTCALL, encode_node_doc},
    {"frame_nodes", (PyCFunction)(void (*)(void))frame_nodes, METH_FASTCALL, frame_nodes_doc},
    {"deps_in_order", (PyCFunction)(void (*)(void))deps_in_order, METH_FASTCALL,
     deps_in_order_doc},
    {"lean_nodes", (PyCFunction)(void (*)(void))lean_nodes, METH_FASTCALL, lean_nodes_doc},
    {"scan_frames", (PyCFunction)(void (*)(void))scan_frames, METH_FASTCALL, scan_frames_doc},
    {"thread_order", (PyCFunction)(void (*)(void))thread_order, METH_FASTCALL,
     thread_order_doc},
    {"check_ops", (PyCFunction)(void (*)(void))check_ops, METH_FASTCALL, check_ops_doc},
    {"op_field", (PyCFunction)(void (*)(void))op_field, METH_FASTCALL, op_field_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fast",
    "pt2chakra's compiled fast path (see pt2chakra/chakra/compiled.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__fast(void)
{
    static const char *texts[4] = {"values", "shapes", "types", "strides"};
    for (int k = 0; k < 4; k++)
        if ((IOINFO_TEXTS[k] = PyUnicode_InternFromString(texts[k])) == NULL)
            return NULL;
    static const char *fields[6] = {"id", "name", "ctrl_deps", "inputs", "outputs", "attrs"};
    for (int k = 0; k < OBSERVER_ATTRS; k++)
        OBSERVER_HEAD_LENS[k] = strlen(OBSERVER_HEADS[k]);
    for (int k = 0; k < 6; k++)
        if ((NODE_FIELDS[k] = PyUnicode_InternFromString(fields[k])) == NULL)
            return NULL;
    IOINFO_BODY = PyUnicode_InternFromString("ioinfo");
    IOINFO_SIZE = PyUnicode_InternFromString("ioinfo_size");
    if (IOINFO_BODY == NULL || IOINFO_SIZE == NULL)
        return NULL;
    return PyModule_Create(&module);
}
