"""The one ingest pipeline — parse, chunk, embed, write — that every job putting a document into a vector store runs:
an embedding into a collection and a re-embedding into a collection's new version alike."""
