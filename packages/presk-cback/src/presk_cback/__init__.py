"""presk-cback: C from kernels: the native backend (cffi), the C export.

Modules (imported one by one, so that start-up pays only for what it uses):
`toolchain` (the C compiler, E9001), `cache` (objects by content), `load` (cffi's ABI
mode), `libm` (presk libm and its Python face), `gemm` (the generated GEMM), `contract`
(contractions among kernels), `emit` (C for PSK-Kernel), `native` (`NativeEntry`: an
entry compiled and run). docs/native.md describes them.
"""

__version__ = "0.1.0"
