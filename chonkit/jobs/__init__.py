"""Durable jobs, shared by every kind (embed, remove, reembed): their rows, what the API shows of them, and the
loop that claims and runs work."""
