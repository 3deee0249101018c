"""Sources: folders and web sites a collection is kept in sync with, incrementally by content hash."""
