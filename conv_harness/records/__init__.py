"""What a failure and a test leave behind, below everything that makes them: the case
file's format (failures.py), its standalone script (script.py), and the tally of what a
test's examples exercised (coverage.py)."""
