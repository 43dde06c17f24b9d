"""A class answers the same question as the models: sessions, the participant server, and
the question a session asks (docs/teaching.md)."""
