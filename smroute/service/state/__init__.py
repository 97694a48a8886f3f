"""The daemon's durable state: the SQLite store, its codec,
the durable writer and the resume at start."""
