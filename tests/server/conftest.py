"""Server test fixtures: a store with the seed's HR example and the A → B → C chain."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from fll.server import create_app

from .fixtures import record_all


@pytest.fixture
def seeded(store):
    record_all(store)
    return store


@pytest.fixture
def client(seeded):
    with TestClient(create_app(seeded)) as c:
        yield c


def v3(ns: str, ds: str, rest: str = "") -> str:
    from urllib.parse import quote
    return f"/v3/namespaces/{quote(ns, safe='')}/datasets/{quote(ds, safe='')}{rest}"
