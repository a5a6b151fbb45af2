"""Property-based run of schemathesis against /openapi.json (bounded examples):
no generated request may produce a 500, and every error keeps the one shape."""
from __future__ import annotations

import tempfile

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from fll import open_store
from fll.server import create_app

from .fixtures import record_all

_store = open_store(f"sqlite:///{tempfile.mkdtemp(prefix='fll-st-')}/st.db")
record_all(_store)
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(_store))


@schema.parametrize()
@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_no_generated_request_crashes_the_server(case):
    response = case.call()
    case.validate_response(response, checks=(not_a_server_error,))
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error", "status"} and body["status"] == response.status_code
