/* The fast path's launch, compiled: one C call checks a call's arguments against the signature
 * the checker last accepted, reads the data pointers, allocates the outputs and calls
 * cuLaunchKernel (runtime/native_launch.py builds and loads it; fast_call.py uses it).
 *
 * A `Launcher` holds one primed signature (a `Spec`): per tensor argument its type, dtype,
 * shape, strides (or "contiguous"), device, alignment and parameter slot; the passed scalars'
 * kinds; the outputs' sizes; the pairs of tensors that must not overlap; the tensor-map sources'
 * addresses (their maps are in the block); the function, grid, block, shared memory, the
 * context to launch in, and the parameter block as primed. `attempt(args, stream)`
 * returns what the kernel returns, or `miss` (NotImplemented) where anything differs;
 * `call(args, stream)` then returns what `fallback(args, stream)` does: the Python path, which
 * re-primes after its launch. Each call writes its pointers and scalars into its own copy of
 * the block (on the stack) and launches without holding the GIL, as a ctypes call does; a
 * re-prime makes a new Spec, and a call holds a reference to the Spec it started with.
 *
 * No CUDA header: the two driver entry points arrive as addresses.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int (*LaunchFn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, void *, void **, void **);
typedef int (*CtxFn)(void **);

enum { K_I8, K_I16, K_I32, K_I64, K_U8, K_U16, K_U32, K_U64, K_F32, K_F64 };
#define MAX_POINTERS 64
#define MAX_SCALARS 64
#define MAX_PARAMS 256
#define MAX_BLOCK_BYTES 4096 /* CUDA's parameter space (4 KB before 12.1) */

/* what a call reads of a tensor: the getters dtype, shape and device, then the methods stride()
 * (or is_contiguous()) and data_ptr(); each through the primed type's own descriptor */
enum { R_DTYPE, R_SHAPE, R_DEVICE, R_LAYOUT, R_DATA_PTR, N_READS };

typedef struct {
    Py_ssize_t arg, slot;
    PyObject *type, *dtype, *shape, *strides, *device; /* strides NULL: must be contiguous */
    PyObject *read[N_READS]; /* the type's descriptors: getters, then methods from R_LAYOUT on */
    unsigned long long align;
} TensorSpec;

typedef struct { Py_ssize_t arg, slot; int kind; } ScalarSpec;
typedef struct { PyObject **argv; Py_ssize_t nsizes, slot; } OutputSpec; /* sizes.., dtype, device */
typedef struct { Py_ssize_t a, b; unsigned long long end_a, end_b; } Pair;
typedef struct { Py_ssize_t pointer; unsigned long long value; } Pinned;

typedef struct {
    Py_ssize_t nargs, nt, ns, no, np, nm, nparams;
    TensorSpec *t;
    ScalarSpec *s;
    OutputSpec *o;
    Pair *p;
    Pinned *m;
    PyObject *empty, *kwnames, *device_index;
    void *function, *primary;
    unsigned grid[3], block[3], smem;
    size_t *at;             /* per parameter: its offset in `storage` */
    size_t total;           /* bytes of `storage` */
    unsigned char *storage; /* the block as primed; each call launches from its own copy */
} Spec;

static PyObject *s_dtype, *s_shape, *s_stride, *s_is_contiguous, *s_device, *s_data_ptr;

/* a tensor spec's reads, looked up on its exact type once. A read takes the type's own
 * descriptor where attribute access surely finds it and does nothing else with it: the type
 * keeps the generic attribute lookup (no __getattribute__ or __getattr__ of its own), and the
 * attribute is a C getter (getset) or a property, or a C method or a Python function (called
 * with the tensor as self, as a bound call would). Anything else (a plain class attribute, a
 * staticmethod, a callable object) keeps the lookup by name on each call (NULL here), so both
 * ways read what `x.device` / `x.stride()` read. (A method assigned on one instance is not
 * consulted: the check compares what the type's methods say of the tensor.) Never fails: a
 * missing attribute reads by name, and misses there. */
static void find_reads(TensorSpec *t) {
    PyObject *names[N_READS] = {s_dtype, s_shape, s_device,
                                t->strides ? s_stride : s_is_contiguous, s_data_ptr};
    if (!PyType_Check(t->type) || ((PyTypeObject *)t->type)->tp_getattro != PyObject_GenericGetAttr)
        return;
    for (int i = 0; i < N_READS; i++) {
        PyObject *d = _PyType_Lookup((PyTypeObject *)t->type, names[i]); /* borrowed */
        int usable = d && (i < R_LAYOUT
            ? (Py_IS_TYPE(d, &PyGetSetDescr_Type) || Py_IS_TYPE(d, &PyProperty_Type))
            : (Py_IS_TYPE(d, &PyMethodDescr_Type) || Py_IS_TYPE(d, &PyFunction_Type)));
        t->read[i] = usable ? Py_NewRef(d) : NULL;
    }
}

