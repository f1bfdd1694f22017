"""Benchmarks for conv_impl (see conv_speed.py)."""
