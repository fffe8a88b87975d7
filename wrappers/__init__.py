"""wrappers package."""
