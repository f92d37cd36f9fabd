"""Contractions among kernels: their recognition lives in presk-kernel (presk_kernel.contract),
where the `layout` pass records a contraction's GEMM statement on its layout; the names stay
importable from here, their former home."""

from presk_kernel.contract import (
    Contraction,
    as_gemm,
    contraction,
    flatten,
    linear,
    perfect_nest,
    recognize,
)

__all__ = [
    "Contraction",
    "as_gemm",
    "contraction",
    "flatten",
    "linear",
    "perfect_nest",
    "recognize",
]
