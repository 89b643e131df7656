/* The compiled half of tilec's fast launch path (see launcher.py).
 *
 * Launcher is the base type of a compiled Kernel (launch.py).  It remembers
 * the last ENTRIES argument signatures the Python slow path validated (per
 * buffer argument: the tensor's data pointer, shape, strides and dtype),
 * each with the packed parameter bytes that went with it (buffer pointers,
 * tensor maps, bound extents) in its own preallocated buffer.  Calling the
 * kernel with arguments of a remembered signature writes only the scalar
 * parameters, picks the stream and calls cuLaunchKernelEx, all in the one
 * C call of `kernel(...)`: no per-call rule checks, no tensor map encodes,
 * no Python between the caller and the driver.  Anything it cannot prove
 * identical is a miss, with nothing launched, and the call goes on to the
 * subclass's Python `_miss`: the slow path, which does the full job and
 * commits the new signature in place of the least recently used one.
 *
 * A tensor's signature is read through its type's DLPack C exchange API
 * (`__dlpack_c_exchange_api__`, DLPack 1.2+, torch 2.10+): a C call that
 * fills a non-owning DLTensor, and another that gives the framework's
 * current stream, with no Python in between.  Where the type has none, the
 * signature is read with the tensor's own methods (data_ptr(), shape,
 * stride(), dtype), and the stream with the stream function given.
 *
 * A kernel whose kernel.json says it waits on its grid dependency
 * (`grid_dependency_wait`: it executes griddepcontrol.wait) is launched with
 * the programmatic stream serialization attribute, unless the call says
 * pdl=False; any other kernel never is (pdl=True on one is a miss, and the
 * slow path refuses it).
 *
 * It needs no CUDA or DLPack headers: the structs it fills are declared
 * below from the documented layouts, and cuLaunchKernelEx's address is
 * handed in from Python (libcuda is never linked), so it builds wherever a
 * C compiler and Python's headers are.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    unsigned int x, y, z;
} Dim3;

typedef struct { /* CUlaunchAttribute */
    int id;
    char pad[4];
    union {
        char pad[64];
        Dim3 cluster;
        int programmatic; /* programmaticStreamSerializationAllowed */
    } value;
} LaunchAttribute;

typedef struct { /* CUlaunchConfig */
    unsigned int grid_x, grid_y, grid_z;
    unsigned int block_x, block_y, block_z;
    unsigned int shared_bytes;
    void *stream;
    LaunchAttribute *attrs;
    unsigned int num_attrs;
} LaunchConfig;

typedef int (*LaunchKernelEx)(const LaunchConfig *, void *, void **, void **);

/* DLPack (dlpack.h 1.2): the tensor view and the C exchange API */
typedef struct {
    void *data;
    int32_t device_type, device_id;
    int32_t ndim;
    uint8_t code, bits;
    uint16_t lanes;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} DLTensorView;

typedef struct {
    uint32_t major, minor;
    void *prev_api;
    void *managed_tensor_allocator;
    void *managed_tensor_from_py_object_no_sync;
    void *managed_tensor_to_py_object_no_sync;
    int (*dltensor_from_py_object_no_sync)(void *py_object, DLTensorView *out);
    int (*current_work_stream)(int device_type, int32_t device_id, void **out_stream);
} DLPackExchangeAPI;

#define DL_CUDA 2
#define MAX_DIMS 8

/* A tensor's signature as the exchange API reports it (zero-filled, so
 * two compare with memcmp). */
typedef struct {
    uint64_t address;
    int32_t device_type, device_id, ndim, has_strides;
    uint8_t code, bits;
    uint16_t lanes;
    int64_t shape[MAX_DIMS], strides[MAX_DIMS];
} DLSignature;

#define ATTRIBUTE_CLUSTER_DIMENSION 4
#define ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6
#define PARAM_ALIGN 64 /* a tensor map parameter is .align 64 */

