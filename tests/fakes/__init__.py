"""Fakes for what cannot run in a unit test, each named after the contract it imitates."""
