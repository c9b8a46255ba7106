"""One bound on project ids: the contract's, repeated only where the lean hook client may import nothing else."""

from ctxbus.contract import envelope
from ctxbus.core import queries
from ctxbus.hooks import project, wire


def test_every_copy_of_the_project_bound_is_the_contracts() -> None:
    assert project.MAX_PROJECT_CHARS == wire.MAX_PROJECT_CHARS == envelope.MAX_PROJECT_CHARS
    assert queries.MAX_PROJECT_CHARS is envelope.MAX_PROJECT_CHARS
    field = envelope.Envelope.model_fields["project"]
    assert any(getattr(m, "max_length", None) == envelope.MAX_PROJECT_CHARS for m in field.metadata)