enum { KIND_BUFFER = 0, KIND_SCALAR = 1 };
/* scalar codes, shared with launcher.py's SCALAR_CODES */
enum { S_NONE, S_I8, S_I16, S_I32, S_I64, S_U8, S_U16, S_U32, S_U64, S_F32, S_F64 };

#define ENTRIES 4 /* signatures remembered per kernel */
#define MAX_ARGS 64

typedef struct {
    int kind, slot, code;
} ArgSpec;

/* One buffer argument's signature: through the exchange API (`dl`), or
 * else through the tensor's methods (`ptr` and new references). */
typedef struct {
    DLSignature dl;
    unsigned long long ptr;
    PyObject *shape, *stride, *dtype;
} ArgKey;

typedef struct {
    int valid;
    unsigned long long last_used;
    unsigned int grid[3];
    char *storage;
    void **pointers;
    ArgKey *keys; /* one per argument; used for buffers */
} Entry;

typedef struct {
    PyObject_HEAD
    void *function;
    LaunchKernelEx launch;
    unsigned int block[3], cluster[3], shared_bytes;
    int programmatic; /* the kernel waits on its grid dependency: launched programmatically by default */
    Py_ssize_t nargs, nslots;
    ArgSpec *args;
    Py_ssize_t *sizes; /* bytes of each parameter slot */
    Entry entries[ENTRIES];
    unsigned long long clock;
    PyObject *tensor_type, *stream_fn, *stream_fn_args;
    PyObject *api_capsule; /* keeps `api` alive */
    const DLPackExchangeAPI *api;
    LaunchAttribute attributes[2]; /* programmatic serialization, then the cluster shape */
} Launcher;

static PyObject *s_data_ptr, *s_shape, *s_stride, *s_dtype, *s_cuda_stream;
static const unsigned long long MAX_GRID[3] = {2147483647ULL, 65535ULL, 65535ULL};

static void clear_keys(ArgKey *keys, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_CLEAR(keys[i].shape);
        Py_CLEAR(keys[i].stride);
        Py_CLEAR(keys[i].dtype);
    }
}

static void forget(Launcher *self) {
    for (int e = 0; e < ENTRIES; e++) {
        self->entries[e].valid = 0;
        if (self->entries[e].keys) clear_keys(self->entries[e].keys, self->nargs);
    }
    Py_CLEAR(self->tensor_type);
    Py_CLEAR(self->stream_fn);
    Py_CLEAR(self->stream_fn_args);
    Py_CLEAR(self->api_capsule);
    self->api = NULL;
}

static void Launcher_dealloc(Launcher *self) {
    forget(self);
    for (int e = 0; e < ENTRIES; e++) {
        PyMem_Free(self->entries[e].storage);
        PyMem_Free(self->entries[e].pointers);
        PyMem_Free(self->entries[e].keys);
    }
    PyMem_Free(self->args);
    PyMem_Free(self->sizes);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int read_u64(PyObject *value, unsigned long long *out) {
    if (!PyLong_Check(value)) return -1;
    *out = PyLong_AsUnsignedLongLong(value);
    if (*out == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    return 0;
}

static int read_dims(PyObject *seq, unsigned int out[3], const char *what) {
    if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != 3) {
        PyErr_Format(PyExc_ValueError, "%s must be a tuple of 3 ints", what);
        return -1;
    }
    for (int i = 0; i < 3; i++) {
        unsigned long long v;
        if (read_u64(PyTuple_GET_ITEM(seq, i), &v) || v > 0xffffffffULL) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "%s must be a tuple of 3 ints", what);
            return -1;
        }
        out[i] = (unsigned int)v;
    }
    return 0;
}

