# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Fusion's native row kernels (``csrc/fusion.c``), bound by Cython.

Arrays are numpy (any buffer): Cython checks each one's dtype, dimensions and contiguity and
raises ``ValueError`` on a mismatch; the shapes are checked here. The GIL is released while
computing.
"""

cdef extern from "csrc/fusion.h" nogil:
    void c_relevance_rows "relevance_rows"(
        const double *lex, const double *dense, const double *ceiling, double *out,
        Py_ssize_t n, Py_ssize_t width)


def relevance_rows(
    const double[:, ::1] lex,
    const double[:, ::1] dense,
    const double[::1] ceiling,
    double[:, ::1] out not None,
) -> None:
    """Absolute relevance of pool rows into ``out`` (n, W) float64 from the raw lexical
    (n, W) and dense (n, W) scores and each row's lexical ceiling (n,): ``lex`` and
    ``ceiling`` both or neither (None), ``dense`` or None (see ``csrc/fusion.h``)."""
    cdef Py_ssize_t n = out.shape[0], width = out.shape[1]
    if (lex is None) != (ceiling is None):
        raise ValueError("relevance_rows: lex and ceiling come together")
    if lex is not None and (lex.shape[0] != n or lex.shape[1] != width or ceiling.shape[0] != n):
        raise ValueError("relevance_rows: lex must be (n, W) and ceiling (n,) like out")
    if dense is not None and (dense.shape[0] != n or dense.shape[1] != width):
        raise ValueError("relevance_rows: dense must be (n, W) like out")
    cdef const double *lp = NULL
    cdef const double *cp = NULL
    cdef const double *dp = NULL
    if lex is not None and n and width:
        lp = &lex[0, 0]
        cp = &ceiling[0]
    if dense is not None and n and width:
        dp = &dense[0, 0]
    if not (n and width):
        return
    with nogil:
        c_relevance_rows(lp, dp, cp, &out[0, 0], n, width)
