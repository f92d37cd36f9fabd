"""Builds presk_syntax._binding from the committed, generated tree-sitter parser."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            name="presk_syntax._binding",
            sources=[
                "grammar/bindings/binding.c",
                "grammar/src/parser.c",
                "grammar/src/scanner.c",
            ],
            include_dirs=["grammar/src"],
            extra_compile_args=["-std=c11", "-O2", "-Wno-unused-parameter"],
            define_macros=[("Py_LIMITED_API", "0x030B0000")],
            py_limited_api=True,
        )
    ],
)
