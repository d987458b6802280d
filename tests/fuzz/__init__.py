"""The differential fuzzer: random tile programs against a numpy model (README.md)."""
