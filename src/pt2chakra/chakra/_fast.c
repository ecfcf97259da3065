/*
 * pt2chakra's compiled fast path, the formats' tier: the .et and host ET
 * readers and writers, and the converter's passes over them. Its contract
 * (each function, its Python twin, the test that compares them) is the
 * table CONTRACT in chakra/compiled.py; the simulator's kernels are the
 * other module, simulation/_fast.c (its table: simulation/compiled.py);
 * the helpers both use are static inline in _fast.h. The functions:
 *
 * - scan_frames: decode's frame scan of a buffer fill;
 * - lean_nodes: the simulator's lean node decode (chakra/lean_read.py): a
 *   million-node .et read in about a second instead of six;
 * - encode_node: the converter's CPU-node encoder (encode.NodeWriter);
 * - frame_nodes: that encoder over a batch of nodes, framed (NodeWriter.frame);
 * - deps_in_order: the writer's walk over the dependency table
 *   (dep_table.DepTable._in_order_chunk);
 * - shared_io: a host op's inputs/outputs as their IOInfo body (host_decode);
 * - host_ops: host ET nodes as HostOps, where their attrs are the observer's
 *   plain list (host_decode._nested_to_op);
 * - nested_ops: a slice of a host ET's nodes read from its text straight
 *   into HostOps, where they are plain (host_decode.decode_nodes, normalise);
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
#include "_fast.h"

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
    /* The loop writes it (escaped: len >= 2); gcc's -Wmaybe-uninitialized cannot tell. */
    stack[0] = '\0';
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
    FAST_METHOD(scan_frames),
    FAST_METHOD(lean_nodes),
    FAST_METHOD(encode_node),
    FAST_METHOD(frame_nodes),
    FAST_METHOD(deps_in_order),
    FAST_METHOD(shared_io),
    FAST_METHOD(host_ops),
    FAST_METHOD(nested_ops),
    FAST_METHOD(thread_order),
    FAST_METHOD(check_ops),
    FAST_METHOD(op_field),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fast",
    "pt2chakra's compiled fast path, the formats' tier (see "
    "pt2chakra/chakra/compiled.py).", -1, methods, NULL, NULL, NULL, NULL,
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
