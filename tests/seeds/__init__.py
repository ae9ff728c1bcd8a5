"""The seeds' own code, kept verbatim as test oracles (see README.md here)."""
