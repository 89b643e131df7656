/* The compiled half of tilec's fast launch path (see launcher.py).
 *
 * A Launcher remembers the last argument signature the Python slow path
 * validated (per buffer argument: the tensor's data pointer, shape, strides
 * and dtype object) together with the packed parameter bytes that went with
 * it (buffer pointers, tensor maps, bound extents).  Calling it with
 * arguments of the same signature writes only the scalar parameters, picks
 * the stream and calls cuLaunchKernelEx: no per-call rule checks, no tensor
 * map encodes, no Python between the caller and the driver.  Anything it
 * cannot prove identical is answered -1 ("miss"), with nothing launched and
 * no error set, and the Python slow path does the full job.
 *
 * A tensor's signature is read through its type's DLPack C exchange API
 * (`__dlpack_c_exchange_api__`, DLPack 1.2+, torch 2.10+): a C call that
 * fills a non-owning DLTensor, and another that gives the framework's
 * current stream, with no Python in between.  Where the type has none, the
 * signature is read with the tensor's own methods (data_ptr(), shape,
 * stride(), dtype), and the stream with the stream function given.
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
#define PARAM_ALIGN 64 /* a tensor map parameter is .align 64 */

enum { KIND_BUFFER = 0, KIND_SCALAR = 1 };
/* scalar codes, shared with launcher.py's SCALAR_CODES */
enum { S_NONE, S_I8, S_I16, S_I32, S_I64, S_U8, S_U16, S_U32, S_U64, S_F32, S_F64 };

typedef struct {
    int kind, slot, code;
    /* the remembered signature (buffers): through the exchange API, or
     * else through the tensor's methods */
    DLSignature dl;
    unsigned long long ptr;
    PyObject *shape, *stride, *dtype;
} ArgSpec;

typedef struct {
    PyObject_HEAD
    void *function;
    LaunchKernelEx launch;
    unsigned int block[3], cluster[3], grid[3], shared_bytes;
    Py_ssize_t nargs, nslots;
    ArgSpec *args;
    Py_ssize_t *sizes; /* bytes of each parameter slot */
    char *storage;
    void **pointers;
    int valid, default_stream_from_fn;
    PyObject *tensor_type, *stream_fn, *stream_fn_args;
    PyObject *api_capsule; /* keeps `api` alive */
    const DLPackExchangeAPI *api;
    LaunchAttribute attribute;
} Launcher;

static PyObject *s_data_ptr, *s_shape, *s_stride, *s_dtype, *s_cuda_stream;
static const unsigned long long MAX_GRID[3] = {2147483647ULL, 65535ULL, 65535ULL};

static void forget(Launcher *self) {
    self->valid = 0;
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        Py_CLEAR(self->args[i].shape);
        Py_CLEAR(self->args[i].stride);
        Py_CLEAR(self->args[i].dtype);
    }
    Py_CLEAR(self->tensor_type);
    Py_CLEAR(self->stream_fn);
    Py_CLEAR(self->stream_fn_args);
    Py_CLEAR(self->api_capsule);
    self->api = NULL;
}

static void Launcher_dealloc(Launcher *self) {
    forget(self);
    PyMem_Free(self->args);
    PyMem_Free(self->sizes);
    PyMem_Free(self->storage);
    PyMem_Free(self->pointers);
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

/* Launcher(function, launch, block, cluster, shared_bytes, slot_sizes, specs)
 * function, launch: addresses of the CUfunction and of cuLaunchKernelEx;
 * slot_sizes: bytes of each kernel parameter in order; specs: per caller
 * argument (kind, slot, scalar code). */
static int Launcher_init(Launcher *self, PyObject *args, PyObject *kwds) {
    unsigned long long function, launch, shared_bytes;
    PyObject *block, *cluster, *slot_sizes, *specs;
    if (!PyArg_ParseTuple(args, "KKOOKOO", &function, &launch, &block, &cluster, &shared_bytes,
                          &slot_sizes, &specs))
        return -1;
    if (self->args) {
        PyErr_SetString(PyExc_TypeError, "a Launcher is initialised once");
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
    /* each slot 64-byte aligned, after a 64-byte margin to align the start */
    size_t total = PARAM_ALIGN;
    self->sizes = PyMem_Calloc(self->nslots + 1, sizeof(Py_ssize_t));
    if (!self->sizes) return PyErr_NoMemory(), -1;
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        unsigned long long size;
        if (read_u64(PyList_GET_ITEM(slot_sizes, i), &size) || size > 4096) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a slot size must be 0..4096");
            return -1;
        }
        self->sizes[i] = (Py_ssize_t)size;
        total += (size + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN + (size == 0 ? PARAM_ALIGN : 0);
    }
    self->storage = PyMem_Calloc(total, 1);
    self->pointers = PyMem_Calloc(self->nslots + 1, sizeof(void *));
    self->args = PyMem_Calloc(self->nargs + 1, sizeof(ArgSpec));
    if (!self->storage || !self->pointers || !self->args) return PyErr_NoMemory(), -1;
    char *slot = self->storage + (PARAM_ALIGN - (uintptr_t)self->storage % PARAM_ALIGN) % PARAM_ALIGN;
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        size_t size = (size_t)self->sizes[i];
        self->pointers[i] = slot;
        slot += (size + PARAM_ALIGN - 1) / PARAM_ALIGN * PARAM_ALIGN + (size == 0 ? PARAM_ALIGN : 0);
    }
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        ArgSpec *a = &self->args[i];
        if (!PyArg_ParseTuple(PyList_GET_ITEM(specs, i), "iii", &a->kind, &a->slot, &a->code)) return -1;
        if (a->slot < 0 || a->slot >= self->nslots) {
            PyErr_SetString(PyExc_ValueError, "spec slot out of range");
            return -1;
        }
    }
    self->attribute.id = ATTRIBUTE_CLUSTER_DIMENSION;
    self->attribute.value.cluster.x = self->cluster[0];
    self->attribute.value.cluster.y = self->cluster[1];
    self->attribute.value.cluster.z = self->cluster[2];
    return 0;
}

