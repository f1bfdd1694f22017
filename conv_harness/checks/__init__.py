"""Checking results: the oracle, the rounding-error bound, the comparison under it,
the registry of checks, the oracle-free properties, and the diagnosis of which call was wrong.
"""
