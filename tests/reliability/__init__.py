"""Reliability suites for the storage kernel (issue 5): power loss, kill -9, kill points,
truncation, corruption, environment faults and concurrency. All tests carry ``@pytest.mark.crash``.

Shared pieces: :mod:`.workload` (a deterministic multi-region workload and its byte-exact
model; the writer loop the subprocess harnesses fork), :mod:`.verify` (checks a recovered store
against the model and classifies outcomes), :mod:`.crashsim` (the power-loss simulator),
:mod:`.engine_workload` (the same at ``SpectorMemory``), :mod:`.harness` (the process plumbing
both levels share: forked children, acknowledgement pipes, kill loops, readers under a killed
writer, fault injection, unprivileged children).
Loop sizes scale with ``--soak`` or ``SPECTOR_RELIABILITY_MULT``; the seed is
``SPECTOR_RELIABILITY_SEED``; ``benchmarks/reliability_report.py`` runs them all.
"""