/* tensor x's value of read i (a new reference, or NULL with an error set) */
static inline PyObject *read_of(TensorSpec *t, int i, PyObject *x) {
    PyObject *d = t->read[i];
    if (d && i < R_LAYOUT) return Py_TYPE(d)->tp_descr_get(d, x, t->type);
    if (d) return PyObject_Vectorcall(d, &x, 1, NULL);
    switch (i) {
    case R_DTYPE: return PyObject_GetAttr(x, s_dtype);
    case R_SHAPE: return PyObject_GetAttr(x, s_shape);
    case R_DEVICE: return PyObject_GetAttr(x, s_device);
    case R_LAYOUT: return PyObject_CallMethodNoArgs(x, t->strides ? s_stride : s_is_contiguous);
    default: return PyObject_CallMethodNoArgs(x, s_data_ptr);
    }
}

static void spec_free(Spec *sp) {
    if (!sp) return;
    for (Py_ssize_t k = 0; sp->t && k < sp->nt; k++) {
        TensorSpec *t = &sp->t[k];
        Py_XDECREF(t->type); Py_XDECREF(t->dtype); Py_XDECREF(t->shape);
        Py_XDECREF(t->strides); Py_XDECREF(t->device);
        for (int i = 0; i < N_READS; i++) Py_XDECREF(t->read[i]);
    }
    for (Py_ssize_t k = 0; sp->o && k < sp->no; k++) {
        for (Py_ssize_t i = 0; sp->o[k].argv && i < sp->o[k].nsizes + 2; i++)
            Py_XDECREF(sp->o[k].argv[i]);
        free(sp->o[k].argv);
    }
    Py_XDECREF(sp->empty); Py_XDECREF(sp->kwnames); Py_XDECREF(sp->device_index);
    free(sp->t); free(sp->s); free(sp->o); free(sp->p); free(sp->m);
    free(sp->at); free(sp->storage);
    free(sp);
}

static void spec_capsule_free(PyObject *capsule) {
    spec_free((Spec *)PyCapsule_GetPointer(capsule, "tilecraft.spec"));
}

typedef struct {
    PyObject_HEAD
    LaunchFn launch;
    CtxFn get_ctx;
    PyObject *raw_stream, *failed, *miss, *fallback; /* fallback: called on a miss (or None) */
    PyObject *spec; /* a capsule, or NULL before prime */
} Launcher;

static int as_u64(PyObject *v, unsigned long long *out) {
    *out = PyLong_AsUnsignedLongLong(v);
    return !(*out == (unsigned long long)-1 && PyErr_Occurred());
}

static void *as_ptr(PyObject *v) {
    return v == Py_None ? NULL : PyLong_AsVoidPtr(v);
}

/* prime(spec): spec = (nargs, tensors, scalars, outputs, pairs, pinned, empty, device_index,
 *   function, primary, grid, block, smem, params), with
 *   tensors ((arg, slot, type, dtype, shape, strides | None, device, align), ...),
 *   scalars ((arg, slot, kind), ...), outputs ((slot, sizes, dtype, device), ...),
 *   pairs ((a, b, end_a, end_b), ...), pinned ((pointer, value), ...),
 *   params ((address, size), ...): the block's slots, copied now. */
