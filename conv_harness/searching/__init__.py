"""One conformance test's searches, above the triage they call: its state (state.py),
one example (suite.py), the catalogue sweep (sweep.py), and the first search with its
follow-ups and verdict (search.py)."""
