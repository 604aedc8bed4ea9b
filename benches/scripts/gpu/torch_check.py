"""The PyTorch check of docs/gpu.md: a bf16 8192^3 matrix product (TFLOP/s)
and a 4 GiB host-to-device copy (GB/s), plus a seeded result whose digits
must be the same natively and in the sandbox."""
import time

import torch

torch.manual_seed(0)
x = torch.randn(256, 256, device="cuda")
print("checksum %.3f" % float((x @ x).abs().sum()))

n = 8192
a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
for _ in range(3):
    a @ b
torch.cuda.synchronize()
reps = 20
t = time.perf_counter()
for _ in range(reps):
    a @ b
torch.cuda.synchronize()
dt = time.perf_counter() - t
print("matmul_tflops %.1f" % (2 * n**3 * reps / dt / 1e12))

host = torch.empty(4 << 30, dtype=torch.uint8).pin_memory()
dev = torch.empty(4 << 30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
t = time.perf_counter()
dev.copy_(host)
torch.cuda.synchronize()
print("h2d_gbps %.1f" % ((4 << 30) / (time.perf_counter() - t) / 1e9))