static Spec *parse_spec(PyObject *tup) {
    PyObject *tensors, *scalars, *outputs, *pairs, *pinned, *empty, *device_index, *function,
        *primary, *params;
    Py_ssize_t nargs;
    unsigned gx, gy, gz, bx, by, bz, smem;
    if (!PyArg_ParseTuple(tup, "nO!O!O!O!O!OOOO(III)(III)IO!", &nargs, &PyTuple_Type, &tensors,
                          &PyTuple_Type, &scalars, &PyTuple_Type, &outputs, &PyTuple_Type, &pairs,
                          &PyTuple_Type, &pinned, &empty, &device_index, &function, &primary,
                          &gx, &gy, &gz, &bx, &by, &bz, &smem, &PyTuple_Type, &params))
        return NULL;
    Spec *sp = calloc(1, sizeof(Spec));
    if (!sp) return (Spec *)PyErr_NoMemory();
    sp->nargs = nargs;
    sp->nt = PyTuple_GET_SIZE(tensors);
    sp->ns = PyTuple_GET_SIZE(scalars);
    sp->no = PyTuple_GET_SIZE(outputs);
    sp->np = PyTuple_GET_SIZE(pairs);
    sp->nm = PyTuple_GET_SIZE(pinned);
    sp->nparams = PyTuple_GET_SIZE(params);
    if (sp->nt + sp->no > MAX_POINTERS || sp->ns > MAX_SCALARS || sp->nparams > MAX_PARAMS) {
        PyErr_SetString(PyExc_ValueError, "too many parameters for the native launcher");
        goto fail;
    }
    sp->t = calloc(sp->nt + 1, sizeof(TensorSpec));
    sp->s = calloc(sp->ns + 1, sizeof(ScalarSpec));
    sp->o = calloc(sp->no + 1, sizeof(OutputSpec));
    sp->p = calloc(sp->np + 1, sizeof(Pair));
    sp->m = calloc(sp->nm + 1, sizeof(Pinned));
    sp->at = calloc(sp->nparams + 1, sizeof(size_t));
    if (!sp->t || !sp->s || !sp->o || !sp->p || !sp->m || !sp->at) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t k = 0; k < sp->nt; k++) {
        TensorSpec *t = &sp->t[k];
        PyObject *strides;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(tensors, k), "nnOOOOOK", &t->arg, &t->slot,
                              &t->type, &t->dtype, &t->shape, &strides, &t->device, &t->align))
            goto fail;
        t->strides = strides == Py_None ? NULL : strides;
        Py_INCREF(t->type); Py_INCREF(t->dtype); Py_INCREF(t->shape);
        Py_XINCREF(t->strides); Py_INCREF(t->device);
        find_reads(t);
    }
    for (Py_ssize_t k = 0; k < sp->ns; k++) {
        ScalarSpec *s = &sp->s[k];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(scalars, k), "nni", &s->arg, &s->slot, &s->kind))
            goto fail;
    }
    for (Py_ssize_t k = 0; k < sp->no; k++) {
        OutputSpec *o = &sp->o[k];
        PyObject *sizes, *dtype, *device;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(outputs, k), "nO!OO", &o->slot, &PyTuple_Type,
                              &sizes, &dtype, &device))
            goto fail;
        o->nsizes = PyTuple_GET_SIZE(sizes);
        o->argv = calloc(o->nsizes + 2, sizeof(PyObject *));
        if (!o->argv) {
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t i = 0; i < o->nsizes; i++) {
            o->argv[i] = PyTuple_GET_ITEM(sizes, i);
            Py_INCREF(o->argv[i]);
        }
        o->argv[o->nsizes] = dtype;
        o->argv[o->nsizes + 1] = device;
        Py_INCREF(dtype); Py_INCREF(device);
    }
    for (Py_ssize_t k = 0; k < sp->np; k++) {
        Pair *p = &sp->p[k];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(pairs, k), "nnKK", &p->a, &p->b, &p->end_a,
                              &p->end_b))
            goto fail;
    }
    for (Py_ssize_t k = 0; k < sp->nm; k++) {
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(pinned, k), "nK", &sp->m[k].pointer,
                              &sp->m[k].value))
            goto fail;
    }
    sp->empty = empty; Py_INCREF(empty);
    sp->device_index = device_index; Py_INCREF(device_index);
    sp->kwnames = Py_BuildValue("(ss)", "dtype", "device");
    if (!sp->kwnames) goto fail;
    sp->function = as_ptr(function);
    sp->primary = as_ptr(primary);
    if (PyErr_Occurred()) goto fail;
    sp->grid[0] = gx; sp->grid[1] = gy; sp->grid[2] = gz;
    sp->block[0] = bx; sp->block[1] = by; sp->block[2] = bz;
    sp->smem = smem;
    /* the block: each slot at a 16-byte boundary, copied from the Python block's slots */
    size_t total = 0;
    for (Py_ssize_t k = 0; k < sp->nparams; k++) {
        Py_ssize_t size;
        unsigned long long address;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(params, k), "Kn", &address, &size)) goto fail;
        total += ((size_t)size + 15) & ~(size_t)15;
    }
    if (total > MAX_BLOCK_BYTES) {
        PyErr_SetString(PyExc_ValueError, "a parameter block too large for the native launcher");
        goto fail;
    }
    sp->total = total;
    sp->storage = calloc(total + 16, 1);
    if (!sp->storage) {
        PyErr_NoMemory();
        goto fail;
    }
    size_t at = 0;
    for (Py_ssize_t k = 0; k < sp->nparams; k++) {
        Py_ssize_t size;
        unsigned long long address;
        PyArg_ParseTuple(PyTuple_GET_ITEM(params, k), "Kn", &address, &size);
        memcpy(sp->storage + at, (const void *)(uintptr_t)address, (size_t)size);
        sp->at[k] = at;
        at += ((size_t)size + 15) & ~(size_t)15;
    }
    for (Py_ssize_t k = 0; k < sp->nt; k++)
        if (sp->t[k].slot < 0 || sp->t[k].slot >= sp->nparams) goto bad_slot;
    for (Py_ssize_t k = 0; k < sp->ns; k++)
        if (sp->s[k].slot < 0 || sp->s[k].slot >= sp->nparams) goto bad_slot;
    for (Py_ssize_t k = 0; k < sp->no; k++)
        if (sp->o[k].slot < 0 || sp->o[k].slot >= sp->nparams) goto bad_slot;
    return sp;