static size_t slot_span(Py_ssize_t size) {
    return size ? ((size_t)size + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN : PARAM_ALIGN;
}

/* _configure(function, launch, block, cluster, shared_bytes, slot_sizes, specs, programmatic)
 * function, launch: addresses of the CUfunction and of cuLaunchKernelEx;
 * slot_sizes: bytes of each kernel parameter in order; specs: per caller
 * argument (kind, slot, scalar code); programmatic: whether the kernel waits
 * on its grid dependency.  Once, before the first commit. */
static int configure(Launcher *self, PyObject *args) {
    unsigned long long function, launch, shared_bytes;
    PyObject *block, *cluster, *slot_sizes, *specs;
    int programmatic;
    if (!PyArg_ParseTuple(args, "KKOOKOOp", &function, &launch, &block, &cluster, &shared_bytes,
                          &slot_sizes, &specs, &programmatic))
        return -1;
    if (self->args) {
        PyErr_SetString(PyExc_TypeError, "a launcher is configured once");
        return -1;
    }
    if (read_dims(block, self->block, "block") || read_dims(cluster, self->cluster, "cluster")) return -1;
    if (!PyList_Check(slot_sizes) || !PyList_Check(specs)) {
        PyErr_SetString(PyExc_TypeError, "slot_sizes and specs must be lists");
        return -1;
    }
    self->function = (void *)(uintptr_t)function;
    self->launch = (LaunchKernelEx)(uintptr_t)launch;
    self->shared_bytes = (unsigned int)shared_bytes;
    self->nslots = PyList_GET_SIZE(slot_sizes);
    self->nargs = PyList_GET_SIZE(specs);
    if (self->nargs > MAX_ARGS) {
        PyErr_SetString(PyExc_ValueError, "too many arguments for the fast path");
        return -1;
    }
    /* each slot 64-byte aligned, after a 64-byte margin to align the start */
    size_t total = PARAM_ALIGN;
    self->sizes = PyMem_Calloc(self->nslots + 1, sizeof(Py_ssize_t));
    self->args = PyMem_Calloc(self->nargs + 1, sizeof(ArgSpec));
    if (!self->sizes || !self->args) return PyErr_NoMemory(), -1;
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        unsigned long long size;
        if (read_u64(PyList_GET_ITEM(slot_sizes, i), &size) || size > 4096) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a slot size must be 0..4096");
            return -1;
        }
        self->sizes[i] = (Py_ssize_t)size;
        total += slot_span(self->sizes[i]);
    }
    for (int e = 0; e < ENTRIES; e++) {
        Entry *entry = &self->entries[e];
        entry->storage = PyMem_Calloc(total, 1);
        entry->pointers = PyMem_Calloc(self->nslots + 1, sizeof(void *));
        entry->keys = PyMem_Calloc(self->nargs + 1, sizeof(ArgKey));
        if (!entry->storage || !entry->pointers || !entry->keys) return PyErr_NoMemory(), -1;
        char *slot = entry->storage + (PARAM_ALIGN - (uintptr_t)entry->storage % PARAM_ALIGN) % PARAM_ALIGN;
        for (Py_ssize_t i = 0; i < self->nslots; i++) {
            entry->pointers[i] = slot;
            slot += slot_span(self->sizes[i]);
        }
    }
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        ArgSpec *a = &self->args[i];
        if (!PyArg_ParseTuple(PyList_GET_ITEM(specs, i), "iii", &a->kind, &a->slot, &a->code)) return -1;
        if (a->slot < 0 || a->slot >= self->nslots) {
            PyErr_SetString(PyExc_ValueError, "spec slot out of range");
            return -1;
        }
    }
    self->programmatic = programmatic;
    self->attributes[0].id = ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    self->attributes[0].value.programmatic = 1;
    self->attributes[1].id = ATTRIBUTE_CLUSTER_DIMENSION;
    self->attributes[1].value.cluster.x = self->cluster[0];
    self->attributes[1].value.cluster.y = self->cluster[1];
    self->attributes[1].value.cluster.z = self->cluster[2];
    return 0;
}

static PyObject *Launcher_configure(Launcher *self, PyObject *args) {
    if (configure(self, args)) return NULL;
    Py_RETURN_NONE;
}

/* The exchange API of `tensor_type`, when it has a usable one (a capsule
 * "dlpack_exchange_api", version 1.x, with the DLTensor view); NULL
 * otherwise, with no error set. */
