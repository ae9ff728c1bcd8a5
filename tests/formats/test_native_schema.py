"""The native event JSON Schema agrees with the reader: valid lines read, invalid ones refused."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from ledger.formats.seed_dialects import RecordError, native_record
from tests.helpers import ROOT, SAMPLES

SCHEMA = json.loads((ROOT / "ledger" / "schema" / "native-event.schema.json").read_text())


def sample_events() -> list[dict]:
    lines = (SAMPLES / "bugfix" / "night-run.jsonl").read_text().splitlines()
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # the torn line the sample keeps on purpose
    return events


def test_schema_is_valid() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("event", sample_events())
def test_sample_native_events_validate_and_read(event: dict) -> None:
    jsonschema.validate(event, SCHEMA)
    native_record(event)


@pytest.mark.parametrize(
    "event",
    [
        {"type": "round"},
        {"session": "", "type": "round"},
        {"session": "s", "type": "turn"},
        {"session": "s", "type": "action"},
        {"session": "s", "type": "action", "action": "deploy"},
        {"session": "s", "type": "round", "output_tokens": -1},
        {"session": "s", "type": "round", "tool_error": "yes"},
        {"session": "s", "type": "end", "outcome": "done"},
    ],
)
def test_invalid_events_are_refused_by_both(event: dict) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(event, SCHEMA)
    with pytest.raises(RecordError):
        native_record(event)


def test_schema_is_packaged() -> None:
    import ledger

    assert (Path(ledger.__file__).parent / "schema" / "native-event.schema.json").exists()