bad_slot:
    PyErr_SetString(PyExc_ValueError, "a slot outside the parameter block");
fail:
    spec_free(sp);
    return NULL;
}

static PyObject *launcher_prime(Launcher *self, PyObject *tup) {
    Spec *sp = parse_spec(tup);
    if (!sp) return NULL;
    PyObject *capsule = PyCapsule_New(sp, "tilecraft.spec", spec_capsule_free);
    if (!capsule) {
        spec_free(sp);
        return NULL;
    }
    Py_XSETREF(self->spec, capsule);
    Py_RETURN_NONE;
}

static PyObject *launcher_clear(Launcher *self, PyObject *unused) {
    Py_CLEAR(self->spec);
    Py_RETURN_NONE;
}

/* 1: equal; 0: not (or an error, cleared) */
static int same(PyObject *got, PyObject *want) {
    if (!got) {
        PyErr_Clear();
        return 0;
    }
    int eq = got == want ? 1 : PyObject_RichCompareBool(got, want, Py_EQ);
    Py_DECREF(got);
    if (eq < 0) {
        PyErr_Clear();
        return 0;
    }
    return eq;
}

typedef union { int8_t i8; int16_t i16; int32_t i32; int64_t i64; uint8_t u8; uint16_t u16;
                uint32_t u32; uint64_t u64; float f32; double f64; } Scalar;

