"""The token-bias study stored as a dataset: its pairs written where runs read instances.

The study (`cogbias.studies.tokenbias`) builds its pairs from a study file; storing them is an
import like any other (one transaction, idempotent, replaced when the file changes), so a
token-bias run is a dataset run over them.
"""

from __future__ import annotations

from cogbias.datasets import importing
from cogbias.datasets.common import ImportSummary
from cogbias.store import Store
from cogbias.studies.tokenbias import KIND, Study, build_instances, load_study


def materialise(store: Store, study: Study | None = None) -> ImportSummary:
    """Write the study's pairs into the store as the dataset `<study.id>` (idempotent).

    A changed study file replaces the stored pairs, unless runs have decisions on pairs it no
    longer has (`importing.StrandedRuns`); everything is built before the transaction opens,
    so a bad file writes nothing.
    """
    study = study or load_study()
    built = list(build_instances(study))
    with importing.Import(store, study.id, KIND, [study.path], replace=True) as job:
        if job.unchanged:
            return job.summary
        job.add_instances((instance, True) for instance in built)
        job.finish(source=str(study.path), alternatives=study.alternatives, study=study.id)
    return job.summary
