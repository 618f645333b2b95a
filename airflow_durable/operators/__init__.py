"""Durable operators, one module per system; each module imports only its own provider."""
