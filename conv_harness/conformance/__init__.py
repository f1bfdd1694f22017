"""The conformance suite, shipped inside the package so that a wheel carries it.

``conv-harness`` (conv_harness/cli.py) runs these test modules from wherever the
package is installed, with this folder's pytest.ini and conftest.py. In a
clone, tests/conformance/ re-exports the same test functions, so that
``pytest -n auto`` there runs the same tests under the same ids.
"""
