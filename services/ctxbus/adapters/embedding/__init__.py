"""Embedding adapters: text -> unit vectors, from files shipped in installed packages only."""
