//! Golden text tests: one runner over `tests/golden/*/`. Run with `BLESS=1` to rewrite.
