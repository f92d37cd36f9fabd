"""presk-cback: C from kernels: the native backend (cffi), the C export.

Modules (imported one by one, so that start-up pays only for what it uses):
`toolchain` (the C compiler, E9001), `cache` (objects by content), `load` (cffi's ABI
mode): presk-core's `presk_core.cc` under this generator's version; `gemm` (the generated
GEMM; presk libm, which every file includes, is presk-kernel's `presk_kernel.libm`), `contract`
(the names of presk_kernel.contract, where the layout pass recognises contractions), `emit`
(C for PSK-Kernel: it renders the layouts it is given, a GEMM statement as GEMM calls), `native` (`NativeEntry`: an
entry compiled and run), `export_c` and `export_main` (the C export: an entry as a C
program, docs/export-c.md). docs/native.md describes them.
"""

__version__ = "0.1.0"
