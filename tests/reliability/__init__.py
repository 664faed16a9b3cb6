"""Reliability suites for the storage kernel (issue 5): power loss, kill -9, kill points,
truncation, corruption, environment faults and concurrency. All tests carry ``@pytest.mark.crash``.

Shared pieces: :mod:`.workload` (a deterministic multi-region workload, its byte-exact model and
the store verifier), :mod:`.crashsim` (the power-loss simulator), :mod:`.procs` (writer
subprocess harnesses).
"""
