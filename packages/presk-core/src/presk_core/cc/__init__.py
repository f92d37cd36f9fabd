"""The C of presk: one toolchain, one content cache and one loader, for every object presk
compiles (the interpreter's helpers here, presk libm in presk-kernel, the native backend in
presk-cback).

- `toolchain`: the compiler (`cc`, or `$CC`), its identity, `-march=native` resolved, the
  flags of DESIGN §11 (`-ffp-contract=off` always); E9001 when there is none.
- `cache`: objects by content key (generator version, compiler identity, resolved target,
  flags, source), each verified by its sha256 when it is loaded; folders 0700, refused when
  another user could write them (E9003–E9008).
- `load`: open an object (cffi's ABI mode, ctypes or Python's extension loader) and check
  its symbols; E9009 when it cannot be.
"""
