"""Test doubles fll ships so users and CI can exercise its backends without a cluster.

Nothing in fll itself may import this package."""
