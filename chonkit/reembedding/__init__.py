"""Changing a collection's embedding model without a moment of wrong or missing answers (#18)."""
