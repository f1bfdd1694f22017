"""Running an implementation under test: loading it from a spec, what it may be given
(CAPABILITIES), calling it safely, and isolating calls that crash or hang in C.
"""
