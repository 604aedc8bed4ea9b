/* The CUDA driver-API check of docs/gpu.md: init, device name and memory,
 * a copy there and back, a PTX kernel, managed memory from both sides.
 * Prints the same lines on any run that works; exits 1 on the first error. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
    const char *s_ = 0; cuGetErrorName(r_, &s_); \
    printf("FAIL %s: %s\n", #x, s_ ? s_ : "?"); exit(1); } } while (0)

static const char *ptx =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry add_one(.param .u64 p, .param .u32 n) {\n"
    " .reg .pred %p<2>; .reg .b32 %r<6>; .reg .b64 %rd<5>; .reg .f32 %f<3>;\n"
    " ld.param.u64 %rd1, [p]; ld.param.u32 %r2, [n];\n"
    " mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x; mov.u32 %r5, %tid.x;\n"
    " mad.lo.s32 %r1, %r3, %r4, %r5;\n"
    " setp.ge.u32 %p1, %r1, %r2; @%p1 bra DONE;\n"
    " cvta.to.global.u64 %rd2, %rd1; mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd2, %rd3;\n"
    " ld.global.f32 %f1, [%rd4]; add.f32 %f2, %f1, 0f3F800000; st.global.f32 [%rd4], %f2;\n"
    "DONE:\n ret;\n}\n";

int main(void) {
    enum { N = 1 << 20 };
    CUdevice dev; CUcontext ctx; CUmodule mod; CUfunction fn;
    char name[256]; size_t total = 0;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDeviceGetName(name, sizeof name, dev));
    CK(cuDeviceTotalMem(&total, dev));
    printf("device %s, %zu MiB\n", name, total >> 20);
    CK(cuCtxCreate(&ctx, NULL, 0, dev));
    float *host = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) host[i] = (float)i;
    CUdeviceptr d;
    CK(cuMemAlloc(&d, N * sizeof(float)));
    CK(cuMemcpyHtoD(d, host, N * sizeof(float)));
    CK(cuModuleLoadData(&mod, ptx));
    CK(cuModuleGetFunction(&fn, mod, "add_one"));
    unsigned n = N;
    void *args[] = { &d, &n };
    CK(cuLaunchKernel(fn, N / 256, 1, 1, 256, 1, 1, 0, 0, args, 0));
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(host, d, N * sizeof(float)));
    int bad = 0;
    for (int i = 0; i < N; i++) bad += host[i] != (float)i + 1.0f;
    printf("kernel: %d of %d wrong\n", bad, N);
    float *m;
    CK(cuMemAllocManaged((CUdeviceptr *)&m, N * sizeof(float), CU_MEM_ATTACH_GLOBAL));
    for (int i = 0; i < N; i++) m[i] = 2.0f * i;
    CUdeviceptr dm = (CUdeviceptr)m;
    void *margs[] = { &dm, &n };
    CK(cuLaunchKernel(fn, N / 256, 1, 1, 256, 1, 1, 0, 0, margs, 0));
    CK(cuCtxSynchronize());
    bad = 0;
    for (int i = 0; i < N; i++) bad += m[i] != 2.0f * i + 1.0f;
    printf("managed: %d of %d wrong\n", bad, N);
    CK(cuMemFree(d));
    CK(cuMemFree(dm));
    CK(cuCtxDestroy(ctx));
    return bad != 0;
}