/* The signature of tensor `arg`: 0 and new references, or -1 (error set). */
static int signature(PyObject *arg, unsigned long long *ptr, PyObject **shape, PyObject **stride,
                     PyObject **dtype) {
    PyObject *p = PyObject_CallMethodNoArgs(arg, s_data_ptr);
    if (!p) return -1;
    int bad = read_u64(p, ptr);
    Py_DECREF(p);
    if (bad) return -1;
    *shape = PyObject_GetAttr(arg, s_shape);
    if (!*shape) return -1;
    *stride = PyObject_CallMethodNoArgs(arg, s_stride);
    if (!*stride) return Py_DECREF(*shape), -1;
    *dtype = PyObject_GetAttr(arg, s_dtype);
    if (!*dtype) return Py_DECREF(*shape), Py_DECREF(*stride), -1;
    return 0;
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

/* 1 when `arg` has the remembered signature of spec `a`, 0 when not, -1 on
 * an error (set). */
static int same_signature(Launcher *self, ArgSpec *a, PyObject *arg) {
    if (self->api) {
        DLSignature now;
        return dl_signature(self->api, arg, &now) == 0 && memcmp(&now, &a->dl, sizeof now) == 0;
    }
    unsigned long long ptr;
    PyObject *shape, *stride, *dtype;
    if (signature(arg, &ptr, &shape, &stride, &dtype)) return -1;
    int same = ptr == a->ptr && dtype == a->dtype;
    if (same) same = PyObject_RichCompareBool(shape, a->shape, Py_EQ);
    if (same == 1) same = PyObject_RichCompareBool(stride, a->stride, Py_EQ);
    Py_DECREF(shape);
    Py_DECREF(stride);
    Py_DECREF(dtype);
    return same;
}

/* commit(args, blobs, grid, tensor_type, stream_fn): remember the signature
 * of `args` (every buffer argument an instance of `tensor_type`) with the
 * parameter bytes `blobs` (one bytes per slot) and default `grid`.
 * `stream_fn(0)`, when not None, gives the stream of a launch without one.
 * Returns whether it was remembered. */
static PyObject *Launcher_commit(Launcher *self, PyObject *args) {
    PyObject *call_args, *blobs, *grid, *tensor_type, *stream_fn;
    if (!PyArg_ParseTuple(args, "O!O!OOO", &PyTuple_Type, &call_args, &PyList_Type, &blobs, &grid,
                          &tensor_type, &stream_fn))
        return NULL;
    forget(self);
    if (PyTuple_GET_SIZE(call_args) != self->nargs || PyList_GET_SIZE(blobs) != self->nslots) {
        PyErr_SetString(PyExc_ValueError, "commit: argument or blob count does not match");
        return NULL;
    }
    if (read_dims(grid, self->grid, "grid")) return NULL;
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        PyObject *blob = PyList_GET_ITEM(blobs, i);
        if (!PyBytes_Check(blob) || PyBytes_GET_SIZE(blob) != self->sizes[i]) {
            PyErr_SetString(PyExc_ValueError, "commit: blobs must be bytes of their slot's size");
            return NULL;
        }
        memcpy(self->pointers[i], PyBytes_AS_STRING(blob), PyBytes_GET_SIZE(blob));
    }
    self->api = exchange_api(tensor_type, &self->api_capsule);
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        ArgSpec *a = &self->args[i];
        if (a->kind != KIND_BUFFER) continue;
        PyObject *arg = PyTuple_GET_ITEM(call_args, i);
        int is_tensor = PyObject_IsInstance(arg, tensor_type);
        if (is_tensor < 0) return forget(self), NULL;
        if (!is_tensor) return forget(self), Py_NewRef(Py_False);
        if (self->api) {
            if (dl_signature(self->api, arg, &a->dl)) return forget(self), Py_NewRef(Py_False);
        } else if (signature(arg, &a->ptr, &a->shape, &a->stride, &a->dtype)) {
            return forget(self), NULL;
        }
    }
    self->tensor_type = Py_NewRef(tensor_type);
    if (stream_fn != Py_None) {
        self->stream_fn = Py_NewRef(stream_fn);
        self->stream_fn_args = Py_BuildValue("(i)", 0);
        if (!self->stream_fn_args) return forget(self), NULL;
    }
    self->valid = 1;
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

