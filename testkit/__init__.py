"""Test kit: real loopback backends shared by the tests (tests/) and the benchmarks (bench/).

It lives in the clone next to ``controller/`` and is not installed with the product; it never
imports pytest, so ``pokdeng-table bench`` can use it.
"""
