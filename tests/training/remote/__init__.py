"""Tests of the remote (SSH) training service."""