#define MISS() do { PyErr_Clear(); return PyLong_FromLong(-1); } while (0)

/* launcher(args, grid, stream) -> -1 (a miss: nothing launched) or the
 * CUresult of cuLaunchKernelEx. */
static PyObject *Launcher_call(Launcher *self, PyObject *call, PyObject *kwds) {
    PyObject *args, *grid, *stream;
    if (!PyArg_ParseTuple(call, "O!OO", &PyTuple_Type, &args, &grid, &stream)) return NULL;
    if (!self->valid || PyTuple_GET_SIZE(args) != self->nargs) MISS();
    unsigned char scalars[64][8];
    if (self->nargs > 64) MISS();
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        ArgSpec *a = &self->args[i];
        PyObject *arg = PyTuple_GET_ITEM(args, i);
        if (a->kind == KIND_BUFFER) {
            if (Py_TYPE(arg) != (PyTypeObject *)self->tensor_type) {
                int is_tensor = PyObject_IsInstance(arg, self->tensor_type);
                if (is_tensor != 1) MISS();
            }
            if (same_signature(self, a, arg) != 1) MISS();
        } else if (a->code == S_NONE || pack_scalar(a->code, arg, scalars[i])) {
            MISS();
        }
    }
    LaunchConfig config;
    unsigned int dims[3];
    if (grid == Py_None) memcpy(dims, self->grid, sizeof dims);
    else if (read_grid(self, grid, dims)) MISS();
    if (read_stream(self, stream, &config.stream)) MISS();
    for (Py_ssize_t i = 0; i < self->nargs; i++) {
        ArgSpec *a = &self->args[i];
        if (a->kind != KIND_SCALAR) continue;
        int bytes = a->code == S_F32 ? 4 : a->code == S_F64 ? 8
                  : 1 << ((a->code >= S_U8 ? a->code - S_U8 : a->code - S_I8));
        memcpy(self->pointers[a->slot], scalars[i], bytes);
    }
    config.grid_x = dims[0];
    config.grid_y = dims[1];
    config.grid_z = dims[2];
    config.block_x = self->block[0];
    config.block_y = self->block[1];
    config.block_z = self->block[2];
    config.shared_bytes = self->shared_bytes;
    int clustered = self->cluster[0] * self->cluster[1] * self->cluster[2] != 1;
    config.attrs = clustered ? &self->attribute : NULL;
    config.num_attrs = clustered ? 1 : 0;
    int status = self->launch(&config, self->function, self->nslots ? self->pointers : NULL, NULL);
    return PyLong_FromLong(status);
}

static PyObject *Launcher_forget(Launcher *self, PyObject *unused) {
    forget(self);
    Py_RETURN_NONE;
}

static PyObject *Launcher_get_valid(Launcher *self, void *unused) {
    return PyBool_FromLong(self->valid);
}

static PyObject *Launcher_get_reads(Launcher *self, void *unused) {
    if (!self->valid) Py_RETURN_NONE;
    return PyUnicode_FromString(self->api ? "dlpack-exchange" : "methods");
}

static PyMethodDef Launcher_methods[] = {
    {"commit", (PyCFunction)Launcher_commit, METH_VARARGS, "Remember a validated signature."},
    {"forget", (PyCFunction)Launcher_forget, METH_NOARGS, "Forget the remembered signature."},
    {NULL},
};

static PyGetSetDef Launcher_getset[] = {
    {"valid", (getter)Launcher_get_valid, NULL, "Whether a signature is remembered.", NULL},
    {"reads", (getter)Launcher_get_reads, NULL,
     "How tensors are read: 'dlpack-exchange', 'methods', or None before a commit.", NULL},
    {NULL},
};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tilec.runtime._launcher.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_dealloc = (destructor)Launcher_dealloc,
    .tp_call = (ternaryfunc)Launcher_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A kernel's remembered launch: see launcher.py.",
    .tp_methods = Launcher_methods,
    .tp_getset = Launcher_getset,
    .tp_init = (initproc)Launcher_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_launcher", "tilec's compiled launch path.", -1, NULL,
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
