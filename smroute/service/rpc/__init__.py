"""The daemon's gRPC edge: servicer, server, messages, the RPC
modules, listeners, authentication, TLS, capacity and the client."""