static const DLPackExchangeAPI *exchange_api(PyObject *tensor_type, PyObject **capsule) {
    *capsule = PyObject_GetAttrString(tensor_type, "__dlpack_c_exchange_api__");
    if (!*capsule || !PyCapsule_IsValid(*capsule, "dlpack_exchange_api")) {
        PyErr_Clear();
        Py_CLEAR(*capsule);
        return NULL;
    }
    const DLPackExchangeAPI *api = PyCapsule_GetPointer(*capsule, "dlpack_exchange_api");
    if (!api || api->major != 1 || !api->dltensor_from_py_object_no_sync) {
        PyErr_Clear();
        Py_CLEAR(*capsule);
        return NULL;
    }
    return api;
}

/* `arg`'s signature through the exchange API: 0, or -1 (no error set) when
 * the API refuses it or it has more than MAX_DIMS dimensions. */
static int dl_signature(const DLPackExchangeAPI *api, PyObject *arg, DLSignature *out) {
    DLTensorView t;
    memset(&t, 0, sizeof t);
    if (api->dltensor_from_py_object_no_sync(arg, &t)) return PyErr_Clear(), -1;
    if (t.ndim < 0 || t.ndim > MAX_DIMS || (t.ndim && !t.shape)) return -1;
    memset(out, 0, sizeof *out);
    out->address = (uint64_t)(uintptr_t)t.data + t.byte_offset;
    out->device_type = t.device_type;
    out->device_id = t.device_id;
    out->ndim = t.ndim;
    out->has_strides = t.strides != NULL;
    out->code = t.code;
    out->bits = t.bits;
    out->lanes = t.lanes;
    for (int i = 0; i < t.ndim; i++) {
        out->shape[i] = t.shape[i];
        if (t.strides) out->strides[i] = t.strides[i];
    }
    return 0;
}

/* The signature of `arg` into `key` (new references on the methods path):
 * 0, or -1 when it cannot be read (no error set). */
static int read_key(Launcher *self, PyObject *arg, ArgKey *key) {
    if (Py_TYPE(arg) != (PyTypeObject *)self->tensor_type &&
        PyObject_IsInstance(arg, self->tensor_type) != 1)
        return PyErr_Clear(), -1;
    if (self->api) return dl_signature(self->api, arg, &key->dl);
    PyObject *p = PyObject_CallMethodNoArgs(arg, s_data_ptr);
    if (!p) return PyErr_Clear(), -1;
    int bad = read_u64(p, &key->ptr);
    Py_DECREF(p);
    if (bad) return PyErr_Clear(), -1;
    key->shape = PyObject_GetAttr(arg, s_shape);
    key->stride = key->shape ? PyObject_CallMethodNoArgs(arg, s_stride) : NULL;
    key->dtype = key->stride ? PyObject_GetAttr(arg, s_dtype) : NULL;
    if (!key->dtype) {
        Py_CLEAR(key->shape);
        Py_CLEAR(key->stride);
        return PyErr_Clear(), -1;
    }
    return 0;
}

/* The buffer arguments' keys, read once per call: 0, or -1 (a miss). */
static int read_keys(Launcher *self, PyObject *args, ArgKey *keys) {
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        if (self->args[i].kind != KIND_BUFFER) continue;
        if (read_key(self, PyTuple_GET_ITEM(args, i), &keys[i])) {
            clear_keys(keys, i);
            return -1;
        }
    }
    return 0;
}

static int same_key(Launcher *self, const ArgKey *a, const ArgKey *b) {
    if (self->api) return memcmp(&a->dl, &b->dl, sizeof a->dl) == 0;
    if (a->ptr != b->ptr || a->dtype != b->dtype) return 0;
    int same = PyObject_RichCompareBool(a->shape, b->shape, Py_EQ);
    if (same == 1) same = PyObject_RichCompareBool(a->stride, b->stride, Py_EQ);
    if (same < 0) PyErr_Clear();
    return same == 1;
}

