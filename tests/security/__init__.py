"""Untrusted strings and the build cache (see docs/robustness.md)."""