/* the value of a passed scalar as the checker would take it; 0: not this way (a miss) */
static int scalar(PyObject *x, int kind, Scalar *out) {
    if (kind == K_F32 || kind == K_F64) {
        double v;
        if (PyFloat_CheckExact(x)) v = PyFloat_AS_DOUBLE(x);
        else if (PyLong_CheckExact(x)) {
            v = PyLong_AsDouble(x);
            if (v == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
        } else return 0;
        if (kind == K_F32) out->f32 = (float)v;
        else out->f64 = v;
        return 1;
    }
    if (!PyLong_CheckExact(x)) return 0;
    if (kind == K_U64) {
        unsigned long long v = PyLong_AsUnsignedLongLong(x);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        out->u64 = v;
        return 1;
    }
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    switch (kind) {
    case K_I8: if (v < INT8_MIN || v > INT8_MAX) return 0; out->i8 = (int8_t)v; return 1;
    case K_I16: if (v < INT16_MIN || v > INT16_MAX) return 0; out->i16 = (int16_t)v; return 1;
    case K_I32: if (v < INT32_MIN || v > INT32_MAX) return 0; out->i32 = (int32_t)v; return 1;
    case K_I64: out->i64 = v; return 1;
    case K_U8: if (v < 0 || v > UINT8_MAX) return 0; out->u8 = (uint8_t)v; return 1;
    case K_U16: if (v < 0 || v > UINT16_MAX) return 0; out->u16 = (uint16_t)v; return 1;
    case K_U32: if (v < 0 || v > UINT32_MAX) return 0; out->u32 = (uint32_t)v; return 1;
    }
    return 0;
}

static const size_t SCALAR_BYTES[] = {1, 2, 4, 8, 1, 2, 4, 8, 4, 8};

/* v (a reference this takes) as a data pointer; 0: not one (the error cleared) */
static int as_pointer(PyObject *v, unsigned long long *out) {
    if (!v) {
        PyErr_Clear();
        return 0;
    }
    int ok = as_u64(v, out);
    Py_DECREF(v);
    if (!ok) PyErr_Clear();
    return ok;
}

/* attempt(args, stream): what the kernel returns, or `miss` */
static PyObject *launcher_attempt(Launcher *self, PyObject *const *argv, Py_ssize_t n) {
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "attempt(args, stream)");
        return NULL;
    }
    PyObject *args = argv[0], *stream_obj = argv[1], *capsule = self->spec;
    if (!capsule || !PyTuple_CheckExact(args)) return Py_NewRef(self->miss);
    Py_INCREF(capsule);
    Spec *sp = (Spec *)PyCapsule_GetPointer(capsule, "tilecraft.spec");
    PyObject *outs[MAX_POINTERS];
    Py_ssize_t made = 0;
    PyObject *result = NULL;
    unsigned long long ptr[MAX_POINTERS];
    Scalar values[MAX_SCALARS];
    void *stream = NULL, *ctx = NULL;
    if (PyTuple_GET_SIZE(args) != sp->nargs) goto miss;
    for (Py_ssize_t k = 0; k < sp->nt; k++) {
        TensorSpec *t = &sp->t[k];
        PyObject *x = PyTuple_GET_ITEM(args, t->arg);
        if ((PyObject *)Py_TYPE(x) != t->type) goto miss;
        if (!same(read_of(t, R_DTYPE, x), t->dtype)) goto miss;
        if (!same(read_of(t, R_SHAPE, x), t->shape)) goto miss;
        if (!same(read_of(t, R_LAYOUT, x), t->strides ? t->strides : Py_True)) goto miss;
        if (!same(read_of(t, R_DEVICE, x), t->device)) goto miss;
        if (!as_pointer(read_of(t, R_DATA_PTR, x), &ptr[k])) goto miss;
        if (t->align && ptr[k] % t->align) goto miss;
    }
    for (Py_ssize_t k = 0; k < sp->np; k++) {
        Pair *p = &sp->p[k];
        if (ptr[p->a] < ptr[p->b] + p->end_b && ptr[p->b] < ptr[p->a] + p->end_a) goto miss;
    }
    for (Py_ssize_t k = 0; k < sp->nm; k++)
        if (ptr[sp->m[k].pointer] != sp->m[k].value) goto miss;
    for (Py_ssize_t k = 0; k < sp->ns; k++)
        if (!scalar(PyTuple_GET_ITEM(args, sp->s[k].arg), sp->s[k].kind, &values[k])) goto miss;
    if (self->get_ctx(&ctx) || ctx != sp->primary) goto miss;
    if (stream_obj == Py_None) {
        PyObject *s = PyObject_CallOneArg(self->raw_stream, sp->device_index);
        if (!s) goto error;
        stream = PyLong_AsVoidPtr(s);
        Py_DECREF(s);
    } else {
        stream = PyLong_AsVoidPtr(stream_obj);
        if (PyErr_Occurred()) {  /* (not a handle: the Python path decides) */
            PyErr_Clear();
            goto miss;
        }
    }
    for (; made < sp->no; made++) {
        OutputSpec *o = &sp->o[made];
        outs[made] = PyObject_Vectorcall(sp->empty, o->argv, (size_t)o->nsizes, sp->kwnames);
        if (!outs[made]) goto error;
        if (!as_pointer(PyObject_CallMethodNoArgs(outs[made], s_data_ptr), &ptr[sp->nt + made])) {
            made++;
            PyErr_SetString(PyExc_RuntimeError, "an output without a data pointer");
            goto error;
        }
    }
    /* the block: this call's own copy (on the stack), so the launch can run without the GIL */
    _Alignas(16) unsigned char block[MAX_BLOCK_BYTES + 16];
    void *params[MAX_PARAMS];
    memcpy(block, sp->storage, sp->total);
    for (Py_ssize_t k = 0; k < sp->nparams; k++) params[k] = block + sp->at[k];
    for (Py_ssize_t k = 0; k < sp->nt; k++)
        memcpy(params[sp->t[k].slot], &ptr[k], sizeof(void *));
    for (Py_ssize_t k = 0; k < sp->no; k++)
        memcpy(params[sp->o[k].slot], &ptr[sp->nt + k], sizeof(void *));
    for (Py_ssize_t k = 0; k < sp->ns; k++)
        memcpy(params[sp->s[k].slot], &values[k], SCALAR_BYTES[sp->s[k].kind]);
    int err;
    Py_BEGIN_ALLOW_THREADS  /* (a full launch queue blocks here; other threads run, as ctypes) */
    err = self->launch(sp->function, sp->grid[0], sp->grid[1], sp->grid[2], sp->block[0],
                       sp->block[1], sp->block[2], sp->smem, stream, params, NULL);
    Py_END_ALLOW_THREADS
    if (err) {
        PyObject *r = PyObject_CallFunction(self->failed, "i", err);
        Py_XDECREF(r);
        if (!r) goto error;
    }
    if (sp->no == 0) result = Py_NewRef(Py_None);
    else if (sp->no == 1) result = Py_NewRef(outs[0]);
    else {
        result = PyTuple_New(sp->no);
        if (!result) goto error;
        for (Py_ssize_t k = 0; k < sp->no; k++) PyTuple_SET_ITEM(result, k, Py_NewRef(outs[k]));
    }
    for (Py_ssize_t k = 0; k < made; k++) Py_DECREF(outs[k]);
    Py_DECREF(capsule);
    return result;
