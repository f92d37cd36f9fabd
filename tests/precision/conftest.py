import pytest


@pytest.fixture(scope="session")
def compiler_or_skip():
    """The C toolchain (the native runs), or a skip that says why there is none."""
    from presk_cback.toolchain import find_toolchain
    from presk_syntax.diagnostics import DiagnosticError

    try:
        return find_toolchain()
    except DiagnosticError as e:
        pytest.skip(f"no C compiler: {e.diagnostics[0].message}")