/* The valid entry whose signature is `keys`, or NULL. */
static Entry *find_entry(Launcher *self, const ArgKey *keys) {
    for (int e = 0; e < ENTRIES; e++) {
        Entry *entry = &self->entries[e];
        if (!entry->valid) continue;
        int same = 1;
        for (Py_ssize_t i = 0; same && i < self->nargs; i++)
            if (self->args[i].kind == KIND_BUFFER) same = same_key(self, &entry->keys[i], &keys[i]);
        if (same) return entry;
    }
    return NULL;
}

/* commit(args, blobs, grid, tensor_type, stream_fn): remember the signature
 * of `args` (every buffer argument an instance of `tensor_type`) with the
 * parameter bytes `blobs` (one bytes per slot) and default `grid`, in place
 * of the least recently used signature.  `stream_fn(0)`, when not None,
 * gives the stream of a launch without one (the exchange API's current
 * stream is used instead when the type has one).  Returns whether it was
 * remembered. */
static PyObject *Launcher_commit(Launcher *self, PyObject *args) {
    PyObject *call_args, *blobs, *grid, *tensor_type, *stream_fn;
    unsigned int dims[3];
    if (!PyArg_ParseTuple(args, "O!O!OOO", &PyTuple_Type, &call_args, &PyList_Type, &blobs, &grid,
                          &tensor_type, &stream_fn))
        return NULL;
    if (!self->args) {
        PyErr_SetString(PyExc_TypeError, "commit: the launcher is not configured");
        return NULL;
    }
    if (PyTuple_GET_SIZE(call_args) != self->nargs || PyList_GET_SIZE(blobs) != self->nslots) {
        PyErr_SetString(PyExc_ValueError, "commit: argument or blob count does not match");
        return NULL;
    }
    if (read_dims(grid, dims, "grid")) return NULL;
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        PyObject *blob = PyList_GET_ITEM(blobs, i);
        if (!PyBytes_Check(blob) || PyBytes_GET_SIZE(blob) != self->sizes[i]) {
            PyErr_SetString(PyExc_ValueError, "commit: blobs must be bytes of their slot's size");
            return NULL;
        }
    }
    if (tensor_type != self->tensor_type || stream_fn != (self->stream_fn ? self->stream_fn : Py_None)) {
        forget(self); /* another tensor type or stream rule: start afresh */
        self->tensor_type = Py_NewRef(tensor_type);
        self->api = exchange_api(tensor_type, &self->api_capsule);
        if (stream_fn != Py_None) {
            self->stream_fn = Py_NewRef(stream_fn);
            self->stream_fn_args = Py_BuildValue("(i)", 0);
            if (!self->stream_fn_args) return forget(self), NULL;
        }
    }
    ArgKey keys[MAX_ARGS + 1];
    memset(keys, 0, self->nargs * sizeof(ArgKey));
    if (read_keys(self, call_args, keys)) Py_RETURN_FALSE;
    Entry *entry = find_entry(self, keys);
    if (!entry) {
        entry = &self->entries[0];
        for (int e = 0; e < ENTRIES; e++) {
            Entry *candidate = &self->entries[e];
            if (!candidate->valid) {
                entry = candidate;
                break;
            }
            if (candidate->last_used < entry->last_used) entry = candidate;
        }
    }
    clear_keys(entry->keys, self->nargs);
    memcpy(entry->keys, keys, self->nargs * sizeof(ArgKey)); /* the references move */
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        PyObject *blob = PyList_GET_ITEM(blobs, i);
        memcpy(entry->pointers[i], PyBytes_AS_STRING(blob), PyBytes_GET_SIZE(blob));
    }
    memcpy(entry->grid, dims, sizeof dims);
    entry->last_used = ++self->clock;
    entry->valid = 1;
    Py_RETURN_TRUE;
}

/* A scalar's bytes into `out` (8 bytes): 0, or -1 when the fast path does
 * not take it (left to the slow path, which explains). */
