"""Shardy: meshes, tensor shardings, sharding rules and propagation."""
