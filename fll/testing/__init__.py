"""Test doubles fll ships so users and CI can exercise its backends without a cluster,
and the TPC-DS corpus its lineage is checked and benchmarked on (`fll.testing.tpcds`).

Nothing in fll itself may import this package."""