miss:
    result = Py_NewRef(self->miss);
error:
    for (Py_ssize_t k = 0; k < made; k++) Py_DECREF(outs[k]);
    Py_DECREF(capsule);
    return result;
}

/* call(args, stream): attempt, and on a miss what fallback(args, stream) returns */
static PyObject *launcher_call(Launcher *self, PyObject *const *argv, Py_ssize_t n) {
    PyObject *r = launcher_attempt(self, argv, n);
    if (r != self->miss || self->fallback == Py_None) return r;
    Py_DECREF(r);
    return PyObject_Vectorcall(self->fallback, argv, 2, NULL);
}

static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    unsigned long long launch, get_ctx;
    PyObject *raw_stream, *failed, *miss, *fallback;
    if (!PyArg_ParseTuple(args, "KKOOOO", &launch, &get_ctx, &raw_stream, &failed, &miss,
                          &fallback))
        return NULL;
    Launcher *self = (Launcher *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->launch = (LaunchFn)(uintptr_t)launch;
    self->get_ctx = (CtxFn)(uintptr_t)get_ctx;
    self->raw_stream = Py_NewRef(raw_stream);
    self->failed = Py_NewRef(failed);
    self->miss = Py_NewRef(miss);
    self->fallback = Py_NewRef(fallback);
    self->spec = NULL;
    return (PyObject *)self;
}

static void launcher_dealloc(Launcher *self) {
    Py_XDECREF(self->raw_stream); Py_XDECREF(self->failed); Py_XDECREF(self->miss);
    Py_XDECREF(self->fallback);
    Py_XDECREF(self->spec);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *launcher_primed(Launcher *self, void *closure) {
    return PyBool_FromLong(self->spec != NULL);
}

static PyMethodDef launcher_methods[] = {
    {"call", (PyCFunction)(void (*)(void))launcher_call, METH_FASTCALL,
     "call(args, stream): what the kernel returns, else what fallback(args, stream) does"},
    {"attempt", (PyCFunction)(void (*)(void))launcher_attempt, METH_FASTCALL,
     "attempt(args, stream): what the kernel returns, or miss"},
    {"prime", (PyCFunction)launcher_prime, METH_O, "prime(spec): the signature to launch"},
    {"clear", (PyCFunction)launcher_clear, METH_NOARGS, "forget the primed signature"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef launcher_getset[] = {
    {"primed", (getter)launcher_primed, NULL, "whether a signature is primed", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_tc_launch.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = launcher_new,
    .tp_dealloc = (destructor)launcher_dealloc,
    .tp_methods = launcher_methods,
    .tp_getset = launcher_getset,
    .tp_doc = "Launcher(cuLaunchKernel, cuCtxGetCurrent, raw_stream, failed, miss, fallback)",
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tc_launch", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__tc_launch(void) {
    s_dtype = PyUnicode_InternFromString("dtype");
    s_shape = PyUnicode_InternFromString("shape");
    s_stride = PyUnicode_InternFromString("stride");
    s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
    s_device = PyUnicode_InternFromString("device");
    s_data_ptr = PyUnicode_InternFromString("data_ptr");
    if (!s_dtype || !s_shape || !s_stride || !s_is_contiguous || !s_device || !s_data_ptr)
        return NULL;
    if (PyType_Ready(&LauncherType) < 0) return NULL;
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