static int pack_scalar(int code, PyObject *v, unsigned char *out) {
    if (code == S_F32 || code == S_F64) {
        double d;
        if (PyFloat_Check(v)) d = PyFloat_AS_DOUBLE(v);
        else if (PyLong_Check(v)) {
            d = PyLong_AsDouble(v);
            if (d == -1.0 && PyErr_Occurred()) return -1;
        } else return -1;
        if (code == S_F64) return memcpy(out, &d, 8), 0;
        if (isfinite(d) && fabs(d) > FLT_MAX) return -1;
        float f = (float)d;
        return memcpy(out, &f, 4), 0;
    }
    if (!PyLong_Check(v)) return -1;
    if (code >= S_U8) {
        unsigned long long u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        int bytes = 1 << (code - S_U8);
        if (bytes < 8 && u >> (8 * bytes)) return -1;
        return memcpy(out, &u, bytes), 0; /* little-endian: the low bytes first */
    }
    int overflow;
    long long s = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (s == -1 && PyErr_Occurred())) return -1;
    int bytes = 1 << (code - S_I8);
    if (bytes < 8) {
        long long limit = 1LL << (8 * bytes - 1);
        if (s < -limit || s >= limit) return -1;
    }
    return memcpy(out, &s, bytes), 0;
}

static int scalar_bytes(int code) {
    if (code == S_F32) return 4;
    if (code == S_F64) return 8;
    return 1 << (code >= S_U8 ? code - S_U8 : code - S_I8);
}

static int read_grid(Launcher *self, PyObject *grid, unsigned int out[3]) {
    PyObject *items[3] = {NULL, NULL, NULL};
    Py_ssize_t n;
    if (PyLong_CheckExact(grid)) {
        items[0] = grid;
        n = 1;
    } else if (PyTuple_CheckExact(grid) || PyList_CheckExact(grid)) {
        n = PySequence_Fast_GET_SIZE(grid);
        if (n < 1 || n > 3) return -1;
        for (Py_ssize_t i = 0; i < n; i++) items[i] = PySequence_Fast_GET_ITEM(grid, i);
    } else return -1;
    for (int i = 0; i < 3; i++) {
        unsigned long long v = 1;
        if (i < n) {
            if (!PyLong_CheckExact(items[i])) return -1;
            int overflow;
            long long s = PyLong_AsLongLongAndOverflow(items[i], &overflow);
            if (overflow || s < 1) return -1;
            v = (unsigned long long)s;
        }
        if (v > MAX_GRID[i] || v % self->cluster[i]) return -1;
        out[i] = (unsigned int)v;
    }
    return 0;
}

static int read_stream(Launcher *self, PyObject *stream, void **out) {
    unsigned long long handle = 0;
    if (stream == Py_None) {
        if (self->stream_fn && self->api && self->api->current_work_stream) {
            void *current = NULL;
            if (self->api->current_work_stream(DL_CUDA, 0, &current)) return -1;
            handle = (unsigned long long)(uintptr_t)current;
        } else if (self->stream_fn) {
            PyObject *h = PyObject_Call(self->stream_fn, self->stream_fn_args, NULL);
            if (!h) return -1;
            int bad = read_u64(h, &handle);
            Py_DECREF(h);
            if (bad) return -1;
        }
    } else if (PyLong_CheckExact(stream)) {
        if (read_u64(stream, &handle)) return -1;
    } else {
        PyObject *h = PyObject_GetAttr(stream, s_cuda_stream);
        if (!h) return -1;
        int bad = !PyLong_CheckExact(h) || read_u64(h, &handle);
        Py_DECREF(h);
        if (bad) return -1;
    }
    *out = (void *)(uintptr_t)handle;
    return 0;
}

/* Whether a launch is programmatic: pdl=None is the kernel's default, False
 * never, True only for a kernel that waits on its grid dependency.  0 or 1,
 * or -1 for anything else (a miss: the slow path explains). */
static int read_pdl(Launcher *self, PyObject *pdl) {
    if (pdl == Py_None) return self->programmatic;
    if (pdl == Py_False) return 0;
    if (pdl == Py_True && self->programmatic) return 1;
    return -1;
}

