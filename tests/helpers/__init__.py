"""Helpers the tests share: plain functions, classes and constants (fixtures stay in conftest.py
files, or here when several test folders use them). No test module imports another test module
or a conftest: they import from here (tests/test_test_layout.py checks it)."""
