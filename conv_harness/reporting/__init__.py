"""Reporting what a run found: the run summary (the case files and scripts each failure
leaves are conv_harness/records/)."""