/* Everything of a launch's config but its stream: `dims`, and the block,
 * shared bytes and cluster the launcher was configured with; the
 * programmatic serialization attribute when `programmatic`. */
static void fill_config(Launcher *self, LaunchConfig *config, const unsigned int dims[3], int programmatic) {
    config->grid_x = dims[0];
    config->grid_y = dims[1];
    config->grid_z = dims[2];
    config->block_x = self->block[0];
    config->block_y = self->block[1];
    config->block_z = self->block[2];
    config->shared_bytes = self->shared_bytes;
    int clustered = self->cluster[0] * self->cluster[1] * self->cluster[2] != 1;
    config->num_attrs = (unsigned int)(programmatic + clustered);
    config->attrs = config->num_attrs ? &self->attributes[programmatic ? 0 : 1] : NULL;
}

#define MISS() do { PyErr_Clear(); return -1; } while (0)

/* The launch of `args` (a tuple) with a remembered signature: -1 (a miss:
 * nothing launched, no error set) or the CUresult of cuLaunchKernelEx. */
static int replay(Launcher *self, PyObject *args, PyObject *grid, PyObject *stream, PyObject *pdl) {
    if (!self->tensor_type || PyTuple_GET_SIZE(args) != self->nargs) return -1;
    int programmatic = read_pdl(self, pdl);
    if (programmatic < 0) return -1;
    ArgKey keys[MAX_ARGS + 1];
    memset(keys, 0, self->nargs * sizeof(ArgKey));
    if (read_keys(self, args, keys)) MISS();
    Entry *entry = find_entry(self, keys);
    clear_keys(keys, self->nargs);
    if (!entry) MISS();
    unsigned char scalars[MAX_ARGS][8];
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        ArgSpec *a = &self->args[i];
        if (a->kind == KIND_SCALAR && (a->code == S_NONE || pack_scalar(a->code, PyTuple_GET_ITEM(args, i), scalars[i])))
            MISS();
    }
    LaunchConfig config;
    unsigned int dims[3];
    if (grid == Py_None) memcpy(dims, entry->grid, sizeof dims);
    else if (read_grid(self, grid, dims)) MISS();
    if (read_stream(self, stream, &config.stream)) MISS();
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        ArgSpec *a = &self->args[i];
        if (a->kind == KIND_SCALAR) memcpy(entry->pointers[a->slot], scalars[i], scalar_bytes(a->code));
    }
    entry->last_used = ++self->clock;
    fill_config(self, &config, dims, programmatic);
    return self->launch(&config, self->function, self->nslots ? entry->pointers : NULL, NULL);
}

/* _replay(args, grid, stream, pdl) -> -1 (a miss) or the CUresult: the slow
 * path's launch of what it has just committed. */
static PyObject *Launcher_replay(Launcher *self, PyObject *call) {
    PyObject *args, *grid, *stream, *pdl;
    if (!PyArg_ParseTuple(call, "O!OOO", &PyTuple_Type, &args, &grid, &stream, &pdl)) return NULL;
    return PyLong_FromLong(replay(self, args, grid, stream, pdl));
}

/* _launch_params(grid, stream, params, programmatic) -> the CUresult: one
 * launch of parameters the slow path packed (`params`: the address of the
 * kernel's void* array, 0 for none) for arguments the launcher does not
 * remember (numpy, DLPack and CUDA-array-interface arrays); `grid` a
 * checked tuple of 3, `stream` a CUstream handle, `programmatic` the
 * slow path's decision. */
static PyObject *Launcher_launch_params(Launcher *self, PyObject *call) {
    PyObject *grid;
    unsigned long long stream, params;
    int programmatic;
    unsigned int dims[3];
    if (!PyArg_ParseTuple(call, "OKKp", &grid, &stream, &params, &programmatic)) return NULL;
    if (!self->args) {
        PyErr_SetString(PyExc_TypeError, "launch: the launcher is not configured");
        return NULL;
    }
    if (read_dims(grid, dims, "grid")) return NULL;
    LaunchConfig config;
    if (programmatic && !self->programmatic) {
        PyErr_SetString(PyExc_ValueError, "launch: a kernel that never waits is not launched programmatically");
        return NULL;
    }
    config.stream = (void *)(uintptr_t)stream;
    fill_config(self, &config, dims, programmatic);
    return PyLong_FromLong(self->launch(&config, self->function, (void **)(uintptr_t)params, NULL));
}

