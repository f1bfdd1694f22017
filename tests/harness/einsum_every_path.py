"""conv_impl.einsum with its rarely taken paths on every problem that can take them.

The engine takes the float32 channels-last path only for window copies of 32
rows or more (``NHWC_MIN_ROWS``) and splits work into chunks only past about
2 MB of window copy (``CHUNK_BYTES``, ``MIN_POSITIONS``), 4 MB of one image's
window copy (``CF_ROW_BLOCK_BYTES``: blocks of output rows), 512 kB of the
flat input gradient's block (``FLAT_CHUNK_BYTES``) or 1 MB of its layout
(``FLAT_IMAGES_BYTES``: groups of images), and lays out the depthwise path's
input 8 channels at a time (``DIRECT_CHANNELS``); the Winograd path it
dispatches to splits an image into blocks of tile rows only past 1 MB of
transformed tiles (``_winograd.CHUNK_BYTES``): sizes the suite's cost
budget keeps its examples below. This spec lowers those thresholds, so the
suite checks those paths on small problems.
"""

from conv_impl import _einsum_engine, _winograd

_einsum_engine.NHWC_MIN_ROWS = 1
_einsum_engine.CHUNK_BYTES = 256
_einsum_engine.MIN_POSITIONS = 1
_einsum_engine.CF_ROW_BLOCK_BYTES = 256
_einsum_engine.FLAT_CHUNK_BYTES = 256
_einsum_engine.FLAT_IMAGES_BYTES = 256
_einsum_engine.DIRECT_CHANNELS = 3
_winograd.CHUNK_BYTES = 64

from conv_impl.einsum import *  # noqa: E402,F401,F403  (the contract functions)
from conv_impl.einsum import harness_events  # noqa: E402,F401
