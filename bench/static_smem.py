"""Which shared-memory sizes the driver launches, static and dynamic (issue 18).

    python3 bench/static_smem.py     # on a GPU machine; needs cuda.bindings only

For each case a one-block kernel of 128 threads declares a static `.shared`
array (as tilec does for `scope="shared"`) or uses an `.extern .shared` one
(as for `scope="shared.dyn"` and pools); each thread stores 1000 + tid at the
top end of the array, syncs, reads it back and writes it to global memory.
The driver JIT-compiles the PTX for the device.  Printed per case: the
function's SHARED_SIZE_BYTES and default MAX_DYNAMIC_SHARED_SIZE_BYTES,
whether that attribute was raised to the dynamic size first (and its status), the launch
and synchronize status, and whether every thread read back its value.  The
result is in bench/RESULTS.md and docs/language.md (Limits).
"""
import ctypes
from cuda.bindings import driver as cu

def ok(r):
    st, *v = r
    return st, (v[0] if len(v) == 1 else v)

def ptx(static, dyn):
    decl = f".shared .align 16 .b8 buf[{static}];" if static else ""
    ext = ".extern .shared .align 16 .b8 dbuf[];" if dyn else ""
    base = "buf" if static else "dbuf"
    # each thread writes tid at byte offset (size-4 - 4*tid), reads back, stores to out
    size = static or dyn
    return f""".version 8.4
.target sm_90a
.address_size 64
{ext}
.visible .entry k(.param .u64 p)
{{
 .reg .b32 r<6>; .reg .b64 rd<4>;
 {decl}
 mov.u32 r1, %tid.x;
 shl.b32 r2, r1, 2;
 mov.u32 r3, {base};
 add.u32 r3, r3, {(size & ~3) - 4};
 sub.u32 r3, r3, r2;
 add.u32 r4, r1, 1000;
 st.shared.u32 [r3], r4;
 bar.sync 0;
 ld.shared.u32 r5, [r3];
 ld.param.u64 rd1, [p];
 cvta.to.global.u64 rd1, rd1;
 mul.wide.u32 rd2, r1, 4;
 add.u64 rd1, rd1, rd2;
 st.global.u32 [rd1], r5;
 ret;
}}
"""

print(cu.cuInit(0)[0])
st, dev = ok(cu.cuDeviceGet(0))
print("device", cu.cuDeviceGetName(64, dev)[1].split(b"\0")[0])
print("optin", cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev))
print("perblock", cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, dev))
st, ctx = ok(cu.cuDevicePrimaryCtxRetain(dev)); cu.cuCtxSetCurrent(ctx)
st, out = ok(cu.cuMemAlloc(128 * 4))
A = cu.CUfunction_attribute
for static, dyn, setattr_ in [(49152, 0, False), (49153, 0, False), (200 * 1024, 0, False), (232448, 0, False),
                              (200 * 1024, 0, True), (100 * 1024, 100 * 1024, True), (0, 200 * 1024, True), (0, 200*1024, False)]:
    text = ptx(static, dyn)
    tag = f"static={static} dyn={dyn} attr={setattr_}:"
    st, mod = ok(cu.cuModuleLoadData(text.encode() + b"\0"))
    if st != cu.CUresult.CUDA_SUCCESS:
        print(tag, "load", st); continue
    st, fn = ok(cu.cuModuleGetFunction(mod, b"k"))
    sh = cu.cuFuncGetAttribute(A.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn)[1]
    mx = cu.cuFuncGetAttribute(A.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fn)[1]
    sa = None
    if setattr_:
        sa = cu.cuFuncSetAttribute(fn, A.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dyn)[0]
    cu.cuMemsetD32(out, 0, 128)
    arg = ctypes.c_uint64(int(out))
    argp = (ctypes.c_void_p * 1)(ctypes.addressof(arg))
    st = cu.cuLaunchKernel(fn, 1, 1, 1, 128, 1, 1, dyn, 0, ctypes.addressof(argp), 0)[0]
    sy = cu.cuCtxSynchronize()[0]
    host = (ctypes.c_uint32 * 128)()
    cu.cuMemcpyDtoH(host, out, 512)
    good = all(host[i] == 1000 + i for i in range(128))
    print(tag, f"SHARED_SIZE_BYTES={sh} default MAX_DYNAMIC={mx} setattr={sa} launch={st} sync={sy} correct={good}")
    cu.cuModuleUnload(mod)
