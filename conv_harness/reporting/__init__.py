"""Reporting what a run found: case files, reproduction scripts, coverage of what was drawn,
and the run summary.
"""