/* kernel(*args, grid=None, stream=None, pdl=None): the replay of a
 * remembered signature, else (a miss, or a launch error) the subclass's
 * _miss(args, grid, stream, pdl, status), the slow path, whose result is
 * returned.  One C call from the caller to the driver on a hit. */
static PyObject *Launcher_call(Launcher *self, PyObject *args, PyObject *kwds) {
    PyObject *grid = Py_None, *stream = Py_None, *pdl = Py_None;
    if (kwds) {
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(kwds, &pos, &key, &value)) {
            if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, "grid") == 0) grid = value;
            else if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, "stream") == 0) stream = value;
            else if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, "pdl") == 0) pdl = value;
            else {
                PyErr_Format(PyExc_TypeError, "a kernel takes the keywords grid=, stream= and pdl=, not %R", key);
                return NULL;
            }
        }
    }
    int status = self->args ? replay(self, args, grid, stream, pdl) : -1;
    if (status == 0) Py_RETURN_NONE;
    return PyObject_CallMethod((PyObject *)self, "_miss", "OOOOi", args, grid, stream, pdl, status);
}

static int remembered(Launcher *self) {
    int n = 0;
    for (int e = 0; e < ENTRIES; e++) n += self->entries[e].valid;
    return n;
}

static PyObject *Launcher_get_remembered(Launcher *self, void *unused) {
    (void)unused;
    return PyLong_FromLong(remembered(self));
}

static PyObject *Launcher_get_reads(Launcher *self, void *unused) {
    (void)unused;
    if (!remembered(self)) Py_RETURN_NONE;
    return PyUnicode_FromString(self->api ? "dlpack-exchange" : "methods");
}

static PyMethodDef Launcher_methods[] = {
    {"_configure", (PyCFunction)Launcher_configure, METH_VARARGS, "Set the kernel's launch constants, once."},
    {"_commit", (PyCFunction)Launcher_commit, METH_VARARGS, "Remember a validated signature."},
    {"_replay", (PyCFunction)Launcher_replay, METH_VARARGS, "Launch a remembered signature: -1 or the CUresult."},
    {"_launch_params", (PyCFunction)Launcher_launch_params, METH_VARARGS,
     "Launch parameters packed by the slow path: the CUresult."},
    {NULL},
};

static PyGetSetDef Launcher_getset[] = {
    {"_remembered", (getter)Launcher_get_remembered, NULL, "How many signatures are remembered.", NULL},
    {"_reads", (getter)Launcher_get_reads, NULL,
     "How tensors are read: 'dlpack-exchange', 'methods', or None before a commit.", NULL},
    {NULL},
};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tilec.runtime._launcher.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_dealloc = (destructor)Launcher_dealloc,
    .tp_call = (ternaryfunc)Launcher_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The base of a kernel: its remembered launches (see launcher.py).",
    .tp_methods = Launcher_methods,
    .tp_getset = Launcher_getset,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_launcher", "tilec's compiled launch path.", -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__launcher(void) {
    if (PyType_Ready(&LauncherType) < 0) return NULL;
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    s_shape = PyUnicode_InternFromString("shape");
    s_stride = PyUnicode_InternFromString("stride");
    s_dtype = PyUnicode_InternFromString("dtype");
    s_cuda_stream = PyUnicode_InternFromString("cuda_stream");
    if (!s_data_ptr || !s_shape || !s_stride || !s_dtype || !s_cuda_stream) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&LauncherType);
    if (PyModule_AddObject(m, "Launcher", (PyObject *)&LauncherType) < 0) {
        Py_DECREF(&LauncherType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
